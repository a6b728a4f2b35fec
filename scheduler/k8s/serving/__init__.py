"""The serving port: /metrics, /healthz, /readyz, TLS and delegated auth."""
