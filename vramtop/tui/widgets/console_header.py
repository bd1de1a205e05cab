"""The two header lines: what card, which server, in what state, and what is happening now."""

from __future__ import annotations

from textual.content import Content

from vramtop.core.launch_failure import state_word
from vramtop.core.model import GIB, Sample, ServerState
from vramtop.core.step_report import UnderWay, asked_by_words
from vramtop.tui.format import duration, ready_time, uptime
from vramtop.tui.widgets.text_panel import Row, TextPanel, Wrapped

Part = str | tuple[str, str]
# The rank of the header's parts that give way last (see `Optional`).
LAST = -1

STATE_STYLE = {
    ServerState.RUNNING: "bold $success",
    ServerState.STARTING: "bold $warning",
    ServerState.STOPPING: "bold $warning",
    ServerState.STOPPED: "bold $text-muted",
    ServerState.CRASHED: "bold $error",
}

# An action under way (`acting`): its state word, whatever the server's is meanwhile.
ACTING_STYLE = "bold $warning"


class ConsoleHeader(TextPanel):
    DEFAULT_CSS = """
    ConsoleHeader {
        height: auto; background: $panel; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis;
    }
    """

    # The time to ready of the last start seen: said while the next one loads (a new start's
    # record has none of its own until it is ready).
    _last_ready_s: float | None = None

    def show(
        self,
        sample: Sample | None,
        now: float,
        *,
        wsl: bool | None,
        call_on: bool,
        demo: bool,
        profile: str | None,
        activity: str | None,
        acting: str | None = None,
        recorded: bool = False,
        under_way: UnderWay | None = None,
    ) -> None:
        """`acting`: while an action runs, its own state word ("restarting"), said in place
        of the server's, which moves through stopped and starting meanwhile; `recorded`: a
        replay: the pid is a recorded one, not a process of this machine; `under_way`: the
        action under way on the server by any process (another terminal's `vramtop restart`,
        a guard, an automatic restart), said the same way, with its seconds so far."""
        info = sample.info if sample else None
        if info is not None and info.ready_s is not None:
            self._last_ready_s = info.ready_s
        # Two rows: the second (state, uptime) changes every second, the first rarely. What
        # happens now (the status line) goes beside the state, or below it where that line
        # has no room for all its words: never cut.
        width = self.content_region.width or None  # None before the first layout
        server = _server_line(
            sample,
            now,
            recorded=recorded,
            last_ready_s=self._last_ready_s,
            acting=acting,
            under_way=under_way,
        )
        rows: list[Row] = [_fit(_machine_line(sample, wsl, call_on, demo, profile), width)]
        said: Part | None = (f"  {activity}", "bold $warning") if activity else None
        beside = _fit([*server, said], width) if said is not None else None
        if beside is not None and (width is None or beside.cell_length <= width):
            rows.append(beside)
        else:
            rows.append(_fit(server, width))
            if activity:
                rows.append(Wrapped(Content.styled(activity, "bold $warning")))
        self.set_rows(rows)


class Optional(tuple[str, str]):
    """A header part that gives way when the line is too long for the terminal: what
    happens now (a prompt to confirm, the call marker) must stay readable at 80 columns.
    Those of the highest `rank` give way first, the last listed first among equals."""

    rank: int

    def __new__(cls, part: tuple[str, str], rank: int = 0) -> Optional:
        made = super().__new__(cls, part)
        made.rank = rank
        return made


def _fit(parts: list[Part], width: int | None) -> Content:
    """The line, its `Optional` parts left out while it is wider than `width` (what still
    does not fit is cut with an ellipsis)."""
    kept = list(parts)
    line = Content.assemble(*kept)
    while width is not None and line.cell_length > width:
        optional = [(part.rank, i) for i, part in enumerate(kept) if isinstance(part, Optional)]
        if not optional:
            break
        del kept[max(optional)[1]]
        line = Content.assemble(*kept)
    return line


def _machine_line(
    sample: Sample | None, wsl: bool | None, call_on: bool, demo: bool, profile: str | None
) -> list[Part]:
    parts: list[Part] = [("vramtop", "bold $accent")]
    if demo:
        parts.append((" demo", "italic"))
    gpu = sample.gpu if sample else None
    if gpu and gpu.devices:
        device = gpu.devices[0]
        parts.append(f"  {_short_name(device.name)} {device.total_bytes / GIB:.1f} GiB")
    elif gpu and gpu.error:
        parts.append(("  GPU unavailable", "bold $error"))
    # What gives way to the call marker at 80 columns: the version first, then the system,
    # then a demo's profile (its card is named already: "demo-r9700" beside the R9700).
    if wsl is not None:
        parts.append(Optional((" · WSL2" if wsl else " · native Linux", "")))
    info = sample.info if sample else None
    profile_name = (info.profile if info else None) or profile
    # The demo's profile is called "demo": saying it twice costs the call marker its room.
    if profile_name and not (demo and profile_name == "demo"):
        name = f" · {profile_name}"
        parts.append(Optional((name, ""), rank=LAST) if demo else name)
    version = _version(sample)
    if version:
        parts.append(Optional((f" · vLLM {version}", "")))
    if call_on:
        parts.append(("  ● call on ", "bold reverse $warning"))
    return parts


def _not_answering(sample: Sample | None) -> str | None:
    """What a running server's process is while it answers nothing: "not answering" (for
    how long, where known); None while it answers."""
    server = sample.server if sample else None
    if server is None or (server.reachable and not server.stale):
        return None
    waited = server.not_answering_s
    return "not answering" if waited is None else f"not answering for {duration(waited)}"


def _server_line(
    sample: Sample | None,
    now: float,
    *,
    recorded: bool = False,
    last_ready_s: float | None = None,
    acting: str | None = None,
    under_way: UnderWay | None = None,
) -> list[Part]:
    info = sample.info if sample else None
    # Another process's action (this console's own counts its seconds on the status line).
    so_far: list[Part] = []
    if acting is None and under_way is not None:
        acting = under_way.state_word
        seconds = under_way.seconds(now)
        if seconds is not None:
            so_far.append(f" · {duration(seconds)} so far")
        who = asked_by_words(under_way.asked_by)
        if who is not None:  # (gives way before the pid and the budget)
            so_far.append(Optional((f" · {who}", "")))
    parts: list[Part] = []
    server = sample.server if sample else None
    if info is None and server is not None:
        # Watching a URL, with no profile to start or stop it.
        if server.reachable:
            parts.append(("● up", STATE_STYLE[ServerState.RUNNING]))
            parts.append(f" {server.url} · watching only (no profile)")
        else:
            parts.append(("● not answering", STATE_STYLE[ServerState.STOPPED]))
            parts.append(
                f" {server.url} · start vLLM, or: vramtop import launch.sh · vramtop --demo"
            )
    elif info is None:
        parts.append((f"● {acting}", ACTING_STYLE) if acting else "server: not known yet")
        parts.extend(so_far)
    else:
        silent = _not_answering(sample) if info.state is ServerState.RUNNING else None
        if acting is not None:
            parts.append((f"● {acting}", ACTING_STYLE))
        elif silent is not None:
            # Its process is there, but it answers nothing (stopped, hung): not "running".
            parts.append((f"● {silent}", STATE_STYLE[ServerState.CRASHED]))
        else:
            parts.append((f"● {state_word(info)}", STATE_STYLE.get(info.state, "")))
        if info.pid is not None:
            # The pid and the budget give way last (a lower rank), the budget first: the
            # VRAM panel's budget line says it too.
            pid = f" recorded pid {info.pid}" if recorded else f" pid {info.pid}"
            parts.append(Optional((pid, ""), rank=LAST))
        parts.extend(so_far)
        if info.state is ServerState.STARTING and info.started_at is not None and not acting:
            # A load takes minutes: how long this one has taken, and the last one in all. (A
            # step this console runs counts its own seconds on the status line: one clock.)
            parts.append(f" · {duration(now - info.started_at)} so far")
            if last_ready_s is not None:
                parts.append(Optional((f" (last start: {ready_time(last_ready_s)})", "")))
        # The details that give way to `activity` first: the last listed goes first.
        if info.state is ServerState.RUNNING and info.started_at is not None:
            parts.append(Optional((f" · up {uptime(now - info.started_at)}", "")))
        # The last run's time to ready, while it is the server shown (not once it is stopped).
        if info.ready_s is not None and info.state is not ServerState.STOPPED:
            parts.append(Optional((f" · ready in {ready_time(info.ready_s)}", "")))
        if info.budget is not None:
            parts.append(Optional((f" · budget {info.budget:.2f}", ""), rank=LAST))
    return parts


def _version(sample: Sample | None) -> str | None:
    if sample is None:
        return None
    if sample.server and sample.server.version:
        return sample.server.version
    return sample.startup.version if sample.startup else None


def _short_name(name: str) -> str:
    """'NVIDIA GeForce RTX 5090' → 'RTX 5090': the header has 80 columns for everything."""
    for prefix in ("NVIDIA GeForce ", "NVIDIA "):
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name
