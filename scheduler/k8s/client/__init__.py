"""Reaching the API server: credentials, reads, watches, writes, retries."""
