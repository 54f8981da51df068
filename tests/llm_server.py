"""A real HTTP server speaking the chat-completions protocol, answering from recorded fixtures.

`POST /v1/chat/completions` is answered from tests/fixtures/llm/<key>.json, where the key is
the SHA-256 of the request's model and non-system messages (the system prompts are gem's
files: editing one should not orphan every recording). A fixture holds the request's
messages (to be read), and `answer` (sent as JSON in choices[0].message.content) or `content`
(sent verbatim: a malformed answer), and `usage`. An unknown request gets 400 and is kept in
`unknown`; the fixture's teardown fails on it, naming the file to record. With
GEM_LLM_RECORD=1 the file is written with `"answer": null`, to be filled in by hand.

`fail_next(status, retry_after)` makes the next requests fail with that status first.
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures" / "llm"


def request_key(body: dict[str, Any]) -> str:
    said = [m for m in body.get("messages", []) if m.get("role") != "system"]
    return hashlib.sha256(json.dumps([body.get("model"), said], sort_keys=True,
                                     ensure_ascii=False).encode()).hexdigest()[:24]


class FixtureServer:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []   # every request, in order (bodies)
        self.unknown: list[str] = []
        self.authorizations: list[str | None] = []
        self.failures: list[tuple[int, str | None]] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                status, headers, answer = server.answer(self.path, body,
                                                        self.headers.get("Authorization"))
                data = json.dumps(answer).encode()
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def fail_next(self, status: int, retry_after: str | None = None, times: int = 1) -> None:
        with self.lock:
            self.failures += [(status, retry_after)] * times

    def count(self, role: str | None = None) -> int:
        """Requests that reached the server (for one hook: by its system prompt's file)."""
        with self.lock:
            return len(self.requests) if role is None else \
                sum(1 for r in self.requests if r["response_format"]["json_schema"]["name"] == role)

    def answer(self, path: str, body: dict[str, Any],
               authorization: str | None) -> tuple[int, dict[str, str], Any]:
        with self.lock:
            self.requests.append(body)
            self.authorizations.append(authorization)
            if self.failures:
                status, after = self.failures.pop(0)
                return status, ({"Retry-After": after} if after is not None else {}), \
                    {"error": {"message": "scripted failure"}}
        if path != "/v1/chat/completions":
            return 404, {}, {"error": {"message": f"no route {path}"}}
        if body.get("response_format", {}).get("type") != "json_schema":
            return 400, {}, {"error": {"message": "response_format json_schema expected"}}
        key = request_key(body)
        file = FIXTURES / f"{key}.json"
        if not file.exists():
            with self.lock:
                self.unknown.append(key)
            if os.environ.get("GEM_LLM_RECORD"):
                FIXTURES.mkdir(parents=True, exist_ok=True)
                said = [m for m in body["messages"] if m["role"] != "system"]
                file.write_text(json.dumps({"model": body["model"], "messages": said,
                                            "answer": None}, indent=1, ensure_ascii=False) + "\n")
            return 400, {}, {"error": {"message": f"no fixture {file.name} for this request"}}
        fixture = json.loads(file.read_text())
        content = fixture["content"] if "content" in fixture else json.dumps(fixture["answer"])
        return 200, {}, {
            "id": f"chatcmpl-{key}", "object": "chat.completion", "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}],
            "usage": fixture.get("usage", {"prompt_tokens": 0, "completion_tokens": 0}),
        }

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()
