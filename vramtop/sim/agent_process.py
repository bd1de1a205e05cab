"""The simulated coding agent (`python -m vramtop.sim.load`) as a process of its own, started
beside a simulated machine and stopped with it."""

from __future__ import annotations

import os
import subprocess
import sys

from vramtop.sim.world_protocol import LOAD_API_KEY_ENV


class AgentProcess:
    """At most one agent at a time; `seed` and `speed` are its machine's (its pauses and
    phases run in the machine's simulated time)."""

    def __init__(self, seed: int = 0, speed: float = 1.0) -> None:
        self.seed = seed
        self.speed = speed
        self.process: subprocess.Popen[bytes] | None = None

    def start(
        self,
        url: str,
        env: dict[str, str],
        concurrency: int = 1,
        api_key: str | None = None,
        agent: bool = False,
    ) -> None:
        """Start it (stopping one already running) on the server at `url`. `env` carries
        its world's socket (`SimMachine.server_env`), so that the machine's `stop` sweeps it
        up with the servers; it stops by itself once the process that started it has gone."""
        self.stop()
        env = dict(env)
        if api_key:
            env[LOAD_API_KEY_ENV] = api_key  # not on the command line, where `ps` shows it
        cmd = [
            sys.executable, "-m", "vramtop.sim.load",
            "--url", url,
            "--concurrency", str(concurrency),
            "--seed", str(self.seed),
            "--pause", str(0.3 / self.speed), str(2.0 / self.speed),
            "--parent", str(os.getpid()),
        ]  # fmt: skip
        if agent:
            cmd += ["--agent", "--phase", str(20.0 / self.speed), str(60.0 / self.speed)]
        self.process = subprocess.Popen(
            cmd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # the terminal's Ctrl-C is the console's to handle
        )

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(3.0)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(2.0)
