"""The README's commands that install the guard's systemd unit work as written on a fresh
machine, where ~/.config/systemd/user does not exist yet: run in a shell with an empty home
whose only profile is the launch script the README imports first, `vramtop` this one and
`systemctl` a fake that saves what it was asked."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

from tests.guard.test_guard_command import vramtop

README = Path(__file__).resolve().parents[2] / "README.md"
SCRIPTS = Path(__file__).resolve().parents[1] / "fixtures" / "scripts"


def install_commands() -> str:
    """The README's shell block that writes the guard's unit."""
    blocks = re.findall(r"```sh\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    (block,) = [b for b in blocks if "vramtop guard --print-unit" in b]
    return block


def executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_the_readme_installs_the_guards_unit_on_a_fresh_home(tmp_path: Path) -> None:
    home, bin_dir = tmp_path / "home", tmp_path / "bin"
    home.mkdir()
    bin_dir.mkdir()
    asked = tmp_path / "systemctl-args"
    executable(bin_dir / "vramtop", f'#!/bin/sh\nexec {sys.executable} -m vramtop "$@"\n')
    executable(bin_dir / "systemctl", f'#!/bin/sh\necho "$@" >> {asked}\n')
    env = {
        **os.environ,
        "HOME": str(home),
        "VRAMTOP_HOME": str(tmp_path / "vramtop"),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    # The README's usage first: `vramtop import launch.sh` (the default profile).
    imported = vramtop("import", str(SCRIPTS / "api-server.sh"), home=tmp_path / "vramtop")
    assert imported.returncode == 0, imported.stderr
    done = subprocess.run(
        ["bash", "-euc", install_commands()],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    unit = home / ".config" / "systemd" / "user" / "vramtop-guard.service"
    printed = vramtop("guard", "--print-unit", home=tmp_path / "vramtop")
    assert unit.read_text() == printed.stdout and "ExecStart=" in printed.stdout
    assert asked.read_text().splitlines() == ["--user enable --now vramtop-guard"]


def test_the_readme_install_without_a_profile_writes_no_unit(tmp_path: Path) -> None:
    """Before any import there is no profile to guard: the unit is refused, not printed."""
    printed = vramtop("guard", "--print-unit", home=tmp_path / "vramtop")
    assert printed.returncode == 2 and "no profile to guard" in printed.stderr
    assert printed.stdout == ""
