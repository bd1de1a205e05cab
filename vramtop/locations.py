"""Every path vramtop uses, in one place.

`VRAMTOP_HOME` (if set) puts config, state and logs under one directory: tests and the demo use
it to keep their files apart from a user's real ones.
"""

from __future__ import annotations

import errno
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


def _roots() -> list[Path]:
    """The directories vramtop keeps its files under: `VRAMTOP_HOME`, or else the config,
    state and log directories."""
    home = _home()
    if home is not None:
        return [home]
    return [
        platformdirs.user_config_path(APP),
        platformdirs.user_state_path(APP),
        platformdirs.user_log_path(APP),
    ]


def _root_of(path: Path) -> Path | None:
    """Which of vramtop's directories `path` lies in; None for none."""
    return next((root for root in _roots() if path.is_relative_to(root)), None)


def home_problem() -> str | None:
    """Why vramtop must not use its directories (another user can write in them), or None.

    `VRAMTOP_HOME` and the three directories under it, or else the config, state and log
    directories; then those below them vramtop reads commands, themes and the demo's world
    from (each file read is checked again with every directory above it: `read_own`). A
    symbolic link is judged by the directory it leads to."""
    home = _home()
    if home is not None:
        config, state, logs = home / "config", home / "state", home / "logs"
        paths = [home, config, state, logs]
    else:
        paths = _roots()
        config, state, logs = paths
    paths += [config / "profiles", config / "themes", state / "demo"]
    for path in paths:
        problem = files.open_problem(path)
        if problem is not None:
            return problem
    return None


def read_own(path: Path, *, limit: int | None = None, follow: bool = False) -> bytes:
    """One of vramtop's files (a setting, a profile, a state file, a token...), read only
    when it and every directory from vramtop's own down to it belong to the user (or root)
    and no one else can write them (`files.read_checked`, which says what fails and the
    fix). `follow`: a link the person made is followed (a profile kept with dotfiles). A
    file outside vramtop's directories (one the person named) is judged alone."""
    return files.read_checked(path, root=_root_of(path), limit=limit, follow=follow)


def own_dir(path: Path) -> Path:
    """`path`, a directory of vramtop's own, once it and every directory above it up to
    vramtop's own pass `files.owner_problem`; `files.NotYours` naming the first that does
    not, and the fix."""
    problem = files.dirs_problem(path, _root_of(path))
    if problem is not None:
        raise files.NotYours(errno.EPERM, problem)
    return path


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
