"""The learned scheduling policy: the graph builder (``graph``), the scorer's config
(``config``), checkpoints (``weights`` reads them without torch, ``checkpoint`` saves
and loads them for training), numpy inference (``inference``), the torch models
(``model``) and the ``gnn`` score plugin and profile (``plugin``).

The scheduler process never imports torch: ``plugin``, ``inference``, ``weights`` and
``config`` need numpy and safetensors only (the ``operator`` extra). ``model`` and
``checkpoint`` are training's and need the ``learn`` extra (torch, torch-geometric).
"""
