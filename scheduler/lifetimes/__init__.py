"""Pod lifetimes: how long a pod of a given request and age will still run.

``features`` makes a pod's feature vector, ``model`` answers survival, remaining-lifetime
quantiles and means for many pods at once (numpy only, what the scheduler runs),
``model_file`` reads and writes a model folder (safetensors and a JSON manifest),
``fit`` fits one with censoring and left truncation (offline, scipy), ``trace_lifetimes``
reads the openb pod lists as lifetime data, ``calibration`` and ``evaluate`` score a
model on pods it did not see, and ``train`` writes the shipped model.
"""
