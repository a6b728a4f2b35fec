"""Where a node stands: the node labels rl-scheduler reads for topology.

- ``topology.kubernetes.io/zone``: Kubernetes' well-known zone label (cloud providers
  and the dev cluster set it).
- ``topology.rl-scheduler.io/rack``: the rack, rl-scheduler's own key. Kubernetes has
  no well-known rack label and reserves ``kubernetes.io`` prefixes for its own, so
  the key is under this project's domain; label your nodes with it to give the learned
  policy its rack links (``scheduler.policy.edges``). The dev cluster sets it.
"""

from __future__ import annotations

from typing import Final

ZONE_LABEL: Final = "topology.kubernetes.io/zone"
RACK_LABEL: Final = "topology.rl-scheduler.io/rack"
