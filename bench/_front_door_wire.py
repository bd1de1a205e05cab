"""bench_front_door's raw clients and its timed upstream: asyncio sockets in one event loop,
so the reader adds little of its own. The timed upstream (`python -m bench._front_door_wire
PORT`) writes each SSE chunk with the time it sent it (CLOCK_MONOTONIC, which processes
share), so a chunk's latency is its arrival less its sending."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import sys
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit


@dataclass
class Stream:
    sent: float = 0.0
    events: list[float] = field(default_factory=list)  # arrival time of each text chunk


# A server started with an API key (`--url`) is asked with it, as vLLM reads it.
API_KEY = os.environ.get("VLLM_API_KEY", "")


class NotServed(RuntimeError):
    pass


def _request(host: str, path: str, body: bytes | None, close: bool) -> bytes:
    lines = [f"{'POST' if body is not None else 'GET'} {path} HTTP/1.1", f"Host: {host}"]
    if API_KEY:
        lines.append(f"Authorization: Bearer {API_KEY}")
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b"")


class KeepAlive:
    """One keep-alive connection for small GETs whose answers carry a Content-Length."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def get(self, path: str) -> float:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        started = time.perf_counter()
        self.writer.write(_request(f"{self.host}:{self.port}", path, None, close=False))
        head = await self.reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            raise NotServed(f"{path}: {head.splitlines()[0].decode(errors='replace')}")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        await self.reader.readexactly(length)
        return time.perf_counter() - started

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(OSError):
                await self.writer.wait_closed()


def completion(prompt: str, max_tokens: int, model: str | None) -> bytes:
    return json.dumps(
        {
            **({"model": model} if model else {}),
            "prompt": prompt,
            "max_tokens": max_tokens,
            "temperature": 0,
            "seed": 1234,
            "ignore_eos": True,
            "stream": True,
        }
    ).encode()


async def stream(url: str, body: bytes) -> Stream:
    """One streamed completion; each text chunk timed as its bytes are read."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    reader, writer = await asyncio.open_connection(host, port)
    out = Stream()
    out.sent = time.perf_counter()
    writer.write(_request(f"{host}:{port}", "/v1/completions", body, close=True))
    tail = b""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            raise NotServed(f"{url}: {head.splitlines()[0].decode(errors='replace')}")
        while data := await reader.read(65536):
            now = time.perf_counter()
            data = tail + data
            out.events.extend([now] * data.count(b"data: {"))
            # Six bytes cannot hold a whole `data: {`, so none is counted twice.
            tail = data[-6:]
    finally:
        writer.close()
    return out


def stream_tps(s: Stream) -> float | None:
    if not s.events or s.events[-1] <= s.sent:
        return None
    return len(s.events) / (s.events[-1] - s.sent)


TICK_GAP_S = 0.005
STAMP = re.compile(rb'"t":(\d+)')


async def _serve_ticks(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, asyncio.IncompleteReadError):
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            body = await reader.readexactly(length) if length else b""
            if head.startswith(b"GET /health"):
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                continue
            n = int(json.loads(body or b"{}").get("max_tokens", 16))
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            )
            for i in range(n):
                event = b'data: {"t":%d,"i":%d}\n\n' % (time.monotonic_ns(), i)
                writer.write(b"%x\r\n%s\r\n" % (len(event), event))
                await writer.drain()
                await asyncio.sleep(TICK_GAP_S)
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            break
    writer.close()


async def serve_ticks(port: int) -> None:
    server = await asyncio.start_server(_serve_ticks, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


async def timed_stream(url: str, n: int) -> list[float]:
    """Each chunk's latency, from its sending to its arrival here, in seconds."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    reader, writer = await asyncio.open_connection(host, port)
    body = json.dumps({"max_tokens": n}).encode()
    writer.write(_request(f"{host}:{port}", "/v1/completions", body, close=True))
    out: list[float] = []
    tail = b""
    try:
        await reader.readuntil(b"\r\n\r\n")
        while data := await reader.read(65536):
            now = time.monotonic_ns()
            data = tail + data
            cut = data.rfind(b"}\n\n") + 1
            out += [(now - int(t)) / 1e9 for t in STAMP.findall(data[:cut])]
            tail = data[cut:]
    finally:
        writer.close()
    return out


if __name__ == "__main__":
    asyncio.run(serve_ticks(int(sys.argv[1])))
