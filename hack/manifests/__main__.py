"""``python -m manifests``: write deploy/rl-scheduler.yaml from the chart."""

import sys

from devcluster.binaries import ensure_binaries
from manifests import MANIFESTS, REPO, render

helm = ensure_binaries(("helm",)).helm
MANIFESTS.write_text(render(helm))
print(f"wrote {MANIFESTS.relative_to(REPO)}", file=sys.stderr)
