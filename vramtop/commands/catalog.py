"""The commands vramtop knows, in the order `--help` lists them: each one's summary, the
top-level options it acts on and the documentation page that covers it.

The command line lists every command from this table without importing its module: only the
module of the command being run is imported (all of them together take most of a second to
import, which every `vramtop status` and `vramtop stop` would pay). A command's `add_parser`
takes its summary from here, so `--help` says the same whichever parser printed it.
"""

from __future__ import annotations

from dataclasses import dataclass

# The top-level options each command acts on (by `dest`): taken before its name or after it
# alike (`vramtop --card spark stop --demo`, `vramtop stop --demo --card spark`); one it does
# not act on is refused in both places rather than passed over.
# The supervised server's (`supervised.target`): with --demo, --front-door is its door.
_SERVER = ("demo", "wsl", "card", "profile", "front_door")
_MACHINE = ("demo", "wsl", "card", "url", "profile", "no_windows", "api_key_env", "front_door")

CONSOLE_PAGE = "docs/console.md"  # `vramtop --help`: the console and `--once`


@dataclass(frozen=True)
class Command:
    name: str  # as typed: `vramtop NAME`
    summary: str  # its line in `vramtop --help`
    takes: tuple[str, ...]  # the top-level options it acts on, by `dest`
    # The documentation page that covers it, relative to the repository (it reads as a path
    # offline and as a link on the repository's site): its `--help` ends with it.
    docs_page: str

    @property
    def module(self) -> str:
        """Its module (`import` is a keyword: `vramtop.commands.import_`)."""
        return f"vramtop.commands.{self.name}{'_' if self.name == 'import' else ''}"


COMMANDS: tuple[Command, ...] = (
    Command(
        "calc",
        "what a budget (--gpu-memory-utilization) gives the KV pool and leaves the desktop",
        ("json",),
        "docs/commands.md",
    ),
    Command(
        "diagnose", "name what went wrong in a recorded session", ("json",), "docs/diagnosis.md"
    ),
    Command("import", "turn a vLLM launch script into a profile", ("front_door",), "docs/files.md"),
    Command("lint", "check a profile or launch script for risky settings", (), "docs/commands.md"),
    Command("profile", "list, show or pick server profiles", (), "docs/files.md"),
    Command(
        "record",
        "record a session to a file (for `vramtop diagnose` and `vramtop replay`)",
        (*_MACHINE, "interval"),
        "docs/commands.md",
    ),
    Command("replay", "play a recorded session through the console", (), "docs/commands.md"),
    Command(
        "start", "start the profile's vLLM server and wait until ready", _SERVER, "docs/commands.md"
    ),
    Command("stop", "stop the server (every process of it)", _SERVER, "docs/commands.md"),
    Command(
        "restart", "stop and start the server with the same flags", _SERVER, "docs/commands.md"
    ),
    Command(
        "relaunch",
        "restart with a new budget, max-model-len or KV dtype",
        _SERVER,
        "docs/commands.md",
    ),
    Command(
        "status",
        "show the server's state (--json for scripts)",
        (*_SERVER, "json"),
        "docs/commands.md",
    ),
    Command("logs", "print the server's log (-f to follow)", _SERVER, "docs/commands.md"),
    Command(
        "events",
        "the profile's lasting timeline: starts, stops, relaunches, findings",
        ("demo", "wsl", "card", "profile", "json"),
        "docs/commands.md",
    ),
    Command("attach", "adopt a running vLLM server (by port or pid)", _SERVER, "docs/commands.md"),
    Command(
        "doctor",
        "what vramtop can see on this machine and why not, with the fix "
        "(exit 0 split shown, 3 only derived, 4 GPU unreadable)",
        ("json", "url", "profile", "no_windows", "api_key_env"),
        "docs/commands.md",
    ),
    Command(
        "export",
        "serve vramtop's metrics to Prometheus (headless)",
        (*_MACHINE, "interval"),
        "docs/prometheus.md",
    ),
    Command(
        "guard",
        "watch without a screen: notify, keep the timeline, relaunch on its own if asked",
        (*_MACHINE, "interval"),
        "docs/guard.md",
    ),
    Command(
        "fleet",
        "several boxes on one screen, from their `vramtop export` (read-only)",
        ("once", "json"),
        "docs/prometheus.md",
    ),
)

BY_NAME: dict[str, Command] = {command.name: command for command in COMMANDS}


def summary(name: str) -> str:
    """The command's line in `vramtop --help` (its `add_parser(help=…)`)."""
    return BY_NAME[name].summary
