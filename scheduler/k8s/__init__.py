"""The scheduler against a Kubernetes cluster, by role:

- ``client``: Reaching the API server: credentials, reads, watches, writes, retries.
- ``scheduling``: The scheduler at run time: cache, queue, cycles, binding, preemption, reports.
- ``serving``: The serving port: /metrics, /healthz, /readyz, TLS and delegated auth.
- ``process``: The process: command line, settings, kopf's lifecycle, start, leader election.

The core (objects, state, framework, plugins, policy) knows nothing of the API."""
