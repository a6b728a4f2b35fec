"""Remove what the generator made (labelled pods), and nothing else."""

from __future__ import annotations

from datetime import UTC, datetime

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from devcluster import names


def clean_pods(
    api: client.CoreV1Api,
    *,
    namespace: str | None = None,
    run_id: str | None = None,
    expired_only: bool = False,
    now: datetime | None = None,
) -> int:
    """Delete generated pods (all namespaces unless one is given); returns how many.

    expired_only keeps pods whose expiry annotation lies in the future (and pods
    without one): the leftovers of a generator that was stopped early.
    """
    selector = names.GENERATED_SELECTOR + (f",{names.RUN_LABEL}={run_id}" if run_id else "")
    listed = (
        api.list_namespaced_pod(namespace, label_selector=selector)
        if namespace
        else api.list_pod_for_all_namespaces(label_selector=selector)
    )
    now = now or datetime.now(UTC)
    deleted = 0
    for pod in listed.items:
        meta = pod.metadata
        if meta is None or meta.name is None or meta.namespace is None:
            continue
        if expired_only:
            expires = (meta.annotations or {}).get(names.EXPIRES_ANNOTATION)
            if not expires or datetime.fromisoformat(expires) > now:
                continue
        try:
            # Grace 0: no kubelet will confirm the containers stopped.
            api.delete_namespaced_pod(meta.name, meta.namespace, grace_period_seconds=0)
            deleted += 1
        except ApiException as err:
            if err.status != 404:
                raise
    return deleted
