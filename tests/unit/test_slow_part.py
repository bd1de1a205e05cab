"""The slow part of a start named, with its fix, from fake mount tables: a Windows drive
under WSL2, a network file system, a local disk; a compilation longer than the last one."""

from __future__ import annotations

from pathlib import Path

import pytest

from vramtop import cli
from vramtop.config import Profile
from vramtop.core.launch.launch_warnings import lint_launch
from vramtop.core.model import GpuReading
from vramtop.core.slow_part import (
    PLACE_FIX,
    compile_cache_dir,
    mount_of,
    parse_mounts,
    slow_parts,
    slow_place,
    weights_dir,
)
from vramtop.machines.setup_checks import Facts, server_checks
from vramtop.supervisor import step_phases

# A WSL2 machine's table (its Windows drives as 9P shares), a NAS and a Linux disk at /mnt/d.
WSL_MOUNTS = r"""/dev/sdc / ext4 rw,relatime,discard,errors=remount-ro,data=ordered 0 0
none /mnt/wsl tmpfs rw,relatime 0 0
drvfs /mnt/c 9p rw,noatime,dirsync,aname=drvfs;path=C:\;uid=1000;gid=1000;trans=fd,rfd=5 0 0
C:\134 /mnt/e 9p rw,noatime,aname=drvfs;path=E:\ 0 0
/dev/sdd /mnt/d ext4 rw,relatime 0 0
nas:/export/models /data/models nfs4 rw,relatime,vers=4.2 0 0
//nas/share\040two /srv/share\040two cifs rw,relatime 0 0
/dev/sde /data/models/local ext4 rw 0 0
"""
HOME = "/home/me"


@pytest.mark.parametrize(
    ("path", "place"),
    [
        ("/mnt/c/Users/me/models/qwen", "a Windows drive (/mnt/c)"),
        ("/mnt/e/q", "a Windows drive (/mnt/e)"),
        ("/mnt/c", "a Windows drive (/mnt/c)"),
        ("/mnt/cc/q", None),  # not a drive: the root's disk
        ("/mnt/wsl/q", None),
        ("/mnt/d/models/q", None),  # a Linux disk at a drive's place
        ("/data/models/qwen", "a network file system (nfs4 from nas:/export/models)"),
        ("/data/models/local/qwen", None),  # a local disk mounted inside the share
        ("/data/models2/q", None),
        ("/srv/share two/q", "a network file system (cifs from //nas/share two)"),
        ("/home/me/models/q", None),
    ],
)
def test_the_place_a_path_is_on(path: str, place: str | None) -> None:
    assert slow_place(path, parse_mounts(WSL_MOUNTS)) == place


def test_a_table_that_does_not_parse_places_nothing() -> None:
    assert parse_mounts("garbage\n\nx y\n") == []
    assert mount_of("/mnt/c/q", []) is None and slow_place("/mnt/c/q", []) is None


@pytest.mark.parametrize(
    ("model", "env", "cwd", "where"),
    [
        ("/mnt/c/m", {}, None, "/mnt/c/m"),
        ("./m", {}, "/mnt/c/work", "/mnt/c/work/m"),
        ("~/models/m", {}, None, "/home/me/models/m"),
        ("Qwen/Qwen3-8B", {}, None, "/home/me/.cache/huggingface/hub"),
        ("Qwen/Qwen3-8B", {"HF_HOME": "/mnt/c/hf"}, None, "/mnt/c/hf/hub"),
        ("Qwen/Qwen3-8B", {"HF_HUB_CACHE": "/data/models/hub"}, None, "/data/models/hub"),
        ("Qwen/Qwen3-8B", {"XDG_CACHE_HOME": "/mnt/e/c"}, None, "/mnt/e/c/huggingface/hub"),
    ],
)
def test_where_the_weights_are_read_from(
    model: str, env: dict[str, str], cwd: str | None, where: str
) -> None:
    assert weights_dir(model, env, HOME, cwd) == where


def test_slow_weights_from_a_slow_place_are_named_with_the_fix() -> None:
    place = "a Windows drive (/mnt/c)"
    words = slow_parts(
        {"weights_gb_per_s": 0.31, "weights_s": 70.0},
        None,
        weights_from="/mnt/c/m",
        place=place,
        cache_dir="c",
    )
    assert words == [f"weights loaded at 0.31 GB/s from /mnt/c/m, on {place}: {PLACE_FIX}"]
    assert "Linux home" in PLACE_FIX
    # Fast enough, or slow from a local disk (a slow disk is not this fix's): nothing said.
    fast = {"weights_gb_per_s": 1.2, "weights_s": 18.0}
    assert slow_parts(fast, None, weights_from="/mnt/c/m", place=place, cache_dir="c") == []
    slow = {"weights_gb_per_s": 0.31, "weights_s": 70.0}
    assert slow_parts(slow, None, weights_from="/home/me/m", place=None, cache_dir="c") == []
    # The CPU build's tiny model: "0.00 GiB" in 0.02 s, a rate of 0 that costs nothing.
    tiny = {"weights_gib": 0.0, "weights_s": 0.02, "weights_gb_per_s": 0.0}
    assert slow_parts(tiny, None, weights_from="/mnt/c/m", place=place, cache_dir="c") == []


def test_a_compilation_longer_than_the_last_names_the_cache() -> None:
    noise = slow_parts(
        {"compile_s": 25.0}, {"compile_s": 20.0}, weights_from=None, place=None, cache_dir="c"
    )
    cached = slow_parts(
        {"compile_s": 43.0, "compile_cached": True},
        {"compile_s": 5.0},
        weights_from=None,
        place=None,
        cache_dir="c",
    )
    assert noise == cached == []
    cache = compile_cache_dir({}, HOME)
    assert cache == "/home/me/.cache/vllm/torch_compile_cache"
    assert compile_cache_dir({"VLLM_CACHE_ROOT": "/fast/vllm"}, HOME) == (
        "/fast/vllm/torch_compile_cache"
    )
    assert compile_cache_dir({"XDG_CACHE_HOME": "/x"}, HOME) == "/x/vllm/torch_compile_cache"
    cold = slow_parts(
        {"compile_s": 43.1}, {"compile_s": 5.2}, weights_from=None, place=None, cache_dir=cache
    )
    assert cold == [
        "compilation took 43 s against 5 s the start before (vLLM's compile cache was cold): "
        f"the next start reads it from {cache} and is faster"
    ]
    # As long, or longer by noise (the CPU build's warm cache: 20 s, then 25 s), or vLLM
    # saying it read its cache: nothing said.
    for previous in ({"compile_s": 43.1}, {"compile_s": 50.0}, {"compile_s": 30.0}, {}, None):
        assert (
            slow_parts(
                {"compile_s": 43.1}, previous, weights_from=None, place=None, cache_dir=cache
            )
            == []
        )


@pytest.fixture
def wsl_mounts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    table = tmp_path / "mounts"
    table.write_text(WSL_MOUNTS)
    monkeypatch.setattr(step_phases, "MOUNTS", table)
    return table


def test_a_steps_slow_parts_from_its_profile(wsl_mounts: Path) -> None:
    profile = Profile(name="p", argv=["vllm", "serve", "/mnt/c/models/q"], port=18_126)
    phases = {"weights_gb_per_s": 0.4, "weights_s": 50.0}
    words = step_phases.slow_parts_of(profile, phases, None)
    assert len(words) == 1 and "/mnt/c/models/q, on a Windows drive (/mnt/c)" in words[0]
    local = Profile(name="p", argv=["vllm", "serve", "/home/me/q"], port=18_126)
    assert step_phases.slow_parts_of(local, phases, None) == []


def test_lint_and_doctor_say_it_before_any_start(
    wsl_mounts: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))
    place = step_phases.model_on_slow_place(["vllm", "serve", "/data/models/q"], {}, None)
    assert place == ("/data/models/q", "a network file system (nfs4 from nas:/export/models)")
    assert [
        f.code
        for f in lint_launch(["vllm", "serve", "m", "--host", "127.0.0.1"], model_place=place)
    ] == ["model-place"]
    script = tmp_path / "launch.sh"
    script.write_text("vllm serve /mnt/c/models/q --host 127.0.0.1\n")
    assert cli.main(["lint", str(script), "--total-gib", "32"]) == 1
    out = capsys.readouterr().out
    assert "model-place: the model is read from /mnt/c/models/q, on a Windows drive" in out
    assert PLACE_FIX in out
    checks = server_checks(
        Facts(probe_name="nvml", reading=GpuReading(), profile="p", model_place=place)
    )
    model = [c for c in checks if c.name == "model"]
    assert len(model) == 1 and model[0].status == "warn" and model[0].fix == PLACE_FIX
    assert "network file system" in model[0].detail
