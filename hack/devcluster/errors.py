"""Errors a user of the dev-cluster tools can cause, each naming the bad input."""


class DevClusterError(Exception):
    """Base class: the CLI prints the message and exits non-zero, without a traceback."""

    exit_code = 1


class InvalidArgumentError(DevClusterError):
    """A command-line value or function argument is out of range or malformed."""

    exit_code = 2


class BadNodeCountError(InvalidArgumentError):
    """Zero, negative or more nodes than the source can provide."""


class NodeListNotFoundError(InvalidArgumentError):
    """The node list (or trace) CSV does not exist or cannot be read."""


class BadNodeListError(InvalidArgumentError):
    """The node list (or trace) CSV exists but a row or column is malformed."""


class PortInUseError(DevClusterError):
    """The requested API server port is already bound on 127.0.0.1."""


class ToolchainMissingError(DevClusterError):
    """No usable Go toolchain to build the control-plane binaries."""

    exit_code = 3


class BuildFailedError(DevClusterError):
    """hack/build-binaries.sh failed for another reason than a missing toolchain."""

    exit_code = 4


class ClusterStartError(DevClusterError):
    """The control plane did not come up; whatever had started was stopped again."""


class ClusterNotRunningError(DevClusterError):
    """A command needs a running cluster and there is none under that name."""
