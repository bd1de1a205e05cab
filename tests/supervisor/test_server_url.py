"""The URL vramtop probes for a recorded server's host and port."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("0.0.0.0", "http://127.0.0.1:8000"),
        ("::1", "http://[::1]:8000"),
        ("[::1]", "http://[::1]:8000"),
        ("192.168.1.5", "http://192.168.1.5:8000"),
    ],
)
def test_the_health_url_of_an_ipv6_server_parses(host: str, url: str) -> None:
    import httpx

    from vramtop.supervisor.service import server_url

    assert server_url(host, 8000) == url
    assert httpx.URL(url).port == 8000
