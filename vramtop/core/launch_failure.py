"""A launch whose command could not run at all (the exec of `vllm` itself, never a failure
inside it): read from the launch's last lines or its exit code, and the state word it gets
(it never started, so it did not crash). Light on purpose: the console's header reads it
before its first frame, without the diagnosis."""

from __future__ import annotations

import re
from collections.abc import Sequence

from vramtop.core.json_types import JsonValue
from vramtop.core.model import ServerInfo, ServerState

# The shell's and the launcher's words for a command that could not be run at all (the exec
# of `vllm` itself, never a failure inside it): `exec: vllm: not found`, `vllm: command not
# found`, `exec: ./serve: Permission denied`, and vramtop's own "could not launch: …".
_NOT_LAUNCHED = re.compile(
    r"\bexec: (?P<exec>[^:\n]+): (?:not found|Permission denied|cannot execute[^\n]*)"
    r"|(?P<shell>[^\s:]+): command not found"
    r"|^could not launch: (?P<own>.+)"
)
# The shell's exit codes for the same: 127 not found, 126 found but not executable.
NOT_LAUNCHED_CODES = {127: "not found", 126: "not executable"}


def launch_failure(lines: Sequence[str], returncode: JsonValue = None) -> str | None:
    """Why the launch command itself could not run, from its last lines (the newest such
    line) or its exit code; None when it ran (whatever it did next)."""
    for line in reversed(lines):
        found = _NOT_LAUNCHED.search(str(line))
        if found is not None:
            return found.group(0).strip()
    if isinstance(returncode, int) and returncode in NOT_LAUNCHED_CODES:
        return f"the launch command exited with {returncode} ({NOT_LAUNCHED_CODES[returncode]})"
    return None


# The state word of a launch whose command could not run: it never started, so it did not
# crash (the launch_failed finding says why), in the console's status line and in `status`.
NEVER_STARTED = "never started"


def state_word(info: ServerInfo) -> str:
    """The server's state in words: its state's own word, or `NEVER_STARTED` for a crashed
    record of a launch that never became ready and whose error is that its command could
    not run (the same reading as the launch_failed finding's)."""
    if (
        info.state is ServerState.CRASHED
        and info.ready_s is None
        and info.last_error
        and launch_failure([info.last_error]) is not None
    ):
        return NEVER_STARTED
    return info.state.value
