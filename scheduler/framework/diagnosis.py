"""kube-scheduler's ``FitError`` message: ``0/N nodes are available: ...``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping


def fit_error_message(
    total_nodes: int, reason_counts: Mapping[str, int], pre_filter_message: str = ""
) -> str:
    """Build the FailedScheduling message.

    Per reason ``"<count> <reason>"``, sorted as strings and joined with ``", "``; a
    PreFilter rejection replaces the per-node histogram (it applies to every node).
    """
    message = f"0/{total_nodes} nodes are available:"
    if pre_filter_message:
        return f"{message} {pre_filter_message}."
    histogram = sorted(f"{count} {reason}" for reason, count in reason_counts.items())
    if histogram:
        message += f" {', '.join(histogram)}."
    return message


def count_reasons(reasons_per_node: Mapping[int, tuple[str, ...]]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for reasons in reasons_per_node.values():
        counts.update(reasons)
    return counts
