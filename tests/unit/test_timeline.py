from hypothesis import given
from hypothesis import strategies as st

from vramtop.core.counter_window import CounterWindow, window_rate
from vramtop.core.model import GpuDevice, GpuReading, Sample, ServerMetrics, ServerReading

GPU = GpuReading(devices=(GpuDevice(0, "gpu", 100, 50, 50),), source="sim")


def sample(t: float, generated: float | None, *, reachable: bool = True) -> Sample:
    metrics = ServerMetrics(generation_tokens_total=generated, prompt_tokens_total=0.0)
    return Sample(t=t, gpu=GPU, server=ServerReading("u", reachable=reachable, metrics=metrics))


def test_rate_of_a_steady_counter() -> None:
    assert window_rate([(0.0, 0.0), (1.0, 80.0), (2.0, 160.0)]) == 80.0


def test_a_reset_counts_the_new_value_as_the_increase() -> None:
    # 80 tok/s, restart at t=2 (counter back to 40 after one second of the new server)
    assert window_rate([(0.0, 0.0), (1.0, 80.0), (2.0, 40.0)]) == 60.0


def test_unknown_values_are_skipped_and_too_few_points_give_none() -> None:
    assert window_rate([(0.0, None), (1.0, 10.0)]) is None
    assert window_rate([(0.0, 5.0), (1.0, None), (2.0, 25.0)]) == 10.0


def test_timeline_fills_rates_from_the_window() -> None:
    timeline = CounterWindow()
    for i in range(10):
        stored = timeline.add(sample(float(i), 77.0 * i))
    assert stored.rates.generation_tps == 77.0


def test_unreachable_server_gives_no_rate_instead_of_a_false_zero() -> None:
    timeline = CounterWindow()
    timeline.add(sample(0.0, 0.0, reachable=False))
    stored = timeline.add(sample(1.0, 100.0, reachable=False))
    assert stored.rates.generation_tps is None


def test_only_the_rate_window_is_kept() -> None:
    timeline = CounterWindow(window_s=5.0)
    for i in range(6 * 3600):  # six hours at 1 Hz
        stored = timeline.add(sample(float(i), 50.0 * i))
    assert len(timeline) <= 7
    assert stored.rates.generation_tps == 50.0 and timeline.latest is stored


@given(st.lists(st.floats(min_value=0, max_value=1e9), min_size=2, max_size=30))
def test_counter_rate_is_never_negative(values: list[float]) -> None:
    rate = window_rate([(float(i), v) for i, v in enumerate(values)])
    assert rate is not None and rate >= 0


def test_readings_less_than_a_second_apart_give_no_rate() -> None:
    assert window_rate([(100.0, 5000.0), (100.06, 5120.0)]) is None
    assert window_rate([(100.0, 5000.0), (101.0, 5080.0)]) == 80.0
