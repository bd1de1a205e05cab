"""The simulated machine as one object: the GPU world daemon plus helpers to run servers on it.

SimMachine starts the world daemon (its own session), hands out the argv/env a supervisor uses
to launch the fake vLLM server, toggles calls, runs the agent (an `AgentProcess`), and builds
probes. It does not supervise servers; `stop()` only sweeps up sim processes it can find on its
socket.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, cast

from vramtop import files
from vramtop.sim.agent_process import AgentProcess
from vramtop.sim.card import CARDS, DEFAULT_CARD
from vramtop.sim.world_protocol import (
    ALREADY_SERVED,
    SOCKET_ENV,
    SPEED_ENV,
    STARTUP_ENV,
    WorldClient,
    WorldUnreachable,
)
from vramtop.sim.world_state import WorldState

if TYPE_CHECKING:
    from vramtop.sim.gpu_probe import SimGpuProbe

DEFAULT_MODEL = "qwen3.8-27b-nvfp4"
# The field report's launch flags (loopback instead of 0.0.0.0, as the report advises); the
# --max-model-len is the card's (the report's 262,144 before its fix, where it fits).
FIELD_REPORT_FLAGS: dict[str, str | int] = {
    "host": "127.0.0.1",
    "kv_cache_dtype": "fp8",
    "max_num_seqs": 2,
    "max_num_batched_tokens": 8192,
}


# What the world's sweep ends (when it carries the world's socket): the demo's front door too,
# started with the demo profile's environment.
SIM_MARKS = (
    "vramtop.sim.server",
    "vramtop.sim.engine",
    "vramtop.sim.load",
    "VLLM::EngineCore",
    "vramtop.frontdoor",
)


def world_socket(home: Path) -> Path:
    """Where the world daemon of the machine at `home` listens. Unix socket paths are limited
    to ~107 bytes; a long home falls back to a short private path."""
    path = home / "gpu.sock"
    if len(str(path)) > 100:
        digest = hashlib.sha1(str(home).encode()).hexdigest()[:12]
        path = Path("/tmp") / f"vramtop-sim-{digest}.sock"
    return path


def sweep_sim_processes(socket_path: Path) -> None:
    """End the servers, engines, agents and doors still attached to the world at
    `socket_path` (by their environment)."""
    import psutil

    mine = str(socket_path)
    victims = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            cmd = " ".join(proc.info["cmdline"] or [])
            if not any(mark in cmd for mark in SIM_MARKS):
                continue
            if proc.environ().get(SOCKET_ENV) != mine:
                continue
            victims.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    for proc in victims:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.terminate()
    _, alive = psutil.wait_procs(victims, timeout=2.0)
    for proc in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()


class SimMachine:
    def __init__(
        self,
        home: Path,
        *,
        wsl: bool = False,
        scenario: str = "manual",
        speed: float = 1.0,
        seed: int = 0,
        startup_s: float | None = None,
        card: str = DEFAULT_CARD,
        idle_exit_s: float = 0.0,
    ) -> None:
        self.home = Path(home)
        self.card = CARDS[card]  # KeyError: not a simulated card (callers offer the choices)
        self.wsl = wsl
        self.scenario = scenario
        self.speed = speed
        self.seed = seed
        self.startup_s = startup_s
        # The daemon leaves by itself once unused this long (0: only when told to).
        self.idle_exit_s = idle_exit_s
        self.socket_path = world_socket(self.home)
        self.world_proc: subprocess.Popen[bytes] | None = None
        self.agent = AgentProcess(seed, speed)

    @property
    def client(self) -> WorldClient:
        return WorldClient(self.socket_path)

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self, timeout_s: float = 10.0) -> SimMachine:
        """Start the world daemon and wait until it answers (RuntimeError: it did not)."""
        self.spawn()
        return self.wait_started(timeout_s)

    def spawn(self) -> None:
        """Start the world daemon; `wait_started` waits for it to answer. Apart, so that a
        command can load the rest of what it needs while the daemon starts."""
        files.private_dir(self.home)
        log = os.fdopen(files.open_append(self.home / "gpu.log"), "ab")
        cmd = [
            sys.executable, "-m", "vramtop.sim.world",
            "--socket", str(self.socket_path),
            "--scenario", self.scenario,
            "--speed", str(self.speed),
            "--seed", str(self.seed),
            "--card", self.card.key,
            "--idle-exit", str(self.idle_exit_s),
        ]  # fmt: skip
        self.world_proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()

    def wait_started(self, timeout_s: float = 10.0) -> SimMachine:
        """Until the daemon `spawn` started (or another one serving the same socket) answers.
        RuntimeError when it exited or did not answer within `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            code = self.world_proc.poll() if self.world_proc is not None else None
            if code == ALREADY_SERVED:
                # Another one started at the same moment serves the socket: use that one.
                self.world_proc = None
            elif code is not None:
                text = (self.home / "gpu.log").read_text(errors="replace")[-500:]
                raise RuntimeError(f"the simulated GPU did not start: {text.strip()}")
            with contextlib.suppress(WorldUnreachable):
                self.client.request("ping")
                return self
            time.sleep(0.02)
        self.stop()
        raise RuntimeError("the simulated GPU did not answer in time")

    def stop(self) -> None:
        self.agent.stop()
        sweep_sim_processes(self.socket_path)
        if self.world_proc is not None:
            with contextlib.suppress(WorldUnreachable):
                self.client.request("shutdown")
            try:
                self.world_proc.wait(2.0)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.world_proc.pid, signal.SIGKILL)
                self.world_proc.wait(2.0)
            self.world_proc = None

    def __enter__(self) -> SimMachine:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- the server's command line --------------------------------------------------------------
    def server_argv(
        self, util: float | None = None, port: int | None = None, **flags: Any
    ) -> list[str]:
        """`python -m vramtop.sim.server MODEL --port … --gpu-memory-utilization …` and flags.

        Flag names use underscores (`max_model_len=…`); True adds a bare flag, False/None
        leaves it out. `model=` replaces the default model. `util` defaults to the card's
        (0.93 on the 5090, as in the field report).
        """
        util = self.card.budget if util is None else util
        model = str(flags.pop("model", DEFAULT_MODEL))
        merged = {**FIELD_REPORT_FLAGS, "max_model_len": self.card.max_model_len, **flags}
        argv = [sys.executable, "-m", "vramtop.sim.server", model]
        argv += ["--port", str(port or 8000), "--gpu-memory-utilization", str(util)]
        for name, value in merged.items():
            if value is None or value is False:
                continue
            argv.append("--" + name.replace("_", "-"))
            if value is not True:
                argv.append(str(value))
        return argv

    def server_env(self) -> dict[str, str]:
        """The environment a fake server needs (the current one plus the sim's variables)."""
        env = dict(os.environ)
        env[SOCKET_ENV] = str(self.socket_path)
        env[SPEED_ENV] = str(self.speed)
        if self.startup_s is not None:
            env[STARTUP_ENV] = str(self.startup_s)
        env["PYTHONUNBUFFERED"] = "1"
        return env

    # -- the desktop ----------------------------------------------------------------------------
    def set_call(self, on: bool) -> None:
        self.client.request("call", on=on)

    def call_on(self) -> bool:
        return bool(self.client.request("state")["call_on"])

    def state(self) -> WorldState:
        return cast(WorldState, self.client.request("state"))

    def probe(self) -> SimGpuProbe:
        from vramtop.sim.gpu_probe import SimGpuProbe

        return SimGpuProbe(self.socket_path, wsl=self.wsl)
