"""A remedy that starts: during a call whose memory grows for a minute, the flags the
diagnosis suggests (a budget, and the --max-model-len that fits in it), taken while the call
still grows, relaunch without vLLM refusing the start and give back the normal decode rate
once the call has peaked (the simulated machine's `long_call` scenario). The world, the
simulated vLLM and the console's sampler and diagnosis run in the test's process on a clock
it moves (tests/support/sim_card.py): rates are tokens per simulated second."""

from __future__ import annotations

import pytest

from tests.support.sim_card import SimCard
from vramtop.core.budget import suggested_relaunch_flags

SPEED = 20.0  # the scheduler steps as the simulator's processes do at 20 times real time
LIMIT_S = 1200.0  # simulated seconds a stage may take (60 real seconds at SPEED)


@pytest.mark.parametrize("moment", ["first offered", "half grown"])
def test_the_suggested_budget_taken_while_a_call_grows_starts_and_recovers(moment: str) -> None:
    sim = SimCard("long_call", speed=SPEED)
    # The call (the scenario's, growing for a minute) starts once the console has seen the
    # normal rate, not at a fixed simulated second.
    sim.set_call(False)
    served = sim.server(0.93)
    with served.watched() as backend:
        served.start_request()  # the agent's long answer
        normal = served.rate()

        def ticked() -> None:
            served.run(1.0)
            backend.tick()

        def learned() -> bool:
            ticked()
            return backend.session.normal_rate() is not None

        served.run_until(learned, LIMIT_S)
        assert backend.session.normal_rate() is not None, "no normal rate was learned"
        sim.set_call(True)
        suggestion: tuple[float, int | None] | None = None

        def suggested() -> bool:
            nonlocal suggestion
            ticked()
            offered = suggested_relaunch_flags(backend.session.findings())
            level = float(sim.state()["call_level"])
            if offered is not None:
                assert level < 1.0, "the finding opened only once the call had peaked"
                if moment == "first offered" or level >= 0.5:
                    suggestion = offered
            return suggestion is not None

        served.run_until(suggested, LIMIT_S)
        assert suggestion is not None, "no budget was suggested while the call grew"
    util, max_model_len = suggestion
    # The profile's 262,144 tokens do not fit below 0.93: the remedy says so.
    assert max_model_len is not None and max_model_len < 262_144
    # The relaunch: the server and its engine exit (their memory freed), and one starts with
    # the suggested flags; vLLM's startup checks pass (`SimCard.server` asserts the engine
    # started).
    served.exit()
    relaunched = sim.server(util, max_model_len=max_model_len)
    relaunched.run_until(lambda: float(sim.state()["call_level"]) >= 1.0, LIMIT_S)
    relaunched.start_request()
    relaunched.run(10.0)
    after = relaunched.rate()
    assert after >= 0.8 * normal, (suggestion, normal, after)
    print(f"\n{moment}: suggested {suggestion}, normal {normal:.1f}, after {after:.1f}")
