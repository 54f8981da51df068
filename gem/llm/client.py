"""One model behind an OpenAI-compatible chat-completions endpoint (OpenAI, ollama, vLLM, the
llama.cpp server, LM Studio): a structured answer per prompt, retried, cached, metered.

`POST {base_url}/chat/completions` with `response_format={"type": "json_schema", ...}`; the
answer is `choices[0].message.content`, read as JSON. HTTP is the standard library's urllib:
one JSON POST needs no client library, and `pip install gem` can then use a model as it is.

- 429 and 5xx answers and connection failures are tried again, at most `retries` times, after
  `Retry-After` when the server sends one (capped at `max_wait`) or else `backoff` x 2^n
  seconds; any other HTTP error, or the last failure, is `LLMError`.
- An answer is cached by the hash of the request (model, messages, schema), in memory and, with
  `cache_dir`, on disk (one file per answer, written atomically), so a replay costs nothing. Only
  answers the adapter accepted are kept.
- Each call, or answer from the cache, is reported to gem.usage with its tokens, so the
  transition it happened in records it (log detail `llm`) and `gem stats` adds it up.
"""
from __future__ import annotations

import email.utils
import hashlib
import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections import OrderedDict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, TypeVar

from .. import usage
from ..errors import GemError, InvalidInput

T = TypeVar("T")
PROMPTS = Path(__file__).parent / "prompts"
MEMORY_CACHE = 4096  # answers kept in memory per client (oldest dropped first)


class LLMError(GemError):
    """The model's endpoint could not give an answer (refused the request, or kept failing)."""


def prompt(name: str) -> str:
    """A prompt shipped in gem/llm/prompts/."""
    return (PROMPTS / f"{name}.md").read_text(encoding="utf-8")


def _positive(value: Any, what: str, *, zero: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not (value >= 0 if zero else value > 0):
        raise InvalidInput(f"{what} must be a {'non-negative' if zero else 'positive'} number, "
                           f"got {value!r}")
    return float(value)


class Client:
    def __init__(self, model: str, base_url: str, api_key: str | None = None,
                 timeout: float = 60.0, *, retries: int = 4, backoff: float = 0.5,
                 max_wait: float = 60.0, cache_dir: str | Path | None = None) -> None:
        if not isinstance(model, str) or not model.strip():
            raise InvalidInput(f"model must be a non-empty string, got {model!r}")
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise InvalidInput(f"base_url must be an http(s) URL, got {base_url!r}")
        if api_key is not None and not isinstance(api_key, str):
            raise InvalidInput(f"api_key must be a string or None, got {type(api_key).__name__}")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise InvalidInput(f"retries must be an integer >= 0, got {retries!r}")
        self.model = model.strip()
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.timeout = _positive(timeout, "timeout")
        self.retries = retries
        self.backoff = _positive(backoff, "backoff", zero=True)
        self.max_wait = _positive(max_wait, "max_wait", zero=True)
        self.cache_dir = None if cache_dir is None else Path(cache_dir)
        self._cache: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # never the key
        return f"Client(model={self.model!r}, base_url={self.base_url!r})"

    # ------------------------------------------------------------------ asking
    def ask(self, hook: str, system: str, payload: Any, name: str, schema: dict[str, Any],
            accept: Callable[[Any], T]) -> T:
        """The model's answer to `payload` (sent as JSON after the `system` prompt), as JSON
        matching `schema`, passed through `accept` (which raises InvalidInput for an answer it
        refuses; this names the model). Cached once accepted."""
        body = {
            "model": self.model,
            "messages": [{"role": "system", "content": system},
                         {"role": "user", "content": json.dumps(payload, ensure_ascii=False,
                                                                sort_keys=True, default=str)}],
            "response_format": {"type": "json_schema",
                                "json_schema": {"name": name, "strict": False, "schema": schema}},
            "temperature": 0,
        }
        key = hashlib.sha256(json.dumps([body["model"], body["messages"], body["response_format"]],
                                        sort_keys=True).encode()).hexdigest()
        content = self._cached(key)
        if content is not None:
            usage.record(hook, self.model, cached=True)
            return self._accept(hook, content, accept)
        answer = self._post(body)
        try:
            content = answer["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            content = None
        spent = answer.get("usage") if isinstance(answer, dict) else None
        spent = spent if isinstance(spent, dict) else {}
        usage.record(hook, self.model, prompt_tokens=_count(spent.get("prompt_tokens")),
                     completion_tokens=_count(spent.get("completion_tokens")))
        if not isinstance(content, str):
            refusal = _refusal(answer)
            raise InvalidInput(f"the {hook} model {self.model!r} gave no answer"
                               + (f" (it refused: {refusal})" if refusal else
                                  " in choices[0].message.content"))
        result = self._accept(hook, content, accept)
        self._keep(key, content)
        return result

    def _accept(self, hook: str, content: str, accept: Callable[[Any], T]) -> T:
        try:
            answer = json.loads(content)
        except ValueError:
            raise InvalidInput(f"the {hook} model {self.model!r} answered something that is not "
                               f"JSON: {content[:200]!r}") from None
        try:
            return accept(answer)
        except InvalidInput as exc:
            raise InvalidInput(f"the {hook} model {self.model!r} answered {exc}") from None

    # ------------------------------------------------------------------ HTTP
    def _post(self, body: dict[str, Any]) -> Any:
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        url = f"{self.base_url}/chat/completions"
        problem = ""
        for attempt in range(self.retries + 1):
            wait = min(self.max_wait, self.backoff * 2 ** attempt)
            request = urllib.request.Request(url, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    text = response.read()
                try:
                    return json.loads(text)
                except ValueError:
                    raise InvalidInput(f"the model {self.model!r} at {self.base_url} sent a "
                                       f"response that is not JSON: {text[:200]!r}") from None
            except urllib.error.HTTPError as exc:
                detail = _error_text(exc)
                problem = f"HTTP {exc.code}{': ' + detail if detail else ''}"
                if exc.code != 429 and exc.code < 500:
                    raise LLMError(f"the model {self.model!r} at {self.base_url} refused the "
                                   f"request: {problem}") from None
                after = _retry_after(exc.headers.get("Retry-After"))
                if after is not None:
                    wait = min(self.max_wait, after)
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                problem = str(getattr(exc, "reason", exc))
            if attempt < self.retries:
                time.sleep(wait)
        raise LLMError(f"the model {self.model!r} at {self.base_url} did not answer after "
                       f"{self.retries + 1} attempts: {problem}")

    # ------------------------------------------------------------------ the cache
    def _file(self, key: str) -> Path | None:
        return None if self.cache_dir is None else self.cache_dir / key[:2] / f"{key}.json"

    def _cached(self, key: str) -> str | None:
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        path = self._file(key)
        if path is None or not path.exists():
            return None
        try:
            content = json.loads(path.read_text(encoding="utf-8"))["content"]
        except (OSError, ValueError, KeyError, TypeError):
            return None  # a torn or foreign file: ask again, and overwrite it
        if not isinstance(content, str):
            return None
        self._remember(key, content)
        return content

    def _remember(self, key: str, content: str) -> None:
        with self._lock:
            self._cache[key] = content
            while len(self._cache) > MEMORY_CACHE:
                self._cache.popitem(last=False)

    def _keep(self, key: str, content: str) -> None:
        self._remember(key, content)
        path = self._file(key)
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        partial.write_text(json.dumps({"model": self.model, "content": content}), encoding="utf-8")
        os.replace(partial, path)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _refusal(answer: Any) -> str | None:
    try:
        refusal = answer["choices"][0]["message"].get("refusal")
    except (KeyError, IndexError, TypeError, AttributeError):
        return None
    return refusal if isinstance(refusal, str) else None


def _error_text(exc: urllib.error.HTTPError) -> str:
    try:
        text = exc.read().decode("utf-8", "replace")
    except OSError:
        return ""
    try:
        message = json.loads(text)["error"]
        message = message.get("message", message) if isinstance(message, dict) else message
        return str(message)[:300]
    except (ValueError, KeyError, TypeError):
        return text[:300]


def _retry_after(value: str | None) -> float | None:
    """Retry-After as seconds: a number of seconds, or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())
