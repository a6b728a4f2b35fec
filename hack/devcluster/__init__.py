"""A local Kubernetes control plane with KWOK nodes, for development, demos and tests.

Dev and test tooling only: not part of the ``scheduler`` package. Run it as
``python -m devcluster {build,up,down,status,nodes,workload,view,clean}`` with ``hack``
on ``PYTHONPATH`` (``hack/cluster.sh`` does that for you).
"""
