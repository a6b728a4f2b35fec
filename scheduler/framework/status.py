"""Outcomes as values, with kube-scheduler's codes and wording."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class Code(IntEnum):
    """``framework.Code``: why a plugin let a pod through or not."""

    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    # No change in the cluster short of changing the pod or the node can help.
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    SKIP = 5


@dataclass(frozen=True, slots=True)
class Status:
    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str = ""

    @property
    def ok(self) -> bool:
        return self.code in (Code.SUCCESS, Code.SKIP)

    @property
    def message(self) -> str:
        return ", ".join(self.reasons)


SUCCESS = Status()
SKIP = Status(Code.SKIP)


def unschedulable(plugin: str, *reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE, reasons, plugin)


def unresolvable(plugin: str, *reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons, plugin)


def error(plugin: str, *reasons: str) -> Status:
    return Status(Code.ERROR, reasons, plugin)
