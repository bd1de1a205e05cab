"""Warnings about a server's launch: exposure, remote code, where the key is, desktop headroom.

Pure: the caller passes the argv, where the key comes from, and (when known) the card's total
memory and what the server was measured to hold outside its budget. One `Finding` per problem,
each with the fix. The headroom is the one rule every surface uses (`vramtop.core.budget`):
the card less the budget less what vLLM holds outside it, so `lint` and `calc` print the same
figures for the same card and budget.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from vramtop.core.bounds import block_size_problem, shown, tensor_parallel_problem
from vramtop.core.budget import (
    desktop_headroom_bytes,
    largest_util_leaving,
    outside_budget,
)
from vramtop.core.json_types import JsonValue
from vramtop.core.slow_part import PLACE_FIX, place_words
from vramtop.core.vllm import args as vllm_args

GIB = 1024**3
ALL_INTERFACES = frozenset({"0.0.0.0", "::", "", "[::]"})
# vLLM's --gpu-memory-utilization default in recent releases (0.9 in older ones).
DEFAULT_UTILIZATION = 0.92


@dataclass(frozen=True)
class Finding:
    code: str  # stable id: exposed, remote-code, key-on-command-line, key-in-profile,
    # internal-port, headroom, budget, block-size, tensor-parallel-size, model-place
    message: str
    fix: str

    def __str__(self) -> str:
        return f"{self.code}: {self.message} Fix: {self.fix}"


def lint_launch(
    argv: Sequence[str],
    *,
    api_key_env: str | None = None,
    api_key_in_script: bool = False,
    defaults: Mapping[str, JsonValue] | None = None,
    total_bytes: int | None = None,
    min_headroom_gib: float = 3.0,
    env: Mapping[str, str] | None = None,
    outside_budget_bytes: int | None = None,
    keys_in_file: Sequence[str] = (),
    model_place: tuple[str, str] | None = None,
) -> list[Finding]:
    """`env`: the environment the server starts with (vLLM reads VLLM_* from it).
    `outside_budget_bytes`: what the server was measured to hold beyond its budget (its CUDA
    context); None: the estimate, and the finding says so. `keys_in_file`: where a profile's
    file holds a key written out beside its command line (`prelude`, `env NAME`).
    `model_place`: where the model is read from and the slow place that is on (a Windows
    drive, a network file system: `core.slow_part.slow_place`)."""
    findings: list[Finding] = []
    key_on_line = vllm_args.get_flag(argv, vllm_args.API_KEY, defaults) is not None
    has_key = key_on_line or api_key_env is not None or api_key_in_script
    where = exposed_where(argv, defaults)
    if where is not None and not has_key:
        findings.append(
            Finding(
                "exposed",
                f"the server listens on {where} without an API key.",
                "add `--host 127.0.0.1`, or set an API key (export VLLM_API_KEY).",
            )
        )
    if vllm_args.has_flag(argv, vllm_args.TRUST_REMOTE_CODE, defaults):
        findings.append(
            Finding(
                "remote-code",
                "--trust-remote-code runs Python code shipped with the checkpoint.",
                "remove it unless the model needs it and you trust its source.",
            )
        )
    if key_on_line:
        findings.append(
            Finding(
                "key-on-command-line",
                "the API key is written in the launch (visible in `ps` and in the file).",
                "remove --api-key and export VLLM_API_KEY in your shell (vLLM reads it).",
            )
        )
    elif api_key_in_script:
        # The script sets the variable itself (`export VLLM_API_KEY=…`): no --api-key to
        # remove, but the key sits in the file.
        findings.append(
            Finding(
                "key-on-command-line",
                "the API key is written in the script (visible in the file).",
                "remove the key from the script and export VLLM_API_KEY in your shell "
                "before starting (vLLM reads it).",
            )
        )
    if keys_in_file:
        findings.append(
            Finding(
                "key-in-profile",
                f"the profile's file holds a key in plain text ({', '.join(keys_in_file)}).",
                "remove it from the file and export it in your shell; the profile names its "
                'variable (api_key_env, hf_token_env) or the prelude refers to it as "$NAME".',
            )
        )
    findings.extend(_internal_port_findings(argv, defaults, env or {}))
    findings.extend(
        _budget_findings(argv, defaults, total_bytes, min_headroom_gib, outside_budget_bytes)
    )
    findings.extend(_count_findings(argv, defaults))
    if model_place is not None:
        findings.append(Finding("model-place", f"{place_words(*model_place)}.", f"{PLACE_FIX}."))
    return findings


# The counts vLLM is given whose values `core.bounds` knows (its short `-tp` included):
# flag names, the finding's code, the check, and the fix.
_COUNTS: tuple[tuple[tuple[str, ...], str, Callable[[int], str | None], str], ...] = (
    (
        ("--block-size",),
        "block-size",
        block_size_problem,
        "remove --block-size (vLLM picks its own) or give 16.",
    ),
    (
        ("--tensor-parallel-size", "-tp"),
        "tensor-parallel-size",
        tensor_parallel_problem,
        "give the number of GPUs the model is split over (1 for one GPU).",
    ),
)


def _count_findings(argv: Sequence[str], defaults: Mapping[str, JsonValue] | None) -> list[Finding]:
    """A --block-size or --tensor-parallel-size vLLM would not start with (`core.bounds`)."""
    findings: list[Finding] = []
    for names, code, problem_of, fix in _COUNTS:
        for name in names:
            raw = vllm_args.get_flag(argv, name, defaults)
            if raw is None:
                continue
            text = raw.strip()
            problem = (
                problem_of(int(text))
                if text.isascii() and text.isdigit() and len(text) <= 12
                else "not a whole number"
            )
            if problem is not None:
                findings.append(
                    Finding(code, f"{name} {shown(raw)}: {problem}; vLLM would not start.", fix)
                )
    return findings


UDS = "--uds"


def exposed_where(
    argv: Sequence[str], defaults: Mapping[str, JsonValue] | None = None
) -> str | None:
    """Where beyond this machine the server can be reached, in words; None when only from
    here: a loopback `--host`, or a Unix socket (`--uds`: vLLM then ignores host and port).
    vLLM binds every interface when no --host is given."""
    if vllm_args.get_flag(argv, UDS, defaults) is not None:
        return None
    host = vllm_args.host(argv, defaults)
    if host is None:
        return "every network interface (no --host given)"
    address = _address(host)
    if host.strip() in ALL_INTERFACES or (address is not None and address.is_unspecified):
        return "every network interface" + ("" if host in ALL_INTERFACES else f" (--host {host})")
    if address is not None and address.is_loopback:
        return None
    if address is None and host.strip().lower().rstrip(".") in ("localhost", "ip6-localhost"):
        return None
    return f"{host} (reachable from other machines)"


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address a --host names, as the system reads it (`0` and `127.1` are the short
    IPv4 forms inet_aton takes; an IPv4-mapped IPv6 address is its IPv4 one); None for a
    name."""
    text = host.strip().removeprefix("[").removesuffix("]").split("%", 1)[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return _inet_aton(text)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _inet_aton(text: str) -> ipaddress.IPv4Address | None:
    """`0`, `127.1`, `0x7f.1`, `017700000001`: the numbers-and-dots forms of inet_aton(3)."""
    parts = text.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    try:
        numbers = [
            int(p, 16)
            if p.lower().startswith("0x")
            else int(p, 8 if p[:1] == "0" and len(p) > 1 else 10)
            for p in parts
        ]
    except ValueError:
        return None
    *head, last = numbers
    if any(not 0 <= n <= 255 for n in head) or not 0 <= last < 256 ** (5 - len(parts)):
        return None
    value = 0
    for n in head:
        value = value * 256 + n
    return ipaddress.IPv4Address(value * 256 ** (5 - len(parts)) + last)


def _internal_port_findings(
    argv: Sequence[str], defaults: Mapping[str, JsonValue] | None, env: Mapping[str, str]
) -> list[Finding]:
    """VLLM_PORT is the port vLLM uses internally, never the API server's: vLLM reads no
    variable for that, only --port. A launch that sets it usually means the API port."""
    internal = env.get("VLLM_PORT", "").strip()
    if not internal:
        return []
    api = vllm_args.get_flag(argv, vllm_args.PORT, defaults) or "8000"
    return [
        Finding(
            "internal-port",
            f"VLLM_PORT={internal} is vLLM's internal port, not where the server listens: "
            f"that is --port ({api}).",
            "unset VLLM_PORT; give the server's port with --port.",
        )
    ]


def _budget_findings(
    argv: Sequence[str],
    defaults: Mapping[str, JsonValue] | None,
    total_bytes: int | None,
    min_headroom_gib: float,
    measured_outside: int | None,
) -> list[Finding]:
    """An unusable --gpu-memory-utilization, or one that leaves the desktop too little."""
    try:
        util = vllm_args.gpu_memory_utilization(argv, defaults)
    except ValueError:  # not a number: reported below like an out-of-range one
        util = -1.0
    if util is not None and not 0 < util <= 1:
        raw = vllm_args.get_flag(argv, vllm_args.GPU_MEMORY_UTILIZATION, defaults)
        return [
            Finding(
                "budget",
                f"--gpu-memory-utilization {raw} is not a fraction in (0, 1]: vLLM refuses it.",
                "give a fraction such as 0.85.",
            )
        ]
    if not total_bytes:
        return []
    assumed = util is None
    util = DEFAULT_UTILIZATION if util is None else util
    outside = outside_budget(measured_outside)
    headroom = desktop_headroom_bytes(total_bytes, util, outside)
    minimum = round(min_headroom_gib * GIB)  # as `calc --for-headroom-gib` reads it
    if headroom >= minimum:
        return []
    fit = largest_util_leaving(total_bytes, minimum, outside)
    budget = f"{util:g}" + (" (vLLM's default)" if assumed else "")
    return [
        Finding(
            "headroom",
            f"a budget of {budget} leaves the desktop {headroom / GIB:.2f} GiB of "
            f"{total_bytes / GIB:.2f} GiB, less than the {min_headroom_gib:g} GiB minimum: "
            f"{outside_words(measured_outside)}.",
            f"use --gpu-memory-utilization {fit:.2f} or lower."
            if fit > 0
            else f"no budget leaves {min_headroom_gib:g} GiB of this card: lower "
            "min_desktop_headroom_gib in config.toml, or serve from a larger card.",
        )
    ]


def outside_words(measured: int | None) -> str:
    """What the headroom counts, and where its figure for what vLLM holds outside its budget
    came from: measured on a server, else the estimate."""
    outside = outside_budget(measured)
    source = "measured" if measured is not None else "estimated: no running server measured it"
    return (
        f"the card less the budget and the {outside / GIB:.2f} GiB vLLM holds outside it "
        f"(its CUDA context; {source})"
    )
