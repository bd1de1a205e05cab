"""`vramtop status [--json]`: the supervised server's state, pid, budget and last error."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, replace

from vramtop.commands import supervised
from vramtop.commands.catalog import summary
from vramtop.commands.common import query_time
from vramtop.commands.errors import CommandError
from vramtop.commands.shared_options import Given, Target
from vramtop.core.json_types import JsonObject
from vramtop.core.launch_failure import state_word
from vramtop.core.shell_words import shell_line
from vramtop.core.step_report import step_lines, under_way_said
from vramtop.supervisor import state
from vramtop.supervisor.service import server_url
from vramtop.supervisor.step_phases import recorded_last_step
from vramtop.supervisor.under_way import action_under_way

HEALTH_TIMEOUT_S = 3.0
NO_PROFILE = (
    "no profile yet: vramtop import launch.sh makes one from your launch script "
    "(vramtop attach adopts a server already running; --demo shows the simulated one)"
)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("status", help=summary("status"))
    supervised.add_common(p, json=True)


@dataclass(frozen=True)
class StatusOptions:
    """`vramtop status`'s options (see commands/shared_options.py)."""

    target: Target
    json: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> StatusOptions:
        return cls(target=Target.from_args(args), json=Given(args).flag("json"))


def run(args: argparse.Namespace) -> int:
    def act(options: StatusOptions) -> int:
        target = options.target
        if target.demo:
            from vramtop.commands.common import demo_card
            from vramtop.machines import demo_world

            card = demo_card(options.target)
            profile = demo_world.demo_profile_name(card)
            if demo_world.nothing_left(demo_world.demo_machine(card=card), profile):
                return _print(options.json, {"state": "stopped", "profile": profile})
            target = replace(options.target, card=card)
        t = supervised.target(target, without_profile=True)
        info = t.supervisor.housekeeping()
        rec = state.load(t.supervisor.name)
        if t.placeholder and rec is None:
            # No profile and no adopted server: there is no "default" server to call stopped.
            raise CommandError(NO_PROFILE)
        data = info.to_json()
        # Added: the state in the words the console's status line uses ("never started" for
        # a launch whose command could not run, which `state` calls crashed).
        data["state_word"] = state_word(info)
        # Added: what was found of a lost (deleted or damaged) state file, when it was.
        data["state_note"] = t.supervisor.record_note
        log_path = t.supervisor.log_path
        data["log_path"] = str(log_path) if log_path is not None else None
        if rec is not None:
            data["pids"] = live_pids(info.pids, rec.tree)
            data["started_by"] = rec.started_by
            url = server_url(rec.host, rec.port)
            data["url"] = url
            data["error_kind"] = rec.error_kind
            data["largest_fitting_budget"] = rec.largest_fitting_budget
            data["last_lines"] = rec.last_lines[-10:] if info.state == "crashed" else []
            if info.state == "running":
                data["healthy"], data["reason"] = _health(url)
            data.update(door_fields(rec))
        # Added: the profile's stray front doors (glossary), which `stop` ends; [] when none.
        from vramtop.supervisor import door

        named = rec.door_pid if rec is not None else None
        data["stray_door_pids"] = [proc.pid for proc in door.strays(t.supervisor.name, named)]
        # Added: the last start, restart or relaunch and its phases (null before any).
        data["last_step"] = recorded_last_step(t.supervisor.name, data.get("door"))
        # Added: the action another vramtop (a console, a guard, a command) is taking on the
        # server now, null when none: the record says only a moment of it.
        data["under_way"] = _under_way(t.supervisor.name)
        return _print(options.json, data)

    return supervised.run_guarded(act, StatusOptions.from_args(args))


def _under_way(profile: str) -> JsonObject | None:
    """`under_way`: the action (`action`, its word `state_word` as the console's header says
    it), the process taking it (`pid`), since when (`since`, Unix time) and its seconds so far
    (`seconds`); None when no action is under way."""
    acting = action_under_way(profile)
    return acting.to_json(time.time()) if acting is not None else None


def _health(url: str) -> tuple[bool, str | None]:
    """Whether the running server answers /health now, and why not."""
    import httpx

    from vramtop.supervisor.readiness import client_for

    try:
        with client_for(url, HEALTH_TIMEOUT_S) as client:
            status = client.get(f"{url}/health").status_code
    except httpx.TimeoutException:
        return False, f"/health did not answer within {HEALTH_TIMEOUT_S:g} s (hung or stopped?)"
    except httpx.HTTPError as exc:
        return False, f"/health could not be reached: {exc}"
    if status != 200:
        return False, f"/health answered HTTP {status}: the engine is not serving"
    return True, None


def _print(as_json: bool, data: dict[str, object]) -> int:
    if as_json:
        # When it was read, as `--once --json` stamps its answer (local time, its offset).
        data["query_time"] = query_time()
        print(json.dumps(data, indent=2, default=str))
        return 0
    word = data.get("state_word") or data["state"]
    acting = data.get("under_way")
    if isinstance(acting, dict):
        # The action's own word, as the console's header says it; the record's state beside.
        word = under_way_said(acting, str(word))
    lines = [f"{data.get('profile')}: {word}"]
    if data.get("pid"):
        lines[0] += f" (pid {data['pid']}, port {data.get('port')}, {data.get('started_by')})"
    if data.get("phase") and data["state"] == "starting":
        lines.append(f"  phase: {data['phase']}")
    if data.get("started_at") and data["state"] in ("starting", "running"):
        up = time.time() - float(data["started_at"])  # type: ignore[arg-type]
        ready = data.get("ready_s")
        if ready is not None:
            lines.append(f"  up {up:.0f} s, ready in {ready} s")
        elif data["state"] == "running":
            lines.append(f"  up {up:.0f} s (its load was not followed: ready time unknown)")
        else:
            lines.append(f"  up {up:.0f} s")
    for key, label in (
        ("gpu_memory_utilization", "budget"),
        ("max_model_len", "max-model-len"),
        ("kv_cache_dtype", "kv-cache-dtype"),
    ):
        if data.get(key) is not None:
            lines.append(f"  {label}: {data[key]}")
    if data.get("argv"):
        # Shell-quoted: copied into a shell, it is the command that ran (a JSON flag value or
        # a word with `;` stays one word), and on one line (a line break written `$'\n'`).
        lines.append("  command: " + shell_line(data["argv"]))  # type: ignore[arg-type]
    if data.get("healthy") is False:
        lines.append(f"  not healthy: {data.get('reason')}")
    if data.get("front_door"):
        lines.append("  " + _door_line(data))
    strays = data.get("stray_door_pids")
    if isinstance(strays, list) and strays:
        pids = ", ".join(str(pid) for pid in strays)
        lines.append(f"  stray front door (pid {pids}): left by an interrupted start; stop ends it")
    step = data.get("last_step")
    if isinstance(step, dict):
        lines += [f"  {line}" for line in step_lines(step)]
    if data.get("state_note"):
        lines.append(f"  note: {data['state_note']}")
    if data.get("last_error"):
        lines.append(f"  last error: {data['last_error']}")
    for line in data.get("last_lines") or []:  # type: ignore[attr-defined]
        lines.append(f"    | {line}")
    if data.get("log_path"):
        lines.append(f"  log: {data['log_path']}")
    elif data.get("started_by") == "attached":
        lines.append("  log: its output goes elsewhere (attach --log PATH names its file)")
    print("\n".join(lines))
    return 0


def door_fields(rec: state.ServerRecord) -> dict[str, object]:
    """Added: the front door's fields (`front_door` null without one): its address, its
    process, the port vLLM listens on behind it, how often it was started again after it
    died, and its own report (`door`: in flight, held, served, failed, latencies)."""
    from vramtop.supervisor import door

    running = rec.front_door is not None and door.alive(rec)
    return {
        "front_door": rec.front_door,
        "door_pid": rec.door_pid if running else None,
        "door_running": running,
        "internal_port": rec.internal_port if rec.front_door is not None else None,
        "door_restarts": rec.door_restarts,
        "door": door.info(rec) if running else None,
    }


def _door_line(data: dict[str, object]) -> str:
    """`front door: 127.0.0.1:8000 (pid 4242; vLLM behind it on 127.0.0.1:39123) serving,
    1 in flight, 310 served, 0 failed`."""
    where = f"front door: {data['front_door']}"
    behind = f"vLLM behind it on 127.0.0.1:{data.get('internal_port')}"
    if not data.get("door_running"):
        return f"{where}: not running ({behind})"
    words = [f"{where} (pid {data.get('door_pid')}; {behind})"]
    report = data.get("door")
    if isinstance(report, dict):
        words.append("holding:" if report.get("holding") else "serving:")
        for key, label in (("in_flight", "in flight"), ("held", "held")):
            words.append(f"{report.get(key, 0)} {label},")
        words.append(f"{report.get('served', 0)} served, {report.get('failed', 0)} failed")
    else:
        words.append("not answering")
    restarts = data.get("door_restarts")
    if restarts:
        words.append(f"(started again {restarts}x after it died)")
    return " ".join(words)


def live_pids(pids: tuple[int, ...] | list[int], tree: dict[str, float]) -> list[int]:
    """The server's processes still alive: its tree remembers every one it saw (start-up
    workers that came and went too), each with its start time to tell a reused pid."""
    import psutil

    live = []
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            born = tree.get(str(pid))
            if born is not None and abs(proc.create_time() - born) > 1.0:
                continue  # the pid was given to another process since
        except psutil.Error:
            continue
        live.append(pid)
    return live
