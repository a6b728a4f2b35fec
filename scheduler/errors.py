"""Errors a user can cause. Each names the object and the field it is about."""

from __future__ import annotations


class SchedulerInputError(ValueError):
    """Bad input from a user: a pod, a node, a trace row, a config file, a checkpoint."""

    def __init__(self, obj: str, field: str, problem: str) -> None:
        self.obj = obj
        self.field = field
        self.problem = problem
        super().__init__(f"{obj}: {field}: {problem}")

    def __reduce__(self) -> tuple[type[SchedulerInputError], tuple[str, str, str]]:
        # Keeps the error intact when it crosses a process boundary (parallel replays).
        return (type(self), (self.obj, self.field, self.problem))


class CommandLineError(SchedulerInputError):
    """An option whose value turned out unusable once the command started (a kubeconfig
    that does not load, a folder it cannot write): ``obj`` is the command
    (``"run"``, ``"policy submit"``), ``field`` the option (``"--kubeconfig"``)."""

    @property
    def line(self) -> str:
        """The one line ``rl-scheduler`` prints, in argparse's shape."""
        return f"rl-scheduler {self.obj}: error: argument {self.field}: {self.problem}"


class QuantityError(SchedulerInputError):
    """A Kubernetes quantity that does not parse or is out of range."""


class PodSpecError(SchedulerInputError):
    """A pod whose spec cannot be scheduled as written (bad field, unknown resource)."""


class TraceError(SchedulerInputError):
    """A malformed row in a trace CSV."""
