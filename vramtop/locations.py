"""Every path vramtop uses, in one place.

`VRAMTOP_HOME` (if set) puts config, state and logs under one directory: tests and the demo use
it to keep their files apart from a user's real ones.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import platformdirs

from vramtop import files

APP = "vramtop"


def _home() -> Path | None:
    value = os.environ.get("VRAMTOP_HOME")
    return Path(value) if value else None


def _private_dir(path: Path) -> Path:
    """Create `path` readable only by the user (it may hold logs and state)."""
    return files.private_dir(path)  # asked every tick: one stat when it exists


def home_problem() -> str | None:
    """Why vramtop must not use its directories (another user can write in them), or None.

    `VRAMTOP_HOME` and the three directories under it, or else the config, state and log
    directories; a symbolic link is judged by the directory it leads to."""
    home = _home()
    if home is not None:
        paths = [home, home / "config", home / "state", home / "logs"]
    else:
        paths = [
            platformdirs.user_config_path(APP),
            platformdirs.user_state_path(APP),
            platformdirs.user_log_path(APP),
        ]
    for path in paths:
        problem = files.open_problem(path)
        if problem is not None:
            return problem
    return None


def config_dir() -> Path:
    """Settings, profiles and the user's own themes."""
    home = _home()
    return _private_dir(home / "config" if home else platformdirs.user_config_path(APP))


def state_dir() -> Path:
    """Server state files (pid, process group, port) that let a new vramtop re-attach."""
    home = _home()
    return _private_dir(home / "state" if home else platformdirs.user_state_path(APP))


def log_dir() -> Path:
    """Server log files and vramtop's own log."""
    home = _home()
    return _private_dir(home / "logs" if home else platformdirs.user_log_path(APP))


def settings_file() -> Path:
    return config_dir() / "config.toml"


def profiles_dir() -> Path:
    return _private_dir(config_dir() / "profiles")


def user_themes_dir() -> Path:
    return config_dir() / "themes"


def demo_dir() -> Path:
    """Everything the simulated machine keeps (its GPU ledger socket, its profile, its logs)."""
    return _private_dir(state_dir() / "demo")


def own_log_file() -> Path:
    """vramtop's own log: tracebacks go here, never to the screen."""
    return log_dir() / "vramtop.log"


def bundled_themes_dir() -> Path:
    """Themes shipped inside the package (installed wheel) or beside it (source checkout)."""
    packaged = Path(__file__).parent / "themes"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent / "themes"


def profile_file_name(profile: str) -> str:
    """A profile's name as it appears in the names of its files (state, lock, log, door,
    timeline): a profile's own name is one already; anything else cannot leave the folder."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", profile) or "default"
