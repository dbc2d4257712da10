"""A small OpenAI-compatible chat server on loopback, for tests of the framework adapters (not a feature).

``POST /v1/chat/completions`` (plain JSON or ``stream: true`` server-sent events) answers the last
user message: when it contains one of the questions it was given, it replies with a reasoning trace
ending in ``\\boxed{}``, right or wrong by a fixed rule of the question's text (so rewards differ),
and reports ``usage``. Every reply is recorded (``StubServer.replies``) so a test can replay the same
answers in the environment, and every chat request body (``StubServer.chat_requests``) so a test can read
the sampling it was sent. ``GET /v1/models`` lists the one model.

``POST /v1/completions`` (vLLM's form: ``prompt`` as token ids, ``return_tokens_as_token_ids``) needs a
``tokenizer`` given to :func:`start`: it decodes the prompt, replies the same way, cut at ``max_tokens``
(``finish_reason`` ``"length"``), and returns the reply's tokens as ``token_id:N`` in ``logprobs.tokens``.
Every completions request body is kept in ``StubServer.requests``.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def _kind(question: str) -> str:
    """right / long / wrong / unboxed, fixed by the question's text."""
    return ("right", "long", "wrong", "unboxed")[hashlib.sha256(question.encode()).digest()[0] % 4]


def reply_for(question: str, gold: str) -> str:
    """The stub's reply to ``question`` (gold answer ``gold``)."""
    kind = _kind(question)
    if kind == "right":
        return f"The numbers give {gold}. \\boxed{{{gold}}}"
    if kind == "long":
        return "Let me think step by step. " * 12 + f"So the answer is \\boxed{{{gold}}}"
    if kind == "wrong":
        return f"I estimate \\boxed{{{gold}1}}"
    return "I am not sure how to solve this."


@dataclass
class StubServer:
    """The running server: ``url`` (ending in ``/v1``), ``replies`` (``(question, text, completion_tokens)``
    in the order they were sent)."""

    questions: dict[str, str]  # question text -> gold answer
    model: str = "stub-model"
    replies: list[tuple[str, str, int]] = field(default_factory=list)
    url: str = ""
    tokenizer: object = None
    requests: list[dict] = field(default_factory=list)
    chat_requests: list[dict] = field(default_factory=list)

    def complete(self, body: dict) -> dict:
        """A ``/completions`` response to ``body`` (prompt as token ids)."""
        self.requests.append(body)
        prompt = self.tokenizer.decode(body.get("prompt") or [])
        question = next((q for q in self.questions if q in prompt), None)
        text = reply_for(question, self.questions[question]) if question else "\\boxed{0}"
        ids = list(self.tokenizer.encode(text, add_special_tokens=False))
        cap = int(body.get("max_tokens") or len(ids))
        finish = "stop" if len(ids) <= cap else "length"
        ids = ids[:cap]
        self.replies.append((question or "", text, len(ids)))
        choice = {
            "index": 0,
            "text": self.tokenizer.decode(ids),
            "finish_reason": finish,
            "logprobs": {"tokens": [f"token_id:{i}" for i in ids]},
        }
        return {
            "id": f"cmpl-{len(self.requests)}",
            "object": "text_completion",
            "model": body.get("model"),
            "choices": [choice],
            "usage": {"completion_tokens": len(ids)},
        }

    def answer(self, messages: list[dict]) -> tuple[str, int]:
        user = next((m for m in reversed(messages) if m.get("role") == "user"), {})
        content = user.get("content") or ""
        if isinstance(content, list):  # content parts
            content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
        question = next((q for q in self.questions if q in content), None)
        text = reply_for(question, self.questions[question]) if question else "\\boxed{0}"
        tokens = len(text.split())  # what it "generated": a word count, below any real tokenizer's count
        self.replies.append((question or "", text, tokens))
        return text, tokens


def _handler(stub: StubServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def _json(self, code: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path.rstrip("/").endswith("/models"):
                models = [{"id": stub.model, "object": "model", "owned_by": "stub"}]
                self._json(200, {"object": "list", "data": models})
            else:
                self._json(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self):
            if self.path.rstrip("/").endswith("/v1/completions") and stub.tokenizer is not None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                self._json(200, stub.complete(body))
                return
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._json(404, {"error": {"message": f"no route {self.path}"}})
                return
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            stub.chat_requests.append(body)
            text, tokens = stub.answer(body.get("messages") or [])
            prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in body.get("messages") or [])
            usage = {"prompt_tokens": prompt_tokens, "completion_tokens": tokens}
            usage["total_tokens"] = prompt_tokens + tokens
            base = {"id": f"chatcmpl-{len(stub.replies)}", "created": int(time.time()), "model": body.get("model")}
            if not body.get("stream"):
                self._json(
                    200,
                    base
                    | {
                        "object": "chat.completion",
                        "choices": [
                            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                        ],
                        "usage": usage,
                    },
                )
                return
            chunk = base | {"object": "chat.completion.chunk"}
            events = [
                chunk | {"choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]},
                chunk | {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                chunk | {"choices": [], "usage": usage},
            ]
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            for event in events:
                self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

    return Handler


def start(questions: dict[str, str], tokenizer: object = None) -> tuple[StubServer, ThreadingHTTPServer]:
    """Start the stub on a free loopback port (a daemon thread); ``server.shutdown()`` stops it. With a
    ``tokenizer`` (``encode``/``decode``) it also serves ``/v1/completions``."""
    stub = StubServer(questions, tokenizer=tokenizer)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(stub))
    server.daemon_threads = True
    stub.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return stub, server
