"""Reading and editing vLLM's own command line, without disturbing anything else in it.

An argv is kept exactly as the user wrote it; edits touch only the flag they are about.

How vLLM reads flags, and so how this module reads them:
- `--flag value` and `--flag=value` mean the same.
- Underscores in a flag's name count as dashes (vLLM's FlexibleArgumentParser rewrites
  `--gpu_memory_utilization` to `--gpu-memory-utilization` before argparse sees it).
- A flag given twice: the last occurrence wins (plain argparse `store`).
- `--config file.yaml` supplies defaults that the command line overrides; the caller loads
  the YAML (the core does no I/O) and passes its dict as `defaults`.

Editing policy for a flag given more than once: `set_flag` updates the *last* occurrence in
place (keeping its `=` or space form, so a diff shows one changed value) and removes the
earlier ones, so the argv says once what vLLM would use anyway.

Not handled: argparse's abbreviations (`--gpu-mem 0.8`); vLLM warns about them and they are
rare in launch scripts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from vramtop.core import secrets
from vramtop.core.json_types import JsonValue
from vramtop.core.module_run import module_run

GPU_MEMORY_UTILIZATION = "--gpu-memory-utilization"
MAX_MODEL_LEN = "--max-model-len"
KV_CACHE_DTYPE = "--kv-cache-dtype"
MAX_NUM_SEQS = "--max-num-seqs"
HOST = "--host"
PORT = "--port"
API_KEY = "--api-key"
CONFIG = "--config"
MODEL = "--model"
TRUST_REMOTE_CODE = "--trust-remote-code"

# Flags whose values are secrets: shown and written as `***`.
SECRET_FLAGS = frozenset({API_KEY, "--hf-token"})
MASK = "***"

# Flags that never take a value. Needed to tell `--trust-remote-code MODEL` (a switch then the
# positional model) from `--port 8000`. Flags starting with --enable-/--disable-/--no- are
# switches too (vLLM declares most of them with BooleanOptionalAction).
SWITCH_FLAGS = frozenset(
    {
        "--trust-remote-code",
        "--enforce-eager",
        "--disable-log-requests",
        "--disable-log-stats",
        "--enable-prefix-caching",
        "--enable-chunked-prefill",
        "--enable-auto-tool-choice",
        "--enable-lora",
        "--enable-log-requests",
        "--skip-tokenizer-init",
        "--disable-frontend-multiprocessing",
        "--disable-fastapi-docs",
        "--async-scheduling",
        "--headless",
        "--help",
        "--version",
    }
)
_SWITCH_PREFIXES = ("--enable-", "--disable-", "--no-")

LaunchKind = Literal["vllm-serve", "api-server", "cli-main", "sim"]

# `python -m MODULE` forms that start a vLLM-compatible server.
_MODULES: dict[str, LaunchKind] = {
    "vllm.entrypoints.openai.api_server": "api-server",
    "vllm.entrypoints.cli.main": "cli-main",
    "vramtop.sim.server": "sim",
}


@dataclass(frozen=True)
class LaunchForm:
    """How an argv starts a server: which form, and where vLLM's own arguments begin."""

    kind: LaunchKind
    args_start: int


@dataclass(frozen=True)
class FlagUse:
    """One occurrence of a flag: argv[start:stop] holds it (and its value, if separate)."""

    start: int
    stop: int
    value: str | None
    inline: bool  # written as --flag=value


def _basename(word: str) -> str:
    return word.replace("\\", "/").rsplit("/", 1)[-1]


def launch_form(argv: Sequence[str]) -> LaunchForm | None:
    """Recognise `vllm serve`, `python -m <vllm or simulator module> [serve]`; else None.

    Full paths to `vllm` or `python` are accepted (`/opt/env/bin/vllm serve …`).
    """
    if not argv:
        return None
    exe = _basename(argv[0])
    if exe == "vllm":
        if len(argv) > 1 and argv[1] == "serve":
            return LaunchForm("vllm-serve", 2)
        return None
    run = module_run(argv)  # interpreter options (-u, -X dev, ...) may precede -m
    kind = _MODULES.get(run.module) if run is not None else None
    if run is None or kind is None:
        return None
    if kind == "cli-main":
        if run.args_start < len(argv) and argv[run.args_start] == "serve":
            return LaunchForm(kind, run.args_start + 1)
        return None
    return LaunchForm(kind, run.args_start)


def is_vllm_command(argv: Sequence[str]) -> bool:
    return launch_form(argv) is not None


def canonical_flag(name: str) -> str:
    """`gpu_memory_utilization`, `--gpu_memory_utilization` → `--gpu-memory-utilization`.

    Like vLLM, only the part before the first `.` is rewritten (`--a_b.c_d` → `--a-b.c_d`).
    Single-dash short flags (`-tp`) are returned unchanged.
    """
    if name.startswith("-") and not name.startswith("--"):
        return name
    bare = name.lstrip("-")
    head, dot, tail = bare.partition(".")
    return "--" + head.replace("_", "-") + dot + tail


def is_switch(flag: str) -> bool:
    flag = canonical_flag(flag)
    return flag in SWITCH_FLAGS or flag.startswith(_SWITCH_PREFIXES)


def _looks_like_value(word: str) -> bool:
    if not word.startswith("-"):
        return True
    return bool(re.match(r"^-\d", word))  # a negative number (`--seed -1`)


def _scan(argv: Sequence[str]) -> tuple[list[tuple[str, FlagUse]], list[int]]:
    """All flag uses (canonical name, use) and the indexes of positional words."""
    form = launch_form(argv)
    start = form.args_start if form else 1
    flags: list[tuple[str, FlagUse]] = []
    positionals: list[int] = []
    i = start
    while i < len(argv):
        word = argv[i]
        if word == "--":
            positionals.extend(range(i + 1, len(argv)))
            break
        if word.startswith("-") and len(word) > 1 and not _looks_like_value(word):
            name, eq, value = word.partition("=")
            canon = canonical_flag(name)
            if eq:
                flags.append((canon, FlagUse(i, i + 1, value, inline=True)))
                i += 1
                continue
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            if nxt is not None and not is_switch(canon) and _looks_like_value(nxt):
                flags.append((canon, FlagUse(i, i + 2, nxt, inline=False)))
                i += 2
                continue
            flags.append((canon, FlagUse(i, i + 1, None, inline=False)))
            i += 1
            continue
        positionals.append(i)
        i += 1
    return flags, positionals


def flag_uses(argv: Sequence[str], name: str) -> list[FlagUse]:
    """Every occurrence of flag `name` (any spelling), in order."""
    canon = canonical_flag(name)
    return [use for flag, use in _scan(argv)[0] if flag == canon]


def _default(defaults: Mapping[str, JsonValue] | None, name: str) -> JsonValue:
    """A value from a `--config` YAML dict, whose keys may use dashes or underscores."""
    if not defaults:
        return None
    canon = canonical_flag(name)
    for key, value in defaults.items():
        if canonical_flag(str(key)) == canon:
            return value
    return None


def _yaml_value_as_text(value: JsonValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def get_flag(
    argv: Sequence[str], name: str, defaults: Mapping[str, JsonValue] | None = None
) -> str | None:
    """The value vLLM would use for `name`: the last occurrence, else the `--config` default.

    A switch given without a value reads as "true". None when the flag is absent.
    """
    uses = flag_uses(argv, name)
    if uses:
        value = uses[-1].value
        return "true" if value is None else value
    default = _default(defaults, name)
    return None if default is None else _yaml_value_as_text(default)


def has_flag(
    argv: Sequence[str], name: str, defaults: Mapping[str, JsonValue] | None = None
) -> bool:
    """Whether a switch is on (present on the command line or true in the config)."""
    value = get_flag(argv, name, defaults)
    return value is not None and value.lower() not in {"false", "0", "no"}


def set_flag(argv: Sequence[str], name: str, value: str | None) -> list[str]:
    """A copy of argv with `name` set to `value` (None: a switch without a value).

    The last occurrence is updated in place in its own form; earlier ones are removed. A flag
    not present is appended at the end.
    """
    canon = canonical_flag(name)
    uses = flag_uses(argv, canon)
    out = list(argv)
    if not uses:
        out.append(canon)
        if value is not None:
            out.append(value)
        return out
    last = uses[-1]
    written = out[last.start].partition("=")[0]  # keep the user's spelling of the name
    if value is None:
        replacement = [written]
    elif last.inline:
        replacement = [f"{written}={value}"]
    else:
        replacement = [written, value]
    out[last.start : last.stop] = replacement
    for use in reversed(uses[:-1]):
        del out[use.start : use.stop]
    return out


def remove_flag(argv: Sequence[str], name: str) -> list[str]:
    """A copy of argv without any occurrence of `name` (and their values)."""
    out = list(argv)
    for use in reversed(flag_uses(argv, name)):
        del out[use.start : use.stop]
    return out


def find_model(argv: Sequence[str], defaults: Mapping[str, JsonValue] | None = None) -> str | None:
    """The model: `--model` (last wins), else the first positional, else the config's `model`."""
    uses = flag_uses(argv, MODEL)
    if uses and uses[-1].value is not None:
        return uses[-1].value
    _, positionals = _scan(argv)
    if positionals:
        return argv[positionals[0]]
    value = _default(defaults, MODEL)
    return None if value is None else str(value)


def config_path(argv: Sequence[str]) -> str | None:
    """The `--config` YAML file named on the command line, if any."""
    uses = flag_uses(argv, CONFIG)
    return uses[-1].value if uses else None


def mask_secrets(argv: Sequence[str]) -> list[str]:
    """A copy of argv with the values of secret flags (`--api-key`), and any word that is a
    key by its form (`--served-model-name sk-…`), replaced by `***`."""
    out = [MASK if secrets.is_key_by_form(word) else word for word in argv]
    for flag, use in _scan(argv)[0]:
        if flag not in SECRET_FLAGS or use.value is None:
            continue
        if use.inline:
            out[use.start] = out[use.start].partition("=")[0] + "=" + MASK
        else:
            out[use.start + 1] = MASK
    return out


# --- typed readers for the flags vramtop edits -------------------------------------------


def gpu_memory_utilization(
    argv: Sequence[str], defaults: Mapping[str, JsonValue] | None = None
) -> float | None:
    """The budget as a fraction of the card (None: not set, vLLM's default applies)."""
    value = get_flag(argv, GPU_MEMORY_UTILIZATION, defaults)
    return None if value is None else float(value)


def max_model_len(
    argv: Sequence[str], defaults: Mapping[str, JsonValue] | None = None
) -> int | None:
    value = get_flag(argv, MAX_MODEL_LEN, defaults)
    return None if value is None else parse_token_count(value)


def kv_cache_dtype(
    argv: Sequence[str], defaults: Mapping[str, JsonValue] | None = None
) -> str | None:
    return get_flag(argv, KV_CACHE_DTYPE, defaults)


def max_num_seqs(
    argv: Sequence[str], defaults: Mapping[str, JsonValue] | None = None
) -> int | None:
    value = get_flag(argv, MAX_NUM_SEQS, defaults)
    return None if value is None else int(value)


def port(argv: Sequence[str], defaults: Mapping[str, JsonValue] | None = None) -> int | None:
    value = get_flag(argv, PORT, defaults)
    return None if value is None else int(value)


def host(argv: Sequence[str], defaults: Mapping[str, JsonValue] | None = None) -> str | None:
    return get_flag(argv, HOST, defaults)


_COUNT = re.compile(r"^(\d+(?:\.\d+)?)([kKmMgG]?)$")
_SCALE = {"": 1, "k": 1000, "m": 1000**2, "g": 1000**3, "K": 1024, "M": 1024**2, "G": 1024**3}


def parse_token_count(text: str) -> int:
    """`163840`, `160k` (×1000) or `160K` (×1024), as vLLM reads `--max-model-len`."""
    match = _COUNT.match(text.strip())
    if not match:
        raise ValueError(f"not a token count: {text!r}")
    return int(float(match.group(1)) * _SCALE[match.group(2)])
