"""Top-level options a subcommand also accepts after its name, and how a command reads its options.

How a command builds its options (follow this for a new command):

1. `add_parser(subparsers)` declares the flags, as before (`add_shared_options` for the
   top-level ones a subcommand takes after its name: `vramtop start --demo`).
2. The command module defines one frozen dataclass of its options (`RecordOptions`,
   `StatusOptions`, …) with a `from_args(args)` classmethod. That classmethod is the only code
   that reads the `argparse.Namespace`, and it reads it through `Given`, by name with a
   default: an option whose default is suppressed, or one that another command declares, is
   absent from the namespace. The machine the options name is a `Target`
   (`Target.from_args(args)`), shared by every command that picks one.
3. `run(args)` builds the options once (`options = XOptions.from_args(args)`) and passes that
   object down: `backend_for(options.target)`, `supervised.target(options.target)`, never the
   namespace. No code of vramtop calls `getattr` on the arguments or on a backend
   (tests/unit/test_no_reach_past.py fails where one does).

The command line's entry point (vramtop/cli.py) is imported by no module of vramtop.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from vramtop.commands.argtypes import (
    front_door,
    interval_seconds,
    server_url,
    variable_name,
)
from vramtop.sim.card import CARDS

# Top-level options a subcommand may take after its name, by `dest`: (flags, argparse's
# keywords). The top-level parser's own (vramtop/cli.py) say the same with longer help.
SHARED: dict[str, tuple[tuple[str, ...], dict[str, object]]] = {
    "demo": (("--demo",), {"action": "store_true", "help": "act on the simulated machine"}),
    "wsl": (("--wsl",), {"action": "store_true", "help": "with --demo: the WSL2 way"}),
    "card": (
        ("--card",),
        {"choices": tuple(CARDS), "help": "with --demo: which simulated machine"},
    ),
    "json": (("--json",), {"action": "store_true", "help": "print JSON"}),
    "once": (("--once",), {"action": "store_true", "help": "print once and exit"}),
    "profile": (("--profile",), {"help": "the profile to use"}),
    "url": (("--url",), {"help": "the vLLM server's base URL", "type": server_url}),
    "interval": (
        ("--interval",),
        {"type": interval_seconds, "help": "seconds between samples (default 1.0)"},
    ),
    "no_windows": (
        ("--no-windows",),
        {"action": "store_true", "help": "WSL2: do not read Windows' GPU counters"},
    ),
    "api_key_env": (
        ("--api-key-env",),
        {
            "metavar": "VAR",
            "type": variable_name,
            "help": "read the server's API key from this variable",
        },
    ),
    "front_door": (
        ("--front-door",),
        {
            "type": front_door,
            "metavar": "ADDR",
            "help": "with --demo: where the front door listens (HOST:PORT), or off",
        },
    ),
}


def add_shared_options(parser: argparse.ArgumentParser, *names: str) -> None:
    """Let a subcommand accept top-level options after its name (`vramtop start --demo`).

    Defaults are suppressed so that a value given before the subcommand is not overwritten.
    `names` picks among SHARED's (all of them when none is named); one the parser declares
    already (with help of its own) is left as it is.
    """
    have = {flag for action in parser._actions for flag in action.option_strings}
    for name in names or tuple(SHARED):
        flags, kwargs = SHARED[name]
        if not have & set(flags):
            parser.add_argument(*flags, default=argparse.SUPPRESS, **kwargs)  # type: ignore[arg-type]


class Given:
    """A parsed namespace, read by an option's `dest` with a default where it is absent (a
    suppressed default, an option of another command). Each read checks the type the parser
    gives that option: a wrong one is a bug of ours, said at once."""

    def __init__(self, args: argparse.Namespace) -> None:
        self._values: dict[str, object] = vars(args)

    def _value(self, name: str, kind: type | tuple[type, ...]) -> object:
        value = self._values.get(name)
        # A flag is no number, nor a number a flag (bool is a kind of int to isinstance).
        if value is not None and (
            isinstance(value, bool) is not (kind is bool) or not isinstance(value, kind)
        ):
            raise TypeError(f"option {name}: {value!r} is not a {kind}")
        return value

    def flag(self, name: str) -> bool:
        """A store_true option: False where it is absent."""
        return bool(self._value(name, bool))

    def text(self, name: str) -> str | None:
        value = self._value(name, str)
        return value if isinstance(value, str) else None

    def number(self, name: str) -> float | None:
        value = self._value(name, (int, float))
        return float(value) if isinstance(value, int | float) else None

    def whole(self, name: str) -> int | None:
        value = self._value(name, int)
        return value if isinstance(value, int) else None

    def path(self, name: str) -> Path | None:
        value = self._value(name, Path)
        return value if isinstance(value, Path) else None

    def numbers(self, name: str) -> tuple[float, ...]:
        """An `append` option of numbers: () where it was not given."""
        value = self._values.get(name)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, int | float) for v in value):
            raise TypeError(f"option {name}: {value!r} is not a list of numbers")
        return tuple(float(v) for v in value)


@dataclass(frozen=True)
class Target:
    """The machine the options name: the simulated one (`--demo`, `--wsl`, `--card`), or the
    real one's server (`--profile`, `--url`, `--api-key-env`); `windows`: read Windows' GPU
    counters on WSL2 (not `--no-windows`)."""

    demo: bool = False
    wsl: bool = False
    card: str | None = None
    profile: str | None = None
    url: str | None = None
    api_key_env: str | None = None
    windows: bool = True
    front_door: str | None = None  # `--front-door` (the demo's): HOST:PORT, "off", None: not given

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Target:
        given = Given(args)
        return cls(
            demo=given.flag("demo"),
            wsl=given.flag("wsl"),
            card=given.text("card"),
            profile=given.text("profile"),
            url=given.text("url"),
            api_key_env=given.text("api_key_env"),
            windows=not given.flag("no_windows"),
            front_door=given.text("front_door"),
        )
