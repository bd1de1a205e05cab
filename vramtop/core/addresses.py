"""`HOST:PORT`, read one way everywhere: the front door's address (a profile's `front_door`,
`--front-door`, the door's own `--listen`) and the exporter's `--listen`; and a server's URL
(`--url`, the door's `--upstream`), whose host and port follow the same rules.

An IPv6 host is written in brackets, `[::1]:8000`: without them `::1:8000` could be the
address `::1:8000` on no port or `::1` on port 8000, so it is refused rather than guessed.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import SplitResult, urlsplit

HOST_NAME = re.compile(r"[A-Za-z0-9._-]+")  # a name or an IPv4 address


def parse_host_port(
    text: str, *, bare_port_host: str | None = None, lowest_port: int = 1
) -> tuple[str, int]:
    """`text` as (host, port), the brackets of an IPv6 host taken off; a bare `PORT` means
    `bare_port_host` where one is given. ValueError says what is wrong (the caller names
    the option or field)."""
    value = text.strip()
    if bare_port_host is not None and value.isdigit():
        host, port_text = bare_port_host, value
    else:
        host, sep, port_text = value.rpartition(":")
        if not sep or not host:
            raise ValueError(f"{text!r} is not HOST:PORT (for example 127.0.0.1:8000)")
    if not port_text.isdigit():
        raise ValueError(f"{text!r}: the port {port_text!r} is not a number")
    port = int(port_text)
    if not lowest_port <= port <= 65535:
        raise ValueError(f"{text!r}: the port must be {lowest_port}-65535")
    if host.startswith("["):
        inner = host[1:-1] if host.endswith("]") else ""
        try:
            if "%" in inner:  # a zone (fe80::1%eth0): a URL would have to escape it
                raise ValueError(inner)
            ipaddress.IPv6Address(inner)
        except ValueError:
            raise ValueError(f"{text!r}: {host!r} is not an IPv6 address in brackets") from None
        return inner, port
    if ":" in host:
        raise ValueError(f"{text!r}: an IPv6 host is written [ADDRESS]:PORT, e.g. [::1]:8000")
    if not HOST_NAME.fullmatch(host):
        raise ValueError(f"{text!r}: {host!r} is not a host name or address")
    return host, port


def parse_url(text: str, schemes: tuple[str, ...] = ("http", "https")) -> SplitResult:
    """`text` as the URL of a server to reach: a scheme of `schemes`, a host (a name, an IPv4
    address, an IPv6 one in brackets) and, where one is written, a port from 1 to 65535 (port
    0 reaches no server). ValueError says what is wrong without repeating the URL: the
    caller shows it, with any password masked."""
    example = f"give {schemes[0]}://HOST:PORT, e.g. {schemes[0]}://127.0.0.1:8000"
    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError as exc:
        if "port" in str(exc).lower():
            raise ValueError("the port must be a number from 1 to 65535") from None
        raise ValueError(f"{exc} ({example})") from None
    if parts.scheme.lower() not in schemes:
        raise ValueError(example)
    host = parts.hostname
    if not host:
        raise ValueError(f"it names no host ({example})")
    if ":" in host:
        try:
            if "%" in host:  # a zone (fe80::1%eth0)
                raise ValueError(host)
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"[{host}] is not an IPv6 address") from None
    elif not HOST_NAME.fullmatch(host):
        raise ValueError(f"{host!r} is not a host name or address")
    if parts.netloc.endswith(":") or port == 0:
        raise ValueError("the port must be a number from 1 to 65535")
    return parts
