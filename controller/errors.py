"""Exception types of dfctl, each carrying its process exit code.

The CLI maps these to exit codes in exactly one place (controller/cli/__init__.py), so a
module deep in the stack raises the error that says *what* went wrong and never calls
sys.exit itself. Messages name what and where (file, key, host, run) and never contain
secrets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from controller.transport.base import Result  # (transport imports this module)

EXIT_OK = 0
EXIT_UNEXPECTED = 1
EXIT_BAD_INPUT = 2
EXIT_UNREACHABLE = 3
EXIT_FAILURE_FOUND = 4
EXIT_REGRESSION = 5


class DfctlError(Exception):
    """Base of every error dfctl reports to the user without a traceback."""

    exit_code = EXIT_UNEXPECTED

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint


class BadInputError(DfctlError):
    """Bad input or usage: a playbook, an argument, an unknown run."""

    exit_code = EXIT_BAD_INPUT


class PlaybookError(BadInputError):
    """A playbook failed to load or validate; the message is `file: key: problem`."""


class UnknownRunError(BadInputError):
    """A run id or name that the registry does not hold."""


class UnreachableError(DfctlError):
    """A host or container cannot be reached (connect timeout, auth, stopped CT)."""

    exit_code = EXIT_UNREACHABLE


class HostKeyError(UnreachableError):
    """The host's key is unknown (refused by default) or changed (always refused)."""


class ContainerStateError(UnreachableError):
    """The container is stopped, absent, or on another node."""


class RemoteCommandError(DfctlError):
    """A remote step of ours (not the training run) failed; carries its Result."""

    def __init__(self, message: str, *, result: Result | None = None, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.result = result


class DeployError(DfctlError):
    """A deploy could not complete; the previous release stays live."""


class LockedError(DfctlError):
    """Another dfctl holds the deploy lock of this target."""

    exit_code = EXIT_BAD_INPUT


class StaleRunError(DfctlError):
    """The registry's pid now names another process (reused after the run ended): refused."""

    exit_code = EXIT_BAD_INPUT


class RunConflictError(DfctlError):
    """A run of the target is still alive and the playbook's run is exclusive."""

    exit_code = EXIT_BAD_INPUT


class AlreadyResumedError(RunConflictError):
    """The previous run of a resume was already resumed (its run dir's resumed_by marker,
    written under the deploy lock): this controller's resume is refused, nothing launched."""


class SourceUnreadableError(UnreachableError):
    """A resume on another target needs the old target's release or checkpoint, that target
    cannot be read, and the new target cannot see the files itself (no shared filesystem):
    nothing was launched, and trying again would not help while the old target is down."""


# Characters that some reader (str.splitlines, a terminal, a log shipper) treats as a line
# break, plus the other C0/C1 controls: a message printed on one line must show none raw.
_LINE_BREAKING = {ord(c): f"\\x{ord(c):02x}" for c in "\x0b\x0c\x1c\x1d\x1e\x85"}
_LINE_BREAKING.update({ord("\n"): "\\n", ord("\r"): "\\r", 0x2028: "\\u2028", 0x2029: "\\u2029"})
_LINE_BREAKING.update({c: f"\\x{c:02x}" for c in [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)]
                       if c not in _LINE_BREAKING and c != ord("\t")})


def one_line(text: str) -> str:
    """`text` with every line-breaking and control character escaped (tab kept): what the
    CLI prints after `dfctl: error: ` stays one line for every reader, whatever the input held."""
    return text.translate(_LINE_BREAKING)


class JobNodeError(DfctlError):
    """A node of a multi-node job could not be reached, deployed to or launched on: the
    whole job was aborted (nothing of it is left running). The message names the node."""

    exit_code = EXIT_UNREACHABLE
