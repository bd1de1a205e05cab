"""What the diagnosis reads off one sample: the card, the server's metrics, state and budget."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from vramtop.core.budget import free_for_server, is_cpu_server, outside_budget
from vramtop.core.headroom.calculator import predict, startup_refusal
from vramtop.core.headroom.flags import RelaunchFlags, relaunch_flags, smallest_serving_util
from vramtop.core.headroom.live_inputs import live_headroom_inputs
from vramtop.core.headroom.terms import HeadroomError, Prediction
from vramtop.core.model import GpuDevice, Sample, ServerMetrics, ServerState
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
    as free: it is stopped first). A restart is the relaunch with no change: "not restarted"."""
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
        # A restart keeps the flags the server started with: what vramtop cannot model of
        # them says nothing (vLLM checks anyway).
        return None if change.empty else str(error)
    if refused is None:
        return None
    step = "restarted" if change.empty else "relaunched"
    return f"not {step} (the server keeps serving): vLLM would refuse it: {refused.message}"
