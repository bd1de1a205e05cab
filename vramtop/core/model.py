"""The values that cross vramtop's boundaries: what a tick saw, as plain frozen data.

Sources build these, the core derives from them, the console renders them, recordings store
them. `None` always means "not known"; a failed source is a value with a reason, never an
exception.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vramtop.core.windows.reading import WindowsGpuReading

GIB = 1024**3
MIB = 1024**2


class ServerState(StrEnum):
    """The server's lifecycle as the session format names it."""

    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"
    CRASHED = "crashed"


class SplitMethod(StrEnum):
    """How the server's share of the card was obtained."""

    PER_PROCESS = "per_process"  # sum over the server's process tree, from the driver
    DERIVED = "derived"  # from the server's budget and startup log (WSL2: no per-process data)
    WINDOWS = "windows"  # WSL2: from Windows' own GPU counters (the WSL VM vs desktop programs)
    UNKNOWN = "unknown"


class MemoryKind(StrEnum):
    """What kind of memory a device's numbers describe."""

    DEDICATED = "dedicated"  # the card's own VRAM (a discrete NVIDIA or AMD card)
    # One pool shared with the CPU (DGX Spark's GB10): total, used and free are the system's
    # memory (MemTotal, MemTotal − MemAvailable, MemAvailable), the page cache counted free.
    UNIFIED = "unified"


@dataclass(frozen=True)
class ProcessMemory:
    pid: int
    name: str
    used_bytes: int
    # AMD: the process's buffers in GTT (system memory the card maps), from DRM fdinfo or
    # amdsmi. None where the driver does not say (NVIDIA).
    gtt_bytes: int | None = None


@dataclass(frozen=True)
class GpuDevice:
    index: int
    name: str
    total_bytes: int
    used_bytes: int
    free_bytes: int
    temperature_c: int | None = None
    sm_clock_mhz: int | None = None
    # NVML clock-throttle reasons as short names: hw_slowdown, hw_thermal, sw_thermal,
    # sw_power_cap, hw_power_brake. Empty when none; also empty when unknown.
    throttle: tuple[str, ...] = ()
    # None: the driver gives no per-process numbers here (WSL2), not "no processes".
    processes: tuple[ProcessMemory, ...] | None = None
    memory_kind: MemoryKind = MemoryKind.DEDICATED
    # AMD: GTT (system memory mapped for the card), where VRAM overflows. None: not known.
    gtt_total_bytes: int | None = None
    gtt_used_bytes: int | None = None
    # What the card itself says it is doing (NVML; None where the driver does not answer).
    # PCIe traffic in bytes/s over NVML's 20 ms window: RX is what the card receives, so
    # decoding from host memory (a spill) shows as RX in the GB/s.
    pcie_rx_bytes_per_s: int | None = None
    pcie_tx_bytes_per_s: int | None = None
    # Fractions (0..1) of NVML's last sample period in which a kernel ran (`gpu_util`) and
    # in which device memory was read or written (`memory_util`).
    gpu_util: float | None = None
    memory_util: float | None = None


@dataclass(frozen=True)
class GpuReading:
    """One batched read of every device, or the reason there is none."""

    devices: tuple[GpuDevice, ...] = ()
    source: str = "nvml"  # "nvml", "amdsmi", "sysfs" (AMD without amdsmi) or "sim"
    error: str | None = None  # why devices are missing or incomplete
    # WSL2: the kernel's `dxgkio_make_resident: Ioctl failed: -12` lines since the previous
    # read (an allocation the card could not take back: memory that lost residency). None
    # where the kernel's log is not read (not WSL2, or /dev/kmsg not readable).
    residency_failures: int | None = None

    @property
    def available(self) -> bool:
        return self.error is None and bool(self.devices)


@dataclass(frozen=True)
class CacheConfig:
    """vLLM's `cache_config_info` labels (all optional: older versions have fewer)."""

    block_size: int | None = None
    cache_dtype: str | None = None
    gpu_memory_utilization: float | None = None
    num_gpu_blocks: int | None = None
    kv_cache_size_tokens: int | None = None
    kv_cache_memory_bytes: int | None = None
    kv_cache_max_concurrency: float | None = None


@dataclass(frozen=True)
class ServerMetrics:
    """What one /metrics page says, summed over engines. Counters are cumulative."""

    generation_tokens_total: float | None = None
    prompt_tokens_total: float | None = None
    requests_running: float | None = None
    requests_waiting: float | None = None
    preemptions_total: float | None = None
    kv_cache_usage: float | None = None  # 0..1
    prefix_cache_queries_total: float | None = None
    prefix_cache_hits_total: float | None = None
    model_name: str | None = None
    cache: CacheConfig = field(default_factory=CacheConfig)
    # vLLM's per-token decode latency histogram (`inter_token_latency_seconds`; older
    # releases: `time_per_output_token_seconds`): its cumulative sum (seconds) and count
    # (tokens). Their deltas between two scrapes give the decode speed of that interval,
    # whatever the concurrency and however much prefill ran.
    inter_token_latency_sum_s: float | None = None
    inter_token_latency_count: float | None = None
    # Requests that got their first token (`time_to_first_token_seconds`' count, cumulative):
    # a first token is a generated token that is no inter-token latency observation.
    first_token_count: float | None = None
    # Lines of the page that could not be read (skipped; the scraper logs them).
    skipped_lines: int = 0
    # Values outside what vLLM can report, and repeats of a series: dropped (their figure is
    # unknown), counted; the scraper logs them.
    dropped_values: int = 0


@dataclass(frozen=True)
class ServerReading:
    """One scrape of a vLLM server's HTTP endpoints."""

    url: str
    reachable: bool = False
    healthy: bool | None = None
    metrics: ServerMetrics | None = None
    version: str | None = None
    max_model_len: int | None = None
    served_model: str | None = None
    # True when this reading could not be refreshed (timeout, error) and older data is shown.
    stale: bool = False
    error: str | None = None
    latency_s: float | None = None
    # Seconds every request has timed out while something holds the server's port (a hung or
    # stopped process); None while it answers, or refuses (nothing listens: down, not hung).
    not_answering_s: float | None = None


@dataclass(frozen=True)
class StartupFacts:
    """What a vLLM startup log told us. Sizes in GiB as vLLM prints them."""

    version: str | None = None
    device_kind: str | None = None  # "GPU" or "CPU" (from "GPU KV cache size")
    weights_gib: float | None = None  # "Model loading took X GiB"
    load_seconds: float | None = None
    available_kv_gib: float | None = None  # "Available KV cache memory: X GiB"
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    max_concurrency_len: int | None = None  # the "for N tokens per request" of that line
    # The 0.28+ summary line: free/total at startup, desired util and its GiB, and the terms.
    startup_free_gib: float | None = None
    startup_total_gib: float | None = None
    requested_budget: float | None = None
    requested_gib: float | None = None
    consumed_gib: float | None = None  # weights + non-torch
    activation_gib: float | None = None
    cudagraph_gib: float | None = None
    # "--gpu-memory-utilization=A is equivalent to --gpu-memory-utilization=B without CUDA
    # graph memory profiling": both numbers, when that line was printed.
    cudagraph_equivalent_util: tuple[float, float] | None = None
    listen: str | None = None  # "Starting vLLM server on http://…"
    error: str | None = None  # a startup failure vLLM printed (first recognised one)
    error_kind: str | None = None  # "out_of_memory", "engine_dead", "other"


@dataclass(frozen=True)
class StatsLine:
    """vLLM's periodic `Engine 000: Avg prompt throughput …` line."""

    engine: str | None
    prompt_tps: float
    generation_tps: float
    running: int
    waiting: int
    kv_cache_usage: float | None  # 0..1
    preemptions: int | None = None
    prefix_cache_hit_rate: float | None = None  # 0..1


@dataclass(frozen=True)
class Split:
    """The card divided into the vLLM server's share, everything else's, and free."""

    total_bytes: int
    server_bytes: int | None
    desktop_bytes: int | None  # everything that is not the server: desktop, other programs
    free_bytes: int
    method: SplitMethod
    detail: str  # one sentence: how the numbers were obtained
    budget_bytes: int | None = None  # ceil(total × util), when the util is known
    # total − budget − the server's footprint outside its budget: what the desktop may use.
    headroom_bytes: int | None = None
    # What `total_bytes` is: the card's VRAM, or (unified) the memory shared with the system.
    memory_kind: MemoryKind = MemoryKind.DEDICATED
    # AMD: the server's buffers in GTT (system memory): VRAM that overflowed. None: not known.
    server_gtt_bytes: int | None = None


@dataclass(frozen=True)
class ServerInfo:
    """The supervised (or attached) server as the supervisor knows it."""

    state: ServerState
    pid: int | None = None
    pgid: int | None = None
    port: int | None = None
    started_at: float | None = None  # wall-clock epoch seconds
    ready_s: float | None = None  # time to ready of the last start
    phase: str | None = None  # loading weights, profiling, capturing graphs, ready
    profile: str | None = None
    argv: tuple[str, ...] = ()  # secrets masked
    budget: float | None = None  # its --gpu-memory-utilization
    max_model_len: int | None = None
    kv_cache_dtype: str | None = None
    pids: tuple[int, ...] = ()  # the whole process tree, when known
    returncode: int | None = None
    last_error: str | None = None

    def to_json(self) -> dict[str, object]:
        """Its fields by name, in order, as `status --json` writes them (the budget under
        vLLM's name, `gpu_memory_utilization`)."""
        out = asdict(self)
        return {("gpu_memory_utilization" if k == "budget" else k): v for k, v in out.items()}


@dataclass(frozen=True)
class Rates:
    """Derived from two or more counter readings. None when it cannot be known yet."""

    generation_tps: float | None = None
    prompt_tps: float | None = None
    preemptions_per_s: float | None = None


@dataclass(frozen=True)
class DoorReading:
    """What the profile's front door says it sees (`GET /vramtop/door`), one read a tick.
    Counts are the door's own since its start; latencies are p50/p95 over its latest
    generation requests (None until measured)."""

    address: str  # the door's HOST:PORT, as the profile names it
    holding: bool = False  # new requests wait (a restart or relaunch under way)
    in_flight: int = 0  # forwarded, not yet answered whole
    held: int = 0  # waiting at the door now
    served: int = 0  # forwarded and answered whole
    failed: int = 0  # answered with the door's own error, or a stream broken off
    longest_hold_s: float = 0.0  # the longest any request has waited, those waiting included
    ttft_p50_s: float | None = None
    ttft_p95_s: float | None = None
    e2e_p50_s: float | None = None
    e2e_p95_s: float | None = None
    decode_tps_p50: float | None = None  # the decode speed the clients saw, per request


@dataclass(frozen=True)
class Sample:
    """Everything one tick saw. `t` is seconds since the session started."""

    t: float
    gpu: GpuReading
    server: ServerReading | None = None
    info: ServerInfo | None = None
    startup: StartupFacts | None = None
    split: Split | None = None
    rates: Rates = field(default_factory=Rates)
    stats: StatsLine | None = None  # the newest periodic stats line, if any
    # WSL2 only: the Windows side (named desktop programs, the WSL VM's dedicated and shared
    # GPU memory). None where it is not watched.
    windows: WindowsGpuReading | None = None
    # The profile's front door, where one answered this tick; None: no door, or no answer.
    door: DoorReading | None = None
