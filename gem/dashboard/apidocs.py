"""The API reference at /docs: the server's OpenAPI schema rendered as one HTML page.

FastAPI's own /docs loads Swagger UI from a CDN, which leaves a blank page on a machine without
internet. This page is built on the server from the same schema (/openapi.json): every route
with its parameters, body and responses, then every schema with its fields. Like the dashboard
it has no script and references nothing off the server.
"""
from __future__ import annotations

from typing import Any

from .html import card, esc, page, table

METHODS = ("get", "post", "put", "patch", "delete")
REF = "#/components/schemas/"


def _anchor(name: str) -> str:
    return "schema-" + name


def type_of(schema: dict[str, Any]) -> str:
    """A schema as a short HTML type: names of components link to their definition."""
    if "$ref" in schema:
        name = schema["$ref"].removeprefix(REF)
        return f'<a href="#{esc(_anchor(name))}"><code>{esc(name)}</code></a>'
    for combined in ("anyOf", "oneOf", "allOf"):
        if combined in schema:
            return " | ".join(type_of(s) for s in schema[combined])
    if "const" in schema:
        return f"<code>{esc(repr(schema['const']))}</code>"
    if "enum" in schema:
        return " | ".join(f"<code>{esc(repr(v))}</code>" for v in schema["enum"])
    kind = schema.get("type")
    if kind == "array":
        return f"list of {type_of(schema.get('items', {}))}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"object of {type_of(schema['additionalProperties'])}"
    return f"<code>{esc(kind or 'any')}</code>"


def _limits(schema: dict[str, Any]) -> str:
    said = [f"{word} {schema[key]}" for key, word in (
        ("minimum", "≥"), ("maximum", "≤"), ("minLength", "length ≥"), ("maxLength", "length ≤"),
        ("minItems", "items ≥"), ("maxItems", "items ≤")) if key in schema]
    if "default" in schema:
        said.append(f"default {schema['default']!r}")
    return esc(", ".join(said))


def _body_schema(content: dict[str, Any]) -> dict[str, Any] | None:
    for media in content.values():
        return media.get("schema")
    return None


def _operation(path: str, method: str, op: dict[str, Any]) -> str:
    parts = [f"<p>{esc(op['description'])}</p>" if op.get("description") else ""]
    params = op.get("parameters") or []
    if params:
        parts.append(table(["parameter", "in", "type", "required", "limits"], [
            [f"<code>{esc(p['name'])}</code>", esc(p.get("in", "")), type_of(p.get("schema", {})),
             "yes" if p.get("required") else "", _limits(p.get("schema", {}))] for p in params]))
    body = op.get("requestBody")
    if body:
        schema = _body_schema(body.get("content", {})) or {}
        parts.append(f"<p>Body (JSON): {type_of(schema)}</p>")
    rows = []
    for code, response in sorted(op.get("responses", {}).items()):
        answered = _body_schema(response.get("content") or {})
        rows.append([f"<code>{esc(code)}</code>", esc(response.get("description", "")),
                     type_of(answered) if answered else ""])
    parts.append(table(["status", "meaning", "body"], rows))
    title = f"{method.upper()} {path}"
    return card(title, "".join(parts), anchor=f"{method}-{path}")


def _schema(name: str, schema: dict[str, Any]) -> str:
    about = f"<p>{esc(schema['description'])}</p>" if schema.get("description") else ""
    props = schema.get("properties")
    if not props:
        return card(name, about + f"<p>{type_of(schema)}</p>", anchor=_anchor(name))
    required = set(schema.get("required", ()))
    rows = [[f"<code>{esc(field)}</code>", type_of(spec), "yes" if field in required else "",
             esc(spec.get("description", "")), _limits(spec)] for field, spec in props.items()]
    return card(name, about + table(["field", "type", "required", "meaning", "limits"], rows),
                anchor=_anchor(name))


def api_docs(spec: dict[str, Any]) -> str:
    info = spec.get("info", {})
    routes = [(path, method, op) for path, item in spec.get("paths", {}).items()
              for method, op in item.items() if method in METHODS]
    index = table(["route", "what"], [
        [f'<a href="#{esc(f"{m}-{p}")}"><code>{esc(m.upper())} {esc(p)}</code></a>',
         esc(op.get("summary", ""))] for p, m, op in routes], cls="routes")
    intro = (f"<p>{esc(info.get('description', ''))}</p><p>Version {esc(info.get('version', ''))}; "
             'the same as JSON: <a href="/openapi.json"><code>/openapi.json</code></a>.</p>')
    schemas = spec.get("components", {}).get("schemas", {})
    body = (card("Routes", intro + index)
            + "".join(_operation(p, m, op) for p, m, op in routes)
            + "".join(_schema(name, schemas[name]) for name in sorted(schemas)))
    return page(f"{info.get('title', 'API')} API", body, active="/docs")


__all__ = ["api_docs", "type_of"]
