"""One reading of HOST:PORT for the front door's address, the door's --listen and the
exporter's --listen: they agree on every address, IPv6 above all."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from vramtop.commands.export import parse_listen as export_listen
from vramtop.config import parse_door_address
from vramtop.core.addresses import parse_host_port
from vramtop.frontdoor.protocol import parse_listen as door_listen

READERS: list[Callable[[str], tuple[str, int]]] = [parse_door_address, door_listen, export_listen]


@pytest.mark.parametrize("read", READERS)
@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("[::1]:8000", ("::1", 8000)),
        ("[fe80::1%eth0]:8000", None),  # a zone index is no address vLLM's host takes
        ("::1:8000", None),  # ::1 on 8000, or the address ::1:8000? Refused, not guessed.
        ("[::1]8000", None),
        ("[localhost]:8000", None),
        ("127.0.0.1:8000", ("127.0.0.1", 8000)),
        ("desk.lan:8000", ("desk.lan", 8000)),
        ("a b:8000", None),
        ("127.0.0.1:", None),
        ("127.0.0.1:-1", None),
    ],
)
def test_every_reader_takes_the_same_addresses(
    read: Callable[[str], tuple[str, int]], text: str, parsed: tuple[str, int] | None
) -> None:
    if parsed is None:
        with pytest.raises(ValueError):
            read(text)
    else:
        assert read(text) == parsed


def test_only_the_exporter_takes_a_bare_port_and_port_0() -> None:
    assert export_listen("9464") == ("127.0.0.1", 9464)
    assert export_listen("localhost:0") == ("localhost", 0)
    for read in (parse_door_address, door_listen):
        with pytest.raises(ValueError):
            read("9464")
        with pytest.raises(ValueError):
            read("localhost:0")


def test_the_message_says_how_ipv6_is_written() -> None:
    with pytest.raises(ValueError, match=r"\[ADDRESS\]:PORT"):
        parse_host_port("::1:8000")


def _door_upstream(text: str) -> object:
    from vramtop.frontdoor.protocol import parse_upstream

    return parse_upstream(text)


def _url_flag(text: str) -> object:
    import argparse

    from vramtop.commands.argtypes import server_url

    try:
        return server_url(text)
    except argparse.ArgumentTypeError as exc:
        raise ValueError(str(exc)) from None


@pytest.mark.parametrize("read", [_url_flag, _door_upstream])
@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("http://127.0.0.1:0", "port must be a number from 1 to 65535"),
        ("http://[::1]:0", "port must be a number from 1 to 65535"),
        ("http://127.0.0.1:65536", "port must be a number from 1 to 65535"),
        ("http://127.0.0.1:", "port must be a number from 1 to 65535"),
        ("http://127.0.0.1:http", "port must be a number from 1 to 65535"),
        ("http://127.0.0.1:+80", "port must be a number from 1 to 65535"),
        ("http://:8000", "names no host"),
        ("http://user:pw-secret@", "names no host"),
        ("http://user@:8000", "names no host"),
        ("ftp://127.0.0.1:21", "http://HOST:PORT"),
        ("http://a b:8000", "is not a host name or address"),
        ("http://[fe80::1%25eth0]:8000", "is not an IPv6 address"),
    ],
)
def test_every_url_reader_refuses_the_same_urls(
    read: Callable[[str], object], text: str, says: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(says)) as refused:
        read(text)
    assert "pw-secret" not in str(refused.value) or read is _door_upstream


@pytest.mark.parametrize(
    "text", ["http://127.0.0.1:8000", "http://[::1]:8001", "http://desk.lan:1", "http://h:65535"]
)
def test_a_usable_url_is_taken_by_both(text: str) -> None:
    assert _url_flag(text) == text and _door_upstream(text) == text
