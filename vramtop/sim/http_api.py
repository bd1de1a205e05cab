"""The fake server's HTTP side: vLLM's OpenAI-compatible routes on the stdlib HTTP server."""

from __future__ import annotations

import hmac
import json
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from vramtop.core.json_types import JsonObject, JsonValue
from vramtop.sim import metrics_text
from vramtop.sim.card import VLLM_VERSION
from vramtop.sim.serving import Scheduler, count_tokens
from vramtop.sim.vlog import emit

DEFAULT_MAX_TOKENS = 256


class FakeVllmHttp(ThreadingHTTPServer):
    daemon_threads = True
    # Set by the server before serving.
    sched: Scheduler
    model: str
    served_names: list[str]
    max_model_len: int
    api_keys: frozenset[str]
    cache_info: JsonObject
    access_log: bool
    created: float
    healthy: bool = True


class Handler(BaseHTTPRequestHandler):
    server: FakeVllmHttp
    protocol_version = "HTTP/1.1"
    # Headers and body go out as separate writes; with Nagle's algorithm on, a keep-alive
    # client waits for the delayed ACK (~40 ms) on every response. uvicorn sets TCP_NODELAY too.
    disable_nagle_algorithm = True

    # -- plumbing -----------------------------------------------------------------------------
    def log_message(self, format: str, *args: object) -> None:
        pass

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        if not self.server.access_log:
            return
        host, port = self.client_address[:2]
        phrase = self.responses.get(int(code), ("",))[0] if str(code).isdigit() else ""
        emit(f'INFO:     {host}:{port} - "{self.requestline}" {code} {phrase}')

    def send_json(self, status: int, body: JsonValue) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_text(self, status: int, text: str, ctype: str = "text/plain; charset=utf-8") -> None:
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def authorized(self) -> bool:
        keys = self.server.api_keys
        if not keys or not self.path.startswith("/v1"):
            return True
        given = self.headers.get("Authorization", "")
        if any(hmac.compare_digest(given, f"Bearer {key}") for key in keys):
            return True
        self.send_json(401, {"error": "Unauthorized"})
        return False

    def error(self, status: int, message: str, kind: str) -> None:
        self.send_json(
            status, {"error": {"message": message, "type": kind, "param": None, "code": status}}
        )

    # -- routes -------------------------------------------------------------------------------
    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if not self.authorized():
            return
        if path == "/health":
            self.send_text(200 if self.server.healthy else 503, "")
        elif path == "/version":
            self.send_json(200, {"version": VLLM_VERSION})
        elif path == "/metrics":
            s = self.server
            page = metrics_text.render(s.sched, s.served_names[0], s.cache_info, s.created)
            # The content type vLLM 0.32 sends.
            self.send_text(200, page, "text/plain; version=1.0.0; charset=utf-8")
        elif path == "/v1/models":
            self.send_json(
                200,
                {"object": "list", "data": [self._model_card(n) for n in self.server.served_names]},
            )
        elif path in ("/ping", "/load"):
            self.send_json(200, {})
        else:
            self.send_json(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        if not self.authorized():
            return
        if path not in ("/v1/completions", "/v1/chat/completions"):
            self.send_json(404, {"detail": "Not Found"})
            return
        try:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            if not isinstance(body, dict):
                raise ValueError("body is not an object")
        except ValueError as exc:
            self.error(400, f"invalid JSON body: {exc}", "BadRequestError")
            return
        model = body.get("model")
        if model is not None and model not in self.server.served_names:
            self.error(404, f"The model `{model}` does not exist.", "NotFoundError")
            return
        self._complete(body, chat=path.endswith("chat/completions"))

    def _model_card(self, name: str) -> JsonObject:
        return {
            "id": name,
            "object": "model",
            "created": int(self.server.created),
            "owned_by": "vllm",
            "root": self.server.model,
            "parent": None,
            "max_model_len": self.server.max_model_len,
        }

    # -- generation ---------------------------------------------------------------------------
    def _complete(self, body: dict[str, Any], chat: bool) -> None:
        if chat:
            messages = body.get("messages") or []
            prompt = "".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
        else:
            prompt = str(body.get("prompt", ""))
        prompt_tokens = count_tokens(prompt) + (8 * len(body.get("messages") or []) if chat else 0)
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
        max_tokens = int(max_tokens) if max_tokens else DEFAULT_MAX_TOKENS
        model = body.get("model") or self.server.served_names[0]
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        created = int(time.time())
        sched = self.server.sched
        if body.get("stream"):
            self._stream(body, chat, rid, created, model, prompt_tokens, max_tokens)
            return
        text = "".join(sched.generate(prompt_tokens, max_tokens))
        n = max_tokens
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": n,
            "total_tokens": prompt_tokens + n,
        }
        if chat:
            choice: JsonObject = {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": None,
                "finish_reason": "length",
            }
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": "length"}
        self.send_json(
            200,
            {
                "id": rid,
                "object": "chat.completion" if chat else "text_completion",
                "created": created,
                "model": model,
                "choices": [choice],
                "usage": usage,
            },
        )

    def _stream(
        self,
        body: dict[str, Any],
        chat: bool,
        rid: str,
        created: int,
        model: str,
        prompt_tokens: int,
        max_tokens: int,
    ) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        obj = "chat.completion.chunk" if chat else "text_completion"
        broken = False

        def send(choice: JsonObject, usage: dict[str, int] | None = None) -> None:
            nonlocal broken
            chunk: JsonObject = {
                "id": rid,
                "object": obj,
                "created": created,
                "model": model,
                "choices": [choice] if choice else [],
            }
            if usage is not None:
                chunk["usage"] = usage
            try:
                self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                self.wfile.flush()
            except OSError:
                broken = True  # the client went away; stop generating for it

        def piece(text: str, finish: str | None = None) -> JsonObject:
            if chat:
                return {
                    "index": 0,
                    "delta": {"content": text},
                    "logprobs": None,
                    "finish_reason": finish,
                }
            return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}

        if chat:
            send(
                {
                    "index": 0,
                    "delta": {"role": "assistant", "content": ""},
                    "logprobs": None,
                    "finish_reason": None,
                }
            )
        # Real vLLM puts finish_reason on the last token's chunk, not on an extra empty one.
        pending: str | None = None
        for text in self.server.sched.generate(prompt_tokens, max_tokens, lambda: not broken):
            if pending is not None:
                send(piece(pending))
            pending = text
        if broken:
            return
        send(piece(pending or "", "length"))
        options = body.get("stream_options") or {}
        if isinstance(options, dict) and options.get("include_usage"):
            send(
                {},
                {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": max_tokens,
                    "total_tokens": prompt_tokens + max_tokens,
                },
            )
        try:
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except OSError:
            pass
