"""A remedy that starts: during a call whose memory grows for a minute, the flags the
diagnosis suggests (a budget, and the --max-model-len that fits in it), taken while the call
still grows, relaunch without vLLM refusing the start and give back the normal decode rate
once the call has peaked (real processes, the simulated machine's `long_call` scenario,
simulated time run faster)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sim_load import Agent, rate
from supervised_sim import supervised

from vramtop.core.budget import suggested_relaunch_flags
from vramtop.sim.machine import SimMachine

SPEED = 20.0  # the contention test's pace: `rate` reads simulated seconds at this speed


@pytest.mark.parametrize("moment", ["first offered", "half grown"])
def test_the_suggested_budget_taken_while_a_call_grows_starts_and_recovers(
    tmp_path: Path, moment: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A private home: the server's state file and the normal rate it remembers stay here.
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))
    with SimMachine(tmp_path / "sim", scenario="long_call", speed=SPEED, startup_s=0.2) as machine:
        # The call (the scenario's, growing for a minute) starts once the console has seen the
        # normal rate, not at a fixed simulated second: on a loaded machine the server's
        # processes can take longer to start than the scenario waits.
        machine.set_call(False)
        # Samples stamped in simulated seconds, as the console's are in real ones.
        with supervised(machine, "grow", speed=SPEED, util=0.93) as served:
            backend, url = served.backend, served.profile.url
            agent = Agent(url)
            try:
                normal = rate(url)
                deadline = time.monotonic() + 60
                while backend.normal_rate() is None and time.monotonic() < deadline:
                    backend.tick()
                    time.sleep(1 / SPEED)
                assert backend.normal_rate() is not None, "no normal rate was learned"
                machine.set_call(True)
                suggestion: tuple[float, int | None] | None = None
                deadline = time.monotonic() + 60
                while suggestion is None and time.monotonic() < deadline:
                    backend.tick()
                    offered = suggested_relaunch_flags(backend.findings())
                    level = float(machine.state()["call_level"])
                    if offered is not None:
                        assert level < 1.0, "the finding opened only once the call had peaked"
                        if moment == "first offered" or level >= 0.5:
                            suggestion = offered
                    time.sleep(1 / SPEED)
                assert suggestion is not None, "no budget was suggested while the call grew"
                agent.close()
                util, max_model_len = suggestion
                # The profile's 262,144 tokens do not fit below 0.93: the remedy says so.
                assert max_model_len is not None and max_model_len < 262_144
                result = backend.relaunch(gpu_memory_utilization=util, max_model_len=max_model_len)
                assert result.ok, result.message  # vLLM's startup checks pass
                while float(machine.state()["call_level"]) < 1.0:
                    time.sleep(0.05)
                agent = Agent(url)
                time.sleep(0.5)
                after = rate(url)
                assert after >= 0.8 * normal, (suggestion, normal, after)
            finally:
                agent.close()
