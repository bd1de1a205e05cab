"""The slow part of a start named, with its fix: weights read slowly from a Windows drive
under WSL2 (`/mnt/c/…`, a 9P share) or a network file system, and a compilation that took
longer than the previous start's (vLLM's compile cache was cold).

Pure: the mount table's text (as /proc/mounts gives it), the model as the launch names it,
the launch's environment and the home folder go in; words come out. The same words serve a
step's event (after the start, with vLLM's figures) and `doctor` and `lint` (before any).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass

from vramtop.core.json_types import JsonValue

# Under this the weights are said to come slowly (GB/s); a local NVMe gives several.
SLOW_GB_PER_S = 1.0
# ... and only a load that took this long is a slow part at all: the CPU build's tiny test
# model reads "0.00 GiB" in 0.02 s, a rate of 0 that costs nothing.
MIN_WEIGHTS_S = 2.0
# A compilation is called cold when it took this much longer than the start before, both
# as a ratio and in seconds: the same warm cache took 20 s then 25 s on a busy machine (the
# CPU build, measured), a cold one 108 s; a public RTX 5090 report, 43 s cold, ~5 s warm.
COLD_RATIO = 1.5
COLD_MARGIN_S = 5.0
# Network file systems, by their type in the mount table.
NETWORK_FS = frozenset(
    {
        "nfs",
        "nfs4",
        "cifs",
        "smb3",
        "smbfs",
        "afs",
        "ceph",
        "glusterfs",
        "lustre",
        "davfs",
        "fuse.sshfs",
        "fuse.glusterfs",
        "fuse.ceph",
        "fuse.s3fs",
        "fuse.rclone",
        "fuse.gcsfuse",
        "fuse.juicefs",
    }
)
# WSL2 mounts each Windows drive at /mnt/<letter> as a 9P share (`drvfs` in WSL1's words).
_WINDOWS_DRIVE = re.compile(r"^/mnt/[a-zA-Z]$")
_WINDOWS_FS = frozenset({"9p", "drvfs", "v9fs"})
_OCTAL = re.compile(r"\\([0-7]{3})")


@dataclass(frozen=True)
class Mount:
    """One line of the mount table."""

    source: str
    point: str
    fs_type: str


def parse_mounts(text: str) -> list[Mount]:
    """The mount table as /proc/mounts writes it (`source point type options 0 0`, a space
    in a name written `\\040`); a line that is not one is skipped."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        source, point, fs_type = (_OCTAL.sub(lambda m: chr(int(m[1], 8)), f) for f in fields[:3])
        if point.startswith("/"):
            mounts.append(Mount(source, point, fs_type))
    return mounts


def mount_of(path: str, mounts: list[Mount]) -> Mount | None:
    """The mount `path` (absolute) lies on: the longest mount point above it; the last
    mounted wins where two share a point."""
    path = posixpath.normpath(path)
    best: Mount | None = None
    for mount in mounts:
        point = mount.point.rstrip("/") or "/"
        inside = path == point or path.startswith(point if point == "/" else point + "/")
        if inside and (best is None or len(point) >= len(best.point.rstrip("/") or "/")):
            best = mount
    return best


def slow_place(path: str, mounts: list[Mount]) -> str | None:
    """What makes reading `path` slow, in words (`a Windows drive (/mnt/c)`, `a network
    file system (nfs4)`), or None for a local disk (or a path the table does not place)."""
    mount = mount_of(path, mounts)
    if mount is None:
        return None
    point = mount.point.rstrip("/")
    if _WINDOWS_DRIVE.match(point) and mount.fs_type in _WINDOWS_FS:
        return f"a Windows drive ({point})"
    if mount.fs_type in NETWORK_FS:
        return f"a network file system ({mount.fs_type} from {mount.source})"
    return None


def weights_dir(model: str, env: Mapping[str, str], home: str, cwd: str | None) -> str:
    """Where the weights of `model` (as the launch names it) are read from: its folder when
    it is a path, else Hugging Face's cache (HF_HUB_CACHE, HF_HOME/hub, XDG_CACHE_HOME or
    ~/.cache/huggingface/hub)."""
    if model.startswith(("/", "./", "../", "~")) or (cwd is not None and model.startswith(".")):
        path = home + model[1:] if model.startswith("~") else model
        return posixpath.normpath(posixpath.join(cwd or "/", path))
    if env.get("HF_HUB_CACHE"):
        return env["HF_HUB_CACHE"]
    if env.get("HF_HOME"):
        return posixpath.join(env["HF_HOME"], "hub")
    cache = env.get("XDG_CACHE_HOME") or posixpath.join(home, ".cache")
    return posixpath.join(cache, "huggingface", "hub")


def compile_cache_dir(env: Mapping[str, str], home: str) -> str:
    """Where vLLM keeps its torch.compile cache: VLLM_CACHE_ROOT (default
    XDG_CACHE_HOME/vllm, else ~/.cache/vllm), its torch_compile_cache folder."""
    root = env.get("VLLM_CACHE_ROOT") or posixpath.join(
        env.get("XDG_CACHE_HOME") or posixpath.join(home, ".cache"), "vllm"
    )
    return posixpath.join(root, "torch_compile_cache")


# What to do about weights read from a slow place.
PLACE_FIX = "copy the model under the Linux home (e.g. ~/models) and launch it from that path"


def place_words(where: str, place: str) -> str:
    """Before a start (`doctor`, `lint`): the model's place named (its fix: PLACE_FIX)."""
    return (
        f"the model is read from {where}, on {place}: vLLM loads its weights several times "
        f"slower from there than from the Linux disk"
    )


def slow_parts(
    phases: Mapping[str, JsonValue],
    previous: Mapping[str, JsonValue] | None,
    *,
    weights_from: str | None,
    place: str | None,
    cache_dir: str,
) -> list[str]:
    """After a start, the slow parts of its `phases` (a step event's), each with its fix:
    weights under SLOW_GB_PER_S from a slow `place` (`slow_place` of `weights_from`), and a
    compilation much longer than the `previous` start's (COLD_RATIO, COLD_MARGIN_S), unless
    vLLM said it came from its cache."""
    words = []
    rate = _number(phases.get("weights_gb_per_s"))
    took_s = _number(phases.get("weights_s")) or 0.0
    slow = rate is not None and rate < SLOW_GB_PER_S and took_s >= MIN_WEIGHTS_S
    if slow and place is not None and weights_from:
        words.append(
            f"weights loaded at {rate:.2f} GB/s from {weights_from}, on {place}: {PLACE_FIX}"
        )
    took = _number(phases.get("compile_s"))
    before = _number((previous or {}).get("compile_s"))
    cached = phases.get("compile_cached") is True
    if (
        took is not None
        and before is not None
        and not cached
        and took >= before * COLD_RATIO
        and took - before >= COLD_MARGIN_S
    ):
        words.append(
            f"compilation took {took:.0f} s against {before:.0f} s the start before (vLLM's "
            f"compile cache was cold): the next start reads it from {cache_dir} and is faster"
        )
    return words


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
