"""Volumes as kube-scheduler's volume plugins see them: the cluster's claims, volumes,
classes and CSI limits (``catalog``), and the pure decisions over them (``binding``,
``node_masks``). The filters in ``scheduler.plugins.filters`` are thin adapters."""
