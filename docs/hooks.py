"""MkDocs hooks: the reference pages that gem itself can say are generated from it at build
time, so they cannot go stale.

- reference/cli.md: `<!-- cli-help -->` becomes the `--help` of `gem` and of every command,
  from the argparse parsers the command runs (gem.cli.build_parser);
- reference/http.md: `<!-- openapi -->` becomes the routes and schemas of the OpenAPI schema
  `gem serve` publishes at /openapi.json (built from the same app, no server started);
- reference/policy-language.md and design.md are specs/policy-language.md and
  specs/design.md as they are (tests/test_policy_reference.py runs every example of the
  former), and reference/default-policy.md is policies/default.policy.

Everything is rendered locally: nothing is downloaded at build or at view time.
"""
from __future__ import annotations

import argparse
import contextlib
import os
from pathlib import Path
from typing import Any, Iterator

from mkdocs.structure.files import File, Files

from gem.dashboard.apidocs import body_schema, limits_of, schema_type

ROOT = Path(__file__).resolve().parents[1]
METHODS = ("get", "post", "put", "patch", "delete")


# --------------------------------------------------------------------------- pages from files
def _default_policy() -> str:
    text = (ROOT / "policies" / "default.policy").read_text(encoding="utf-8")
    return ("# The default policy\n\n"
            "`policies/default.policy` is gem's default governance: every rule a memory applies "
            "unless your own policy files override or disable it "
            "([policies](../guides/policies.md)); the language is "
            "[the policy language reference](policy-language.md), whose section 16 explains it "
            "rule by rule. `gem policy explain` shows what triggers what.\n\n"
            f"```policy\n{text}```\n")


GENERATED = {
    "reference/policy-language.md": lambda: (ROOT / "specs" / "policy-language.md").read_text(encoding="utf-8"),
    "design.md": lambda: (ROOT / "specs" / "design.md").read_text(encoding="utf-8"),
    "reference/default-policy.md": _default_policy,
}


def on_files(files: Files, config: Any) -> Files:
    for uri, content in GENERATED.items():
        files.append(File.generated(config, uri, content=content()))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if "<!-- cli-help -->" in markdown:
        markdown = markdown.replace("<!-- cli-help -->", cli_help())
    if "<!-- openapi -->" in markdown:
        markdown = markdown.replace("<!-- openapi -->", http_reference())
    return markdown


# --------------------------------------------------------------------------- the command line
@contextlib.contextmanager
def _plain_terminal() -> Iterator[None]:
    """argparse wraps help to the terminal's width (COLUMNS) and may colour it: fix both, so
    the page is the same wherever it is built."""
    saved = {k: os.environ.get(k) for k in ("COLUMNS", "NO_COLOR")}
    os.environ.update(COLUMNS="100", NO_COLOR="1")
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _commands(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases name one parser twice
                yield from _commands(sub)


def cli_help() -> str:
    from gem.cli import build_parser
    with _plain_terminal():
        parser, _ = build_parser()
        parts = []
        for command in _commands(parser):
            parts.append(f"### `{command.prog}`\n\n```text\n{command.format_help().rstrip()}\n```\n")
    return "\n".join(parts)


# --------------------------------------------------------------------------- the HTTP API
def openapi() -> dict[str, Any]:
    """The schema `gem serve` answers at /openapi.json: the same app, built without opening a
    database (the service opens its memory only when the server starts)."""
    from gem.server.http import build_app
    from gem.server.service import Service, ServeConfig
    app = build_app(Service(ServeConfig(path="unused.db")))
    while not hasattr(app, "openapi"):  # through the ASGI wrappers to the FastAPI app
        app = app.app
    return app.openapi()


def _cell(text: Any) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _type(schema: dict[str, Any]) -> str:
    return schema_type(schema, lambda word: f"`{word}`",
                       lambda name: f"[`{name}`](#schema-{name.lower()})", " or ")


def _limits(schema: dict[str, Any]) -> str:
    return _cell(limits_of(schema, lambda text: f"`{text}`"))


def _table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _operation(path: str, method: str, op: dict[str, Any]) -> str:
    out = [f"### `{method.upper()} {path}` {{ #{method}-{_slug(path)} }}\n"]
    if op.get("description") or op.get("summary"):
        out.append(_cell(op.get("description") or op["summary"]) + "\n")
    if op.get("parameters"):
        out.append(_table(["parameter", "in", "type", "required", "limits"], [
            [f"`{p['name']}`", p.get("in", ""), _type(p.get("schema", {})),
             "yes" if p.get("required") else "", _limits(p.get("schema", {}))]
            for p in op["parameters"]]))
    if op.get("requestBody"):
        out.append(f"Body (JSON): {_type(body_schema(op['requestBody'].get('content', {})) or {})}\n")
    out.append(_table(["status", "meaning", "body"], [
        [f"`{code}`", _cell(r.get("description", "")),
         _type(answered) if (answered := body_schema(r.get("content") or {})) else ""]
        for code, r in sorted(op.get("responses", {}).items())]))
    return "\n".join(out)


def _slug(path: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in path).strip("-") or "root"


def _schema(name: str, schema: dict[str, Any]) -> str:
    out = [f"### {name} {{ #schema-{name.lower()} }}\n"]
    if schema.get("description"):
        out.append(_cell(schema["description"]) + "\n")
    props = schema.get("properties")
    if not props:
        out.append(_type(schema) + "\n")
        return "\n".join(out)
    required = set(schema.get("required", ()))
    out.append(_table(["field", "type", "required", "meaning", "limits"], [
        [f"`{field}`", _type(spec), "yes" if field in required else "",
         _cell(spec.get("description", "")), _limits(spec)] for field, spec in props.items()]))
    return "\n".join(out)


def http_reference() -> str:
    spec = openapi()
    routes = [(path, method, op) for path, item in spec.get("paths", {}).items()
              for method, op in item.items() if method in METHODS]
    index = _table(["route", "what"], [
        [f"[`{m.upper()} {p}`](#{m}-{_slug(p)})", _cell(op.get("summary", ""))]
        for p, m, op in routes])
    schemas = spec.get("components", {}).get("schemas", {})
    return "\n".join([
        f"OpenAPI {spec.get('openapi', '')}, `{spec['info']['title']}` version "
        f"{spec['info']['version']}.\n",
        "## Routes\n", index,
        *(_operation(p, m, op) for p, m, op in routes),
        "## Schemas\n",
        *(_schema(name, schemas[name]) for name in sorted(schemas))])
