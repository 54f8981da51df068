"""API keys: who may call `gem serve`, and which scope each caller sees.

`gem serve PATH --keys FILE` reads a JSON object that maps each key to a scope:

    {"k-7f3a...": "acme", "k-91bc...": "globex", "k-00aa...": "*"}

A key opens the whole API (/v1, /mcp, the dashboard) confined to its scope: every call runs
on `memory.scope(name)`, so a topic of another scope is "not found" (404), exactly as a topic
that does not exist. `"*"` is an operator key: the default scope, and the dashboard may
switch between scopes. A request without a valid key gets 401; only /v1/health answers
without one (it says whether the server is up, nothing about the memory).

Keys travel as `Authorization: Bearer KEY`; the dashboard also takes HTTP Basic auth with the
key as the password, so a browser asks for it. Without --keys the server needs no key (and
listens on 127.0.0.1 by default).
"""
from __future__ import annotations

import base64
import contextvars
import hmac
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InvalidInput
from ..memory import SCOPE_NAME

ALL_SCOPES = "*"
MIN_KEY_LENGTH = 16
OPEN_PATHS = ("/v1/health",)

# The scope of the request being served (None: no keys, the whole memory's default view).
# Set per request by `KeyAuth`; the MCP tools read it from their request instead, since the
# SDK runs them outside the request's context.
request_scope: contextvars.ContextVar[str | None] = contextvars.ContextVar("gem_request_scope",
                                                                          default=None)


@dataclass(frozen=True)
class Keys:
    by_key: dict[str, str]

    @classmethod
    def read(cls, path: str | Path) -> "Keys":
        """Read and check a keys file; errors name the entry, never print a key."""
        where = str(path)
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InvalidInput(f"{where}: no keys file there") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InvalidInput(f"{where}: not a JSON keys file ({exc})") from None
        if not isinstance(data, dict) or not data:
            raise InvalidInput(f'{where}: a keys file is a JSON object {{"KEY": "scope", ...}} '
                               "with at least one key")
        for n, (key, scope) in enumerate(data.items(), 1):
            if len(key) < MIN_KEY_LENGTH or not key.isprintable() or any(c.isspace() for c in key):
                raise InvalidInput(f"{where}: key #{n} must be at least {MIN_KEY_LENGTH} printable "
                                   "characters without spaces (e.g. `python -c 'import secrets; "
                                   "print(secrets.token_urlsafe(24))'`)")
            if not isinstance(scope, str) or not (scope == ALL_SCOPES or SCOPE_NAME.fullmatch(scope)):
                raise InvalidInput(f"{where}: key #{n} maps to {scope!r}, which is neither a scope "
                                   f"name (a-z, 0-9, '_', '.', '-') nor {ALL_SCOPES!r}")
        return cls(dict(data))

    def scope_of(self, key: str) -> str | None:
        """The scope of `key`, compared in constant time against every key."""
        found = None
        for known, scope in self.by_key.items():
            if hmac.compare_digest(known.encode(), key.encode()):
                found = scope
        return found


def presented_key(headers: dict[bytes, bytes]) -> str | None:
    """The key in an Authorization header: `Bearer KEY`, or Basic with KEY as the password."""
    value = headers.get(b"authorization", b"").decode("latin-1").strip()
    kind, _, credential = value.partition(" ")
    if kind.lower() == "bearer":
        return credential.strip() or None
    if kind.lower() == "basic":
        try:
            decoded = base64.b64decode(credential.strip(), validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            return None
        return decoded.partition(":")[2] or None
    return None


def scope_of_request(request: Any) -> str | None:
    """The scope `KeyAuth` gave a Starlette request (None: the server has no keys)."""
    state = request.scope.get("state") or {}
    return state.get("gem_scope")


class KeyAuth:
    """ASGI middleware: every request but OPEN_PATHS needs a key; its scope goes into the
    request's state (`scope_of_request`) and `request_scope` for the handlers below."""

    def __init__(self, app: Any, keys: Keys) -> None:
        self.app = app
        self.keys = keys

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            return await self.app(scope, receive, send)
        key = presented_key(dict(scope.get("headers") or []))
        granted = self.keys.scope_of(key) if key else None
        if granted is None:
            return await self._refuse(scope, receive, send, "a valid API key" if key is None
                                      else "a valid API key (this one is not known)")
        scope.setdefault("state", {})["gem_scope"] = granted
        token = request_scope.set(granted)
        try:
            await self.app(scope, receive, send)
        finally:
            request_scope.reset(token)

    async def _refuse(self, scope: dict, receive: Any, send: Any, what: str) -> None:
        page = not scope["path"].startswith(("/v1", "/mcp"))
        challenge = 'Basic realm="gem", charset="UTF-8"' if page else 'Bearer realm="gem"'
        body = json.dumps({"error": "unauthorized", "message": f"this server needs {what}: "
                           "send `Authorization: Bearer KEY`"}).encode()
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"),
                                (b"www-authenticate", challenge.encode()),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


__all__ = ["Keys", "KeyAuth", "ALL_SCOPES", "presented_key", "scope_of_request", "request_scope"]
