"""Recording and reading sessions, and `vramtop diagnose` on them."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest

from tests.support.synthetic import Card, build, field_report
from vramtop.commands import diagnose
from vramtop.core.diagnosis.diagnoser import Diagnoser
from vramtop.core.findings import SERVER_CRASHED, STARTUP_OUT_OF_MEMORY, VRAM_CONTENTION
from vramtop.core.model import Sample
from vramtop.core.server_events import Event
from vramtop.machines.interface import Frame
from vramtop.session.playback import ReplaySource
from vramtop.session.session_reader import SessionError, SessionReader, read_session
from vramtop.session.writer import SessionWriter, make_header, sample_line

FIXTURES = Path(__file__).parent.parent / "fixtures" / "sessions"


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VRAMTOP_HOME", str(tmp_path / "home"))


def record(path: Path, card: Card) -> list[Sample | tuple]:
    records = list(build(card, field_report(call_at=60, restart_at=200)))
    first = next(r for r in records if isinstance(r, Sample))
    header = make_header(
        started_at="2026-11-29T14:02:11Z",
        gpus=first.gpu.devices,
        info=first.info,
        wsl=card.wsl,
    )
    with SessionWriter(path, header) as w:
        for r in records:
            if isinstance(r, Sample):
                w.sample(r)
            else:
                w.event(*r)
    return records


@pytest.mark.parametrize("wsl", [True, False], ids=["wsl2", "native"])
def test_round_trip_diagnoses_the_same(tmp_path: Path, wsl: bool) -> None:
    path = tmp_path / "s.jsonl"
    records = record(path, Card(wsl=wsl))
    live = Diagnoser()
    for r in records:
        live.feed_event(*r) if isinstance(r, tuple) else live.feed_sample(r)
    replayed = diagnose.diagnose_file(path)
    assert [f.to_json() for f in replayed] == [f.to_json() for f in live.all_findings()]
    assert [f.kind for f in replayed] == [VRAM_CONTENTION]
    assert replayed[0].remedy.budget <= 0.88


def test_sample_line_has_the_contract_fields(tmp_path: Path) -> None:
    sample = next(r for r in build(Card(), field_report()) if isinstance(r, Sample))
    line = sample_line(sample)
    gpu = line["gpus"][0]
    for key in (
        "index",
        "used_bytes",
        "total_bytes",
        "server_bytes",
        "processes",
        "temperature_c",
        "sm_clock_mhz",
        "throttle",
    ):
        assert key in gpu
    assert gpu["processes"] is None  # WSL2: not available, never an empty list
    server = line["server"]
    for key in (
        "state",
        "healthy",
        "pid",
        "generation_tokens_total",
        "prompt_tokens_total",
        "requests_running",
        "requests_waiting",
        "preemptions_total",
        "kv_cache_usage",
        "kv_cache_tokens",
        "gpu_memory_utilization",
    ):
        assert key in server
    assert server["state"] == "running" and isinstance(server["requests_running"], int)


def test_reader_rebuilds_samples_with_rates_and_events(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    record(path, Card(wsl=False))
    header, records = read_session(path)
    assert header.wsl is False and header.gpus[0]["total_bytes"] == Card().total_bytes
    samples = [r for r in records if isinstance(r, Sample)]
    events = [r for r in records if isinstance(r, Event)]
    assert [e.name for e in events] == ["start", "ready", "restart", "ready"]
    assert samples[10].gpu.devices[0].processes is not None
    assert samples[10].split is not None and samples[10].split.desktop_bytes is not None
    assert samples[10].rates.generation_tps == pytest.approx(77.0, abs=3)


def test_secrets_are_masked(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    header = {"started_at": "x", "server": {"argv": ["vllm", "serve", "m", "--api-key", "sk-1"]}}
    with SessionWriter(path, header) as w:
        w.event(1.0, "relaunch", {"argv": ["vllm", "serve", "m", "--api-key=sk-2"]})
    text = path.read_text()
    assert "sk-1" not in text and "sk-2" not in text
    assert SessionReader(path).header.server is not None


def test_every_line_is_complete_while_recording(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    samples = [r for r in build(Card(), field_report()) if isinstance(r, Sample)][:5]
    w = SessionWriter(path, {"started_at": "x"})
    for i, s in enumerate(samples):
        w.sample(s)
        # Read while the writer is still open, as after a crash: all lines parse.
        lines = path.read_text().splitlines()
        assert len(lines) == i + 2 and all(json.loads(line) for line in lines)
    w.close()


def test_truncated_last_line_and_unknown_fields_are_tolerated(tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl"
    text = (FIXTURES / "engine_crash.jsonl").read_text()
    path.write_text(text + '{"t": 4.0, "gpus": [{"index": 0, "used_by')
    reader = SessionReader(path)
    records = list(reader)
    assert reader.skipped_lines == 1
    assert sum(isinstance(r, Sample) for r in records) == 3


def test_a_sample_without_gpus_reads_as_a_gpu_reading_with_a_reason(tmp_path: Path) -> None:
    path = tmp_path / "no-gpu.jsonl"
    lines = (FIXTURES / "engine_crash.jsonl").read_text().splitlines()
    sample = json.loads(lines[1])
    assert sample["gpus"]  # (the fixture's first sample has one: it is taken away here)
    path.write_text("\n".join([lines[0], json.dumps({**sample, "gpus": []})]) + "\n")
    (record,) = (r for r in SessionReader(path) if isinstance(r, Sample))
    assert not record.gpu.available and record.gpu.source == "recording"
    assert record.gpu.error == "the recording has no GPU reading at this point"
    # A sample that has its GPU keeps no error.
    first = next(r for r in SessionReader(FIXTURES / "engine_crash.jsonl") if isinstance(r, Sample))
    assert first.gpu.available and first.gpu.error is None


@pytest.mark.parametrize(
    "content, says",
    [
        (None, "no such file"),
        ("", "empty"),
        ("hello\n", "not JSON"),
        ('{"format": "other"}\n', "not a vramtop session"),
        ('{"format": "vramtop-session", "version": 99}\n', "newer"),
        # Only a larger whole number is a newer format: any other version is damage.
        (
            '{"format": "vramtop-session", "version": "1"}\n',
            'damaged: its version must be a whole number from 1, got "1"',
        ),
        ('{"format": "vramtop-session", "version": 1.0}\n', "whole number from 1, got 1.0"),
        ('{"format": "vramtop-session", "version": 1.5}\n', "whole number from 1, got 1.5"),
        ('{"format": "vramtop-session", "version": true}\n', "whole number from 1, got true"),
        ('{"format": "vramtop-session", "version": -1}\n', "whole number from 1, got -1"),
        ('{"format": "vramtop-session", "version": 0}\n', "whole number from 1, got 0"),
        ('{"format": "vramtop-session", "version": null}\n', "whole number from 1, got null"),
        ('{"format": "vramtop-session", "version": [2]}\n', "whole number from 1, got [2]"),
        ('{"format": "vramtop-session"}\n', "damaged: it has no format version"),
    ],
)
def test_unreadable_files_give_a_clear_error(
    tmp_path: Path, content: str | None, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.jsonl"
    if content is not None:
        path.write_text(content)
    with pytest.raises(SessionError, match=re.escape(says)):
        SessionReader(path)
    code = diagnose.run(argparse.Namespace(file=path, json=True))
    err = capsys.readouterr().err
    assert code == 2 and says in err and "Traceback" not in err


def test_diagnose_json_on_hand_written_files(capsys: pytest.CaptureFixture[str]) -> None:
    expected = {
        "field_report_wsl.jsonl": [VRAM_CONTENTION],
        "startup_oom.jsonl": [STARTUP_OUT_OF_MEMORY],
        "engine_crash.jsonl": [SERVER_CRASHED],
        "planned_restart.jsonl": [],
    }
    for name, kinds in expected.items():
        assert diagnose.run(argparse.Namespace(file=FIXTURES / name, json=True)) == 0
        out = json.loads(capsys.readouterr().out)
        assert [f["kind"] for f in out["findings"]] == kinds, name
        for f in out["findings"]:
            assert {"kind", "severity", "first_seen_t", "summary", "evidence", "remedy"} <= set(f)
            assert "action" in f["remedy"]
    out = json.loads(
        (
            diagnose.run(argparse.Namespace(file=FIXTURES / "field_report_wsl.jsonl", json=True)),
            capsys.readouterr().out,
        )[1]
    )
    f = out["findings"][0]
    assert 21 <= f["first_seen_t"] <= 30 and f["remedy"]["gpu_memory_utilization"] <= 0.88
    assert f["evidence"]["kv_cache_usage"] == 0.017


def test_diagnose_text_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert diagnose.run(argparse.Namespace(file=FIXTURES / "startup_oom.jsonl")) == 0
    out = capsys.readouterr().out
    assert "startup_out_of_memory" in out and "--gpu-memory-utilization 0.93" in out


def test_replay_paces_by_speed(tmp_path: Path) -> None:
    slept: list[float] = []
    source = ReplaySource(FIXTURES / "planned_restart.jsonl", speed=10.0, sleep=slept.append)
    records = list(source)
    assert isinstance(records[0], Sample) and isinstance(records[1], Event)
    # 1 s to 52 s of recording at 10× speed: about 5.1 s of waiting in all.
    assert sum(slept) == pytest.approx(5.1)
    assert all(s >= 0 for s in slept)


def test_replay_gives_findings_as_it_goes() -> None:
    source = ReplaySource(FIXTURES / "field_report_wsl.jsonl", speed=0)
    opened = []
    for _record in source:
        opened += [c.finding.kind for c in source.diagnoser.take_changes()]
    assert opened == [VRAM_CONTENTION]


def test_replay_advance_returns_what_is_due_without_sleeping() -> None:
    source = ReplaySource(FIXTURES / "planned_restart.jsonl", speed=10.0)
    assert [r.t for r in source.advance(0.0)] == [1.0]
    assert [r.t for r in source.advance(0.4)] == [2.0, 3.0, 3.5, 4.0, 5.0]
    rest = source.advance(100.0)
    assert rest[-1].t == 52.0 and source.finished


def test_record_loop_writes_samples_lifecycle_and_findings(tmp_path: Path) -> None:
    from vramtop.commands.record import record_loop

    samples = [
        r for r in build(Card(), field_report(call_at=40, restart_at=90)) if isinstance(r, Sample)
    ]

    class FakeBackend:
        def __init__(self) -> None:
            self.i = 0

        def tick(self, log_limit: int = 0) -> Frame:
            sample = samples[min(self.i, len(samples) - 1)]
            self.i += 1
            return Frame(sample)

    clock = [0.0]
    path = tmp_path / "rec.jsonl"
    with SessionWriter(path, {"started_at": "x"}) as w:
        record_loop(
            FakeBackend(),
            w,
            duration_s=len(samples) - 1,
            clock=lambda: clock[0],
            sleep=lambda s: clock.__setitem__(0, clock[0] + 1.0),
        )
    _, records = read_session(path)
    names = [r.name for r in records if isinstance(r, Event)]
    # The restart shows as a start (state starting) and a ready; the finding opens and closes.
    assert names.count("finding") == 2 and "start" in names and "ready" in names
    assert sum(isinstance(r, Sample) for r in records) == len(samples)
    assert [f.kind for f in diagnose.diagnose_file(path)] == [VRAM_CONTENTION]
