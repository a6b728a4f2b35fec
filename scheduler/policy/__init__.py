"""The learned scheduling policy: the graph builder (``graph``), the scorers (``model``),
checkpoints (``checkpoint``) and the ``gnn`` score plugin and profile (``plugin``).

The profile registry builds ``gnn`` on demand, so importing the core never imports
torch; ``scheduler.policy.plugin`` needs the ``learn`` extra (torch, torch-geometric,
safetensors).
"""
