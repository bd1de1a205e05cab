"""A full disk is one sentence naming the file it could not write and the fix, exit 2, with
nothing half-written: never logging's "--- Logging error ---" traceback (vramtop's own log
is on the same disk) nor "unexpected error".

The full disk is a real one: a 256 KiB tmpfs, filled, in a mount namespace of the test's
own (`unshare`, where the kernel lets an unprivileged user have one); and /dev/full, whose
every write fails with ENOSPC, for vramtop's own log."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vramtop import cli

ROOT = Path(__file__).resolve().parents[2]


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = ["unshare", "--user", "--map-root-user", "--mount", "true"]
    return subprocess.run(probe, capture_output=True, check=False, timeout=30).returncode == 0


# A shell in a mount namespace of its own: a small tmpfs as VRAMTOP_HOME's disk, the profile's
# folders made, the rest of the disk filled, then the vramtop command given.
_FULL_DISK = """
set -e
mount -t tmpfs -o size=256k,mode=0700 tmpfs "$DISK"
mkdir -m 700 -p "$VRAMTOP_HOME/config/profiles" "$VRAMTOP_HOME/state" "$VRAMTOP_HOME/logs"
dd if=/dev/zero of="$DISK/filler" bs=4k count=1000 2>/dev/null || true
set +e
"$@"
echo "exit=$?"
ls -A "$VRAMTOP_HOME/config/profiles"
"""


@pytest.mark.skipif(not _unshare_works(), reason="no unprivileged mount namespace here")
@pytest.mark.parametrize(
    ("argv", "unwritten"),
    [
        (["import", "{script}", "--name", "p1"], "config/profiles/p1.toml"),
        (["start", "--profile", "p0"], "logs/server-p0.log"),
    ],
)
def test_a_full_disk_is_one_sentence_naming_the_file(
    tmp_path: Path, argv: list[str], unwritten: str
) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    script = tmp_path / "launch.sh"
    script.write_text("vllm serve facebook/opt-125m --port 8011\n")
    home = disk / "home"
    env = {**os.environ, "DISK": str(disk), "VRAMTOP_HOME": str(home), "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "vramtop", *(a.format(script=script) for a in argv)]
    if argv[0] == "start":  # a profile saved before the disk filled
        command = ["sh", "-c", _SAVED_FIRST, "sh", str(script), *command]
    done = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", _FULL_DISK, "sh", *command],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert "exit=2" in done.stdout, (done.stdout, done.stderr)
    err = done.stderr
    assert "Logging error" not in err and "Traceback" not in err and "unexpected" not in err
    assert f"cannot write {home / unwritten}: No space left on device" in err, err
    assert "its disk is full" in err and len(err.strip().splitlines()) == 1, err
    listed = done.stdout.split("exit=2", 1)[1].split()
    assert listed == (["p0.toml"] if argv[0] == "start" else []), listed  # no temporary file


# For `start`: the profile is written while the disk still has room (the filler is removed
# and put back around the import).
_SAVED_FIRST = """
script=$1; shift
rm -f "$DISK/filler"
"$1" -m vramtop import "$script" --name p0 >/dev/null
dd if=/dev/zero of="$DISK/filler" bs=4k count=1000 2>/dev/null || true
exec "$@"
"""


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
def test_vramtops_own_log_on_a_full_disk_prints_nothing_on_the_screen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))
    root = logging.getLogger()
    kept = list(root.handlers)
    try:
        for handler in kept:
            root.removeHandler(handler)
        cli._log_to_file()
        (handler,) = root.handlers
        assert isinstance(handler, logging.StreamHandler)
        full = open("/dev/full", "w")  # noqa: SIM115 - the disk fills up
        log_file = handler.setStream(full)
        assert log_file is not None
        log_file.close()
        try:
            raise OSError(28, "No space left on device")
        except OSError:
            logging.getLogger("vramtop").exception("unexpected error")
        with contextlib.suppress(OSError):
            full.close()
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in kept:
            root.addHandler(handler)
    assert capfd.readouterr().err == ""
