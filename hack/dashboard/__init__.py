"""The rl-scheduler Grafana dashboard, generated with grafana-foundation-sdk.

``panels`` says what each panel shows (titles, PromQL, units); ``generate`` turns that
into the dashboard JSON shipped in the Helm chart and the ConfigMap in ``deploy/``.
Run ``python -m dashboard`` (``hack`` on ``PYTHONPATH``; ``make generate`` does) after
changing either; a test checks the committed files equal the generator's output.
"""
