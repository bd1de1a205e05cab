"""GETs over one kept-alive connection to a plain `http://` server: the scraper's client for
the usual case, a vLLM server on this machine, read every second.

Hand-written beside httpx because httpx costs what the console's CPU shows: a GET of vLLM's
50 KB /metrics page took 1.30 ms of CPU through httpx.Client, 0.41 through `http.client` and
0.25 through this (`python -m bench.bench_own_code`, "scrape", one run): at 1 Hz httpx adds
a third of a minimal Textual app's whole CPU, `http.client` a twentieth. This sends one
prebuilt request and reads the answer straight off the socket. HTTPS goes through
`http.client`.

It speaks the part of HTTP/1.1 a GET needs: a status line and headers (lines ended by CRLF
or LF), a body by Content-Length, chunked, or up to the end of the connection, and no body
for 1xx, 204 and 304; informational answers before the final one are skipped. Every wait
on the socket gets only the time left before the request's deadline. Failures are raised
as `http.client` raises them, so the scraper tells them apart the same way.
"""

from __future__ import annotations

import http.client
import re
import socket
from dataclasses import dataclass

from vramtop.sources.http_answer import Deadline

# As http.client allows: a header block past this many bytes is not an HTTP answer.
MAX_HEAD_BYTES = 100 * 1024
_RECEIVE_BYTES = 256 * 1024
_HEAD_END = re.compile(rb"\r?\n\r?\n")
_NO_BODY = (204, 304)


@dataclass(frozen=True)
class PlainAnswer:
    status: int
    body: bytes  # empty when `too_large`
    too_large: bool  # the body passed the cap: not read to its end
    will_close: bool  # the connection cannot carry another request


class PlainConnection:
    """One server's connection; `sock` is None until connected (and after `close`)."""

    def __init__(self, host: str, port: int, deadline: Deadline) -> None:
        self.host, self.port = host, port
        self.sock: socket.socket | None = None
        self._deadline = deadline
        self._buffer = bytearray()  # received, not yet read
        self._into = bytearray(_RECEIVE_BYTES)
        self._into_view = memoryview(self._into)
        name = f"[{host}]" if ":" in host else host
        self._host_header = name if port == 80 else f"{name}:{port}"

    def connect(self) -> None:
        """Opens the connection within the time left; raises OSError (TimeoutError)."""
        sock = socket.create_connection((self.host, self.port), timeout=self._deadline.left())
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = sock
        self._buffer.clear()

    def close(self) -> None:
        sock, self.sock = self.sock, None
        self._buffer.clear()
        if sock is not None:
            sock.close()

    def get(self, target: str, headers: dict[str, str], max_body: int) -> PlainAnswer:
        """One GET on the open connection. A connection the server closed while it was idle
        fails before any byte of an answer: `http.client.RemoteDisconnected`, or the
        socket's own BrokenPipeError / ConnectionResetError."""
        lines = [
            f"GET {target} HTTP/1.1",
            f"Host: {self._host_header}",
            "Accept-Encoding: identity",
        ]
        for name, value in headers.items():
            if "\r" in value or "\n" in value:
                raise ValueError(f"Invalid header value {value!r}")
            lines.append(f"{name}: {value}")
        request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        sock = self._sock()
        sock.settimeout(self._deadline.left())
        sock.sendall(request)
        while True:
            status, fields, version = self._head()
            if not (100 <= status < 200):
                break  # 1xx: an interim answer, the final one follows
        return self._body(status, fields, version, max_body)

    # --- reading --------------------------------------------------------------------------

    def _sock(self) -> socket.socket:
        if self.sock is None:
            raise http.client.NotConnected("not connected")
        return self.sock

    def _receive(self) -> bytes | memoryview:
        """The next bytes the server sent (empty: it closed the connection), in a buffer
        kept for the purpose: a fresh one for each receive was dearer than the receive."""
        sock = self._sock()
        sock.settimeout(self._deadline.left())
        count = sock.recv_into(self._into)
        return self._into_view[:count]

    def _head(self) -> tuple[int, dict[str, str], str]:
        """The status, the headers (names in lower case; repeated ones joined by ", ") and
        the HTTP version of the next answer."""
        buffer = self._buffer
        searched = 0
        while (end := _HEAD_END.search(buffer, searched)) is None:
            if len(buffer) > MAX_HEAD_BYTES:
                raise http.client.LineTooLong("header block")
            searched = max(0, len(buffer) - 3)
            data = self._receive()
            if not data:
                if not buffer:
                    raise http.client.RemoteDisconnected(
                        "Remote end closed connection without response"
                    )
                raise http.client.IncompleteRead(bytes(buffer))
            buffer += data
        head = bytes(buffer[: end.start()]).decode("iso-8859-1")
        del buffer[: end.end()]
        status_line, *header_lines = head.replace("\r\n", "\n").split("\n")
        parts = status_line.split(None, 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/"):
            raise http.client.BadStatusLine(status_line)
        version, code = parts[0], parts[1]
        if len(code) != 3 or not code.isdigit():
            raise http.client.BadStatusLine(status_line)
        fields: dict[str, str] = {}
        for line in header_lines:
            name, colon, value = line.partition(":")
            if not colon:
                continue  # not a header: http.client's parser skips it too
            key = name.strip().lower()
            value = value.strip()
            fields[key] = f"{fields[key]}, {value}" if key in fields else value
        return int(code), fields, version

    def _body(
        self, status: int, fields: dict[str, str], version: str, max_body: int
    ) -> PlainAnswer:
        # As http.client decides it.
        connection = fields.get("connection", "").lower()
        if version == "HTTP/1.0":
            will_close = "keep-alive" not in connection and "keep-alive" not in fields
        else:
            will_close = "close" in connection
        if status in _NO_BODY:
            return PlainAnswer(status, b"", False, will_close)
        if "chunked" in fields.get("transfer-encoding", "").lower():
            body = self._chunked(max_body)
        else:
            length = _length(fields.get("content-length"))
            if length is None:
                body = self._until_closed(max_body)
                will_close = True
            elif length > max_body:
                body = None
            else:
                body = self._exactly(length)
        if body is None:
            return PlainAnswer(status, b"", True, True)
        return PlainAnswer(status, body, False, will_close)

    def _exactly(self, length: int) -> bytes:
        buffer = self._buffer
        while len(buffer) < length:
            data = self._receive()
            if not data:
                raise http.client.IncompleteRead(bytes(buffer), length - len(buffer))
            buffer += data
        if len(buffer) == length:
            body = bytes(buffer)
            buffer.clear()
            return body
        with memoryview(buffer) as view:
            body = bytes(view[:length])
        del buffer[:length]
        return body

    def _until_closed(self, max_body: int) -> bytes | None:
        buffer = self._buffer
        while len(buffer) <= max_body:
            data = self._receive()
            if not data:
                body = bytes(buffer)
                buffer.clear()
                return body
            buffer += data
        return None

    def _line(self) -> bytes:
        buffer = self._buffer
        while (end := buffer.find(b"\n")) < 0:
            if len(buffer) > MAX_HEAD_BYTES:
                raise http.client.LineTooLong("chunk size")
            data = self._receive()
            if not data:
                raise http.client.IncompleteRead(bytes(buffer))
            buffer += data
        line = bytes(buffer[:end]).rstrip(b"\r")
        del buffer[: end + 1]
        return line

    def _chunked(self, max_body: int) -> bytes | None:
        parts: list[bytes] = []
        total = 0
        while True:
            size_text = self._line().split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise http.client.IncompleteRead(b"".join(parts)) from None
            if size < 0:
                raise http.client.IncompleteRead(b"".join(parts))
            if size == 0:
                while self._line():  # the trailer, up to its empty line
                    pass
                return b"".join(parts)
            total += size
            if total > max_body:
                return None
            parts.append(self._exactly(size))
            self._line()  # the CRLF after the chunk


def _length(value: str | None) -> int | None:
    """Content-Length as http.client reads it: None when absent or not a number."""
    if value is None:
        return None
    try:
        length = int(value)
    except ValueError:
        return None
    return length if length >= 0 else None
