"""One real node beside the control plane: containerd and runc from Debian, the CNI
bridge plugin, and a kubelet and kube-proxy built from the pinned Kubernetes module.

- ``config``: the files each component reads (pure functions of ``NodeLayout``).
- ``host``: what the node changes on the machine (sysctls, bridge, mounts, iptables,
  cgroups) and how teardown undoes it.
- ``images``: moving images built by podman into the node's containerd.
- ``node``: starting, waiting for and stopping the processes.
"""
