"""rl-scheduler: a learned second scheduler for Kubernetes.

The core (``resources``, ``state``, ``framework``, ``plugins``, ``sim``) is pure Python,
numpy and (for the learned policy) torch; only ``scheduler.k8s`` talks to the API.
"""

__version__ = "0.1.0"
