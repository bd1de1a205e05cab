"""What the diagnosis reads off one sample: the card, the server's metrics, state and budget."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from vramtop.core.budget import budget_bytes, free_for_server, is_cpu_server, outside_budget
from vramtop.core.headroom.calculator import predict, startup_refusal
from vramtop.core.headroom.flags import RelaunchFlags, relaunch_flags, smallest_serving_util
from vramtop.core.headroom.live_inputs import live_headroom_inputs
from vramtop.core.headroom.startup_checks import free_memory_refusal
from vramtop.core.headroom.terms import HeadroomError, Prediction
from vramtop.core.model import GIB, GpuDevice, Sample, ServerMetrics, ServerState
from vramtop.core.remedy import FlagChange
from vramtop.core.snapshot import server_util
from vramtop.core.vllm import args as vllm_args


def primary(s: Sample) -> GpuDevice | None:
    """The device the server uses (the first one: vramtop watches one card per server)."""
    return s.gpu.devices[0] if s.gpu.devices else None


def metrics(s: Sample | None) -> ServerMetrics | None:
    if s is None or s.server is None or s.server.stale or not s.server.reachable:
        return None
    return s.server.metrics


def state(s: Sample) -> ServerState | None:
    if s.info is not None:
        return s.info.state
    return None


def util(s: Sample) -> float | None:
    """The server's budget: as vLLM reports it, else as launched (see `server_util`)."""
    return server_util(s)


def smallest_util_that_serves(s: Sample) -> float | None:
    """The smallest budget vLLM would start a useful server with (a shorter --max-model-len
    allowed), by the headroom model calibrated on this server; None when its pool is not
    known."""
    inputs = live_headroom_inputs(s)
    if inputs is None:
        return None
    return smallest_serving_util(inputs)


def flags_at(s: Sample, util: float) -> RelaunchFlags | None:
    """The flags a relaunch at `util` needs on this server (a shorter --max-model-len where
    the current one no longer fits); None when its pool is not known or nothing serves."""
    inputs = live_headroom_inputs(s)
    return None if inputs is None else relaunch_flags(inputs, util)


def predictions(s: Sample, *utils: float | None) -> tuple[Prediction | None, ...]:
    """What the server's calibrated model says of each budget (None: not known)."""
    inputs = live_headroom_inputs(s)

    def one(util: float | None) -> Prediction | None:
        if inputs is None or util is None:
            return None
        try:
            return predict(inputs, util)
        except HeadroomError:
            return None

    return tuple(one(util) for util in utils)


def desktop_bytes(s: Sample) -> int | None:
    if s.split is not None and s.split.desktop_bytes is not None:
        return s.split.desktop_bytes
    return None


def max_num_seqs(argv: Sequence[str]) -> int | None:
    """--max-num-seqs as vLLM reads it (the last occurrence wins); None if absent or unreadable."""
    try:
        return vllm_args.max_num_seqs(argv)
    except ValueError:
        return None


def relaunch_refusal(
    s: Sample, change: FlagChange, outside_budget_bytes: int | None = None
) -> str | None:
    """Why vLLM would refuse a relaunch with `change` on this machine now, by its own startup
    checks, in its own words; None when it would start, or when the server's model or the
    card is not known well enough to say. The free memory is the card less the desktop's
    share and the new server's memory outside its budget (the current server's memory counts
    as free: it is stopped first)."""
    inputs = live_headroom_inputs(s, outside_budget_bytes)
    device = primary(s)
    if (
        inputs is None
        or device is None
        or is_cpu_server(s.startup.device_kind if s.startup else None)
    ):
        return None
    util = change.budget or server_util(s)
    if change.max_model_len is not None:
        inputs = replace(inputs, max_model_len=change.max_model_len)
    if change.kv_cache_dtype:
        inputs = replace(inputs, kv_cache_dtype=change.kv_cache_dtype)
    desktop = desktop_bytes(s)
    free = (
        None
        if desktop is None
        else free_for_server(device.total_bytes, desktop, outside_budget(outside_budget_bytes))
    )
    if util is None:
        return None
    try:
        refused = startup_refusal(inputs, util, free)
    except HeadroomError as error:
        return str(error)
    return (
        None
        if refused is None
        else f"not relaunched (the server keeps serving): vLLM would refuse it: {refused.message}"
    )


def _desktop_when_started(s: Sample, watched: int | None) -> int | None:
    """What the desktop held when the server started: as watched from the server's first
    sample, and at most what vLLM's log says was in use at its startup check (0.28+: the card
    less the memory free then, which also counts vLLM's own CUDA context), for a console
    opened after a call began; the smaller of the two known."""
    facts = s.startup
    logged = None
    if facts is not None and facts.startup_free_gib is not None and facts.startup_total_gib:
        logged = round((facts.startup_total_gib - facts.startup_free_gib) * GIB)
    known = [bytes_ for bytes_ in (watched, logged) if bytes_ is not None]
    return min(known) if known else None


def restart_refusal(
    s: Sample, outside_budget_bytes: int | None, desktop_at_start: int | None
) -> str | None:
    """Why vLLM would refuse a restart of this server now, in its words; None when it would
    start, or when that cannot be said. The same flags passed vLLM's checks when this server
    started: only its free-memory check can come out otherwise, and only where the desktop
    holds more now than it did then (a call's memory; `desktop_at_start`, as watched). The
    free memory is counted as for a relaunch (`free_for_server`)."""
    device = primary(s)
    desktop = desktop_bytes(s)
    util = server_util(s)
    then = _desktop_when_started(s, desktop_at_start)
    if (
        device is None
        or desktop is None
        or util is None
        or then is None
        or desktop <= then
        or is_cpu_server(s.startup.device_kind if s.startup else None)
    ):
        return None
    total = device.total_bytes
    free = free_for_server(total, desktop, outside_budget(outside_budget_bytes))
    refused = free_memory_refusal(free, total, util, budget_bytes(total, util))
    if refused is None:
        return None
    return (
        f"not restarted (the server keeps serving): vLLM would refuse it: {refused.message} "
        "(a stop and a start try it anyway)"
    )
