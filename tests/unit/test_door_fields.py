"""The door's report as a reading (pure): what it is not is None, a wrong figure not known;
a reading written and read back is itself."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from vramtop.core.door_fields import door_from_json, door_json
from vramtop.core.model import DoorReading

ANSWER = {
    "upstream": "http://127.0.0.1:41000",
    "holding": False,
    "in_flight": 2,
    "held": 0,
    "served": 17,
    "failed": 1,
    "longest_hold_s": 8.25,
    "ttft_p50_s": 0.21,
    "ttft_p95_s": 0.8,
    "e2e_p50_s": 3.1,
    "e2e_p95_s": 5.0,
    "decode_tps_p50": None,
    "pid": 1234,
    "started": 1_700_000_000.0,
    "held_total": 4,
    "abandoned": 0,
}


def test_the_doors_answer_is_read() -> None:
    reading = door_from_json("127.0.0.1:8000", ANSWER)
    assert reading == DoorReading(
        address="127.0.0.1:8000",
        in_flight=2,
        served=17,
        failed=1,
        longest_hold_s=8.25,
        ttft_p50_s=0.21,
        ttft_p95_s=0.8,
        e2e_p50_s=3.1,
        e2e_p95_s=5.0,
    )


def test_json_without_an_in_flight_count_is_no_reading() -> None:
    assert door_from_json("a", {"error": {"message": "not found"}}) is None
    assert door_from_json("a", {**ANSWER, "in_flight": True}) is None
    assert door_from_json("a", {**ANSWER, "in_flight": -1}) is None
    assert door_from_json("a", {**ANSWER, "in_flight": "2"}) is None


def test_a_wrong_figure_is_not_known() -> None:
    bad = {**ANSWER, "ttft_p50_s": float("nan"), "e2e_p50_s": -3, "held": "x", "holding": 1}
    reading = door_from_json("a", bad)
    assert reading is not None
    assert (reading.ttft_p50_s, reading.e2e_p50_s, reading.held, reading.holding) == (
        None,
        None,
        0,
        False,
    )
    assert door_from_json("a", {**ANSWER, "longest_hold_s": 10**400}) is not None


figures = st.none() | st.floats(min_value=0, max_value=1e6, allow_nan=False)
counts = st.integers(min_value=0, max_value=10**9)


@given(
    st.builds(
        DoorReading,
        address=st.text(max_size=30),
        holding=st.booleans(),
        in_flight=counts,
        held=counts,
        served=counts,
        failed=counts,
        longest_hold_s=st.floats(min_value=0, max_value=1e6, allow_nan=False),
        ttft_p50_s=figures,
        ttft_p95_s=figures,
        e2e_p50_s=figures,
        e2e_p95_s=figures,
        decode_tps_p50=figures,
    )
)
def test_a_reading_written_and_read_back_is_itself(reading: DoorReading) -> None:
    assert door_from_json(reading.address, door_json(reading)) == reading
