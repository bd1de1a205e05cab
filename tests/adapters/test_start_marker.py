"""vramtop's start line in a server's log is one line, whatever the command's arguments hold:
what follows it is the server's own output, which vramtop reads back (readiness, errors) after
re-attaching to a server it started."""

from __future__ import annotations

from pathlib import Path

from vramtop.supervisor import launch


def test_an_argument_of_several_lines_stays_on_the_start_line(tmp_path: Path) -> None:
    log = tmp_path / "server-p.log"
    template = "{{ messages }}\nINFO:     Application startup complete.\n=== vramtop: start p: x\n"
    argv = ["vllm", "serve", "m", "--chat-template", template]
    written = launch.write_start_marker(log, "p", argv)
    with open(log, "a") as out:
        out.write("INFO:     Started server process\n")
    assert launch.last_start_offset(log, "p") == written
    with open(log, "rb") as read:
        read.seek(written)
        assert read.read() == b"INFO:     Started server process\n"
    (start_line,) = log.read_text().splitlines()[:1]
    assert start_line.startswith("=== vramtop: start p: vllm serve m --chat-template $'{{")
