"""`vramtop` with no subcommand: the console, or with `--once` one snapshot."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vramtop import files
from vramtop.commands.errors import CommandError
from vramtop.commands.shared_options import Given, Target
from vramtop.core.adaptive_words import AdaptiveState, budget_words
from vramtop.core.model import GIB, Sample
from vramtop.core.rate_figures import rate_text
from vramtop.core.secrets import mask_url
from vramtop.outcomes import ExitCode
from vramtop.settings import MIN_INTERVAL_S, interval_problem

if TYPE_CHECKING:
    # Imported where a backend is built: the console watching a URL or the demo builds its
    # own after its first frame (machines/deferred_backend.py), and these bring the sampler,
    # the diagnosis and the session writer.
    from vramtop.machines.machine_backend import MachineBackend

UNKNOWN = "—"
# Rates need two readings of vLLM's counters: --once samples this many seconds apart.
ONCE_GAP_S = 1.0


@dataclass(frozen=True)
class MonitorOptions:
    """The console's and `--once`'s options (see commands/shared_options.py)."""

    target: Target
    once: bool = False
    json: bool = False
    interval: float | None = None  # None: the settings' (the console), ONCE_GAP_S (--once)
    record: Path | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> MonitorOptions:
        given = Given(args)
        return cls(
            target=Target.from_args(args),
            once=given.flag("once"),
            json=given.flag("json"),
            interval=given.number("interval"),
            record=given.path("record"),
        )


def run(args: argparse.Namespace) -> int:
    options = MonitorOptions.from_args(args)
    target = options.target
    if target.wsl and not target.demo:
        return _usage("--wsl only applies to the simulated machine: use it with --demo.")
    if target.wsl and target.card not in (None, "5090"):
        return _usage(
            "--wsl presents the RTX 5090 the WSL2 way; the Spark and the R9700 run Linux."
        )
    if options.json and not options.once:
        return _usage("--json prints a snapshot: use it with --once.")
    if options.interval is not None and interval_problem(options.interval):
        return _usage(
            f"--interval must be a positive number of seconds, at least {MIN_INTERVAL_S}."
        )
    if target.url and not target.url.startswith(("http://", "https://")):
        return _usage(
            f"--url {mask_url(target.url)!r} is not an http(s) URL, e.g. http://127.0.0.1:8000"
        )
    from vramtop.settings import ConfigError, load_settings

    try:
        settings = load_settings()
    except ConfigError as exc:
        return _usage(str(exc))
    if options.interval is not None:
        settings = settings.replace(interval_s=options.interval)
    record = None
    if not options.once:
        record = options.record or (_session_file() if settings.record_sessions else None)
        if record is None:
            # The console draws first and builds its backend after: a build that fails is a
            # read that fails, shown in it. What can be refused is refused before it opens: a
            # profile that cannot be read, arguments that do not go together.
            from vramtop.commands.console_backend import console_backend
            from vramtop.tui.app import run_console

            if target.demo or (target.url and not (target.profile or target.card)):
                return run_console(console_backend(target), settings)
            from vramtop.commands.common import live_target

            try:
                live = live_target(target)
            except CommandError as exc:
                return _usage(str(exc))
            return run_console(console_backend(target, live), settings)
    if options.once:
        return _once_demo(options) if target.demo else _once_watching(options)
    from vramtop.commands.common import backend_for

    try:
        backend, owned = backend_for(target)
    except CommandError as exc:
        return _usage(str(exc))
    record = options.record or (_session_file() if settings.record_sessions else None)
    if record is not None:
        error = _start_recording(backend, record)
        if error is not None:
            backend.close(stop_server=owned)  # leave nothing behind that this run started
            return _usage(error)
    from vramtop.tui.app import run_console

    return run_console(backend, settings)


def _session_file() -> Path:
    """Where `record_sessions = true` puts each console session."""
    from vramtop.locations import log_dir

    folder = log_dir() / "sessions"
    files.private_dir(folder)
    return folder / f"{datetime.now().strftime('%Y%m%d-%H%M%S')}.jsonl"


def _start_recording(backend: MachineBackend, path: Path) -> str | None:
    """Record the console's session to `path` (every tick, event and finding from now on)."""
    from vramtop.commands.common import open_session_file

    try:
        writer = open_session_file(path, backend, backend.tick(log_limit=0).sample)
    except FileExistsError:
        return f"cannot record to {path}: it already exists (nothing was replaced)"
    except OSError as exc:
        return f"cannot record to {path}: {exc}"
    backend.session.record_to(writer)
    return None


def _once_watching(options: MonitorOptions) -> int:
    """`--once` on the real machine. Its first reading is taken as soon as the sampler
    exists: the rate window runs while the rest of the backend (the session and its
    diagnosis) loads, rather than after it."""
    from vramtop.commands.common import live_target

    try:
        machine = live_target(options.target).machine()
    except CommandError as exc:
        return _usage(str(exc))
    # The rate window starts with this reading: the backend's session and diagnosis load
    # within it, not before it.
    first = machine.sampler.tick()
    from vramtop.machines.machine_backend import backend_over

    return _once(backend_over(machine), options, first=first)


def _once_demo(options: MonitorOptions) -> int:
    """`--once` on the simulated machine. The server is launched as soon as the simulated GPU
    answers, and loads while the rest of the backend does; the answer waits for it."""
    from vramtop.commands.common import demo_card
    from vramtop.machines.demo_backend import begin_demo, demo_backend, start_agent
    from vramtop.machines.demo_world import demo_door

    target = options.target
    try:
        wsl, card = target.wsl, demo_card(target)
    except CommandError as exc:
        return _usage(str(exc))
    try:
        start = begin_demo(wsl=wsl, card=card, front_door=demo_door(target.front_door, card))
    except RuntimeError as exc:
        return _usage(f"the simulated machine could not start: {exc}")
    try:
        if not start.server_was_running:
            # Not waited for here, nor its outcome read: the start in `_once` follows this
            # launch to ready, or says why there was none.
            start.supervisor.start(wait_ready=False)
        # The agent once the server is up: its start (a process of its own) would take CPU
        # from the server's.
        backend, _owned = demo_backend(
            wsl=wsl, windows=target.windows, card=card, start=start, agent=False
        )
    except BaseException:  # Ctrl+C too: nothing this command started is left running
        start.end()
        raise
    try:
        return _once(backend, options, ready=lambda: start_agent(start))
    finally:
        # The server this command launched is stopped even where the simulated GPU was
        # running already (a console's, its server stopped): only the GPU is left, to leave
        # by itself.
        start.end(backend)


def _once(
    backend: MachineBackend,
    options: MonitorOptions,
    first: Sample | None = None,
    ready: Callable[[], None] | None = None,
) -> int:
    """One snapshot: two readings `--interval` (ONCE_GAP_S) apart, the second reported.
    `first`: the first reading, taken already by the backend's sampler. `ready`: called once
    the server is started, before the first reading."""
    from vramtop.core.snapshot import not_serving, snapshot

    if backend.autostart:
        result = backend.start()
        if not result.ok:
            detail = f"\n{result.detail}" if result.detail else ""
            print(f"vramtop: {result.message}{detail}", file=sys.stderr)
            return ExitCode.ERROR
    if ready is not None:
        ready()
    backend.housekeeping()  # the record as it really is before it is reported
    if first is None:
        first_t = backend.tick(log_limit=0).sample.t
    else:
        backend.session.observe(first)  # as a tick of the backend would have
        first_t = first.t
    # The gap from the first reading's time (its counters' read), not from the end of
    # what followed it.
    time.sleep(max(0.0, first_t + (options.interval or ONCE_GAP_S) - backend.samples_now()))
    frame = backend.tick(log_limit=0)
    from vramtop.commands.common import query_time

    read_at = query_time()
    sample = frame.sample
    data = _uncounted_is_unknown(snapshot(sample, wsl=bool(backend.wsl), demo=backend.demo))
    data["query_time"] = read_at
    # Additions: the findings open at this reading (the session format's shape) ...
    data["findings"] = [finding.to_json() for finding in frame.findings]
    # ... and the normal decode speed compared with, and where it came from.
    normal = backend.session.normal_rate()
    data["normal_rate"] = (
        None if normal is None else {**normal.to_json(), "text": normal.describe(time.time())}
    )
    # ... and the reading's rates against the normal, as the console and the exporter give
    # them (the per-request decode speed the diagnosis judged, and the normal it was judged
    # against).
    view = frame.throughput
    data["throughput"] = view.to_json() if view is not None and view.t == sample.t else None
    # ... and the profile's last start, restart or relaunch with its phases (null: none, or
    # no profile) ...
    data["last_step"] = None
    if backend.profile_name is not None:
        from vramtop.supervisor.step_phases import recorded_last_step

        data["last_step"] = recorded_last_step(backend.profile_name)
    # ... and the action under way on the profile's server, taken by any vramtop (another
    # terminal's restart, a guard, an automatic restart), as `status --json` gives it (null:
    # none, or no profile) ...
    acting = frame.under_way
    data["under_way"] = acting.to_json(time.time()) if acting is not None else None
    # ... and, where a guard runs adaptively for this profile, its two budgets and last steps.
    if backend.profile_name is not None:
        from vramtop.supervisor.actor import read_guard_state

        adaptive = read_guard_state(backend.profile_name)
        if adaptive is not None:
            data["adaptive"] = adaptive
    print(json.dumps(data, indent=2) if options.json else _text(sample, data))
    reason = not_serving(sample)
    if reason is None:
        return ExitCode.OK
    if options.json and sample.server is not None:  # the text says it already
        server = sample.server
        what = "cannot reach" if not server.reachable else "is not served by"
        print(f"vramtop: {what} the vLLM server at {server.url}: {reason}", file=sys.stderr)
    return ExitCode.NOT_SERVING


def _uncounted_is_unknown(data: dict[str, Any]) -> dict[str, Any]:
    """One snapshot's rate is taken over one short gap. While requests run, no generated
    token counted in it (a long prompt's prefill, counters not moved yet) does not say the
    rate is zero: it is unknown (null, shown "—")."""
    running = data["requests"]["running"]
    if running and data["rates"]["generation_tps"] == 0:
        data["rates"] = {**data["rates"], "generation_tps": None}
    return data


def _gib(value: int | None) -> str:
    return UNKNOWN if value is None else f"{value / GIB:.2f} GiB"


def _text(sample: Sample, data: dict[str, Any]) -> str:
    lines = []
    for gpu in data["gpus"]:
        lines.append(
            f"GPU {gpu['index']}: {gpu['name']}  {_gib(gpu['used_bytes'])} used of "
            f"{_gib(gpu['total_bytes'])}"
        )
    if data["gpu_error"]:
        lines.append(f"GPU: {data['gpu_error']}")
    split = data["split"]
    if split:
        lines.append(
            f"vLLM {_gib(split['server_bytes'])}  desktop/other {_gib(split['desktop_bytes'])}  "
            f"free {_gib(split['free_bytes'])}  ({split['method']})"
        )
    server = data["server"]
    words = _server_words(sample, server)
    if data.get("under_way") is not None:
        from vramtop.core.step_report import under_way_said

        words = under_way_said(data["under_way"], words)  # as `status` says it
    lines.append(
        f"server {server['url']}: {words}"
        f"  vLLM {server['version'] or UNKNOWN}"
        f"  budget {server['gpu_memory_utilization'] or UNKNOWN}"
    )
    kv = data["kv_pool"]
    usage = UNKNOWN if kv["usage"] is None else f"{kv['usage']:.1%}"
    kv_gib = UNKNOWN if kv["gib"] is None else f"{kv['gib']:.2f}"
    lines.append(f"KV pool {kv_gib} GiB, {kv['tokens'] or UNKNOWN} tokens, usage {usage}")
    rates = data["rates"]
    gen = rates["generation_tps"]
    lines.append(f"generation {rate_text(gen, 1)} tok/s")
    normal = data.get("normal_rate")
    lines.append(normal["text"] if normal else "normal rate: not known yet (cannot judge it)")
    # Where a guard runs adaptively for the profile, the panel's line (local clock times).
    adaptive = AdaptiveState.from_json(data.get("adaptive"))
    if adaptive is not None:
        lines.append(budget_words(adaptive, lambda t: time.strftime("%H:%M", time.localtime(t))))
    return "\n".join(lines)


def _server_words(sample: Sample, server: dict[str, Any]) -> str:
    """The server's state as the reading found it: a process the supervisor records as
    running that does not answer (stopped, hung) or refuses (HTTP 401) is said so."""
    from vramtop.core.snapshot import not_serving

    state = server["state"]
    reason = not_serving(sample)
    if reason is None:
        return str(state or "up")
    if not server["reachable"]:
        if state == "running":  # its process is there: stopped (SIGSTOP) or hung
            return f"running, not reachable: {reason}"
        return f"{state or 'not reachable'}: {reason}"
    return f"{state}, not serving: {reason}" if state else f"not serving: {reason}"


def _usage(message: str) -> int:
    print(f"vramtop: {message}", file=sys.stderr)
    return ExitCode.USAGE
