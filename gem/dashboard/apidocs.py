"""The API reference at /docs: the server's OpenAPI schema rendered as one HTML page.

FastAPI's own /docs loads Swagger UI from a CDN, which leaves a blank page on a machine without
internet. This page is built on the server from the same schema (/openapi.json): every route
with its parameters, body and responses, then every schema with its fields. Like the dashboard
it has no script and references nothing off the server.
"""
from __future__ import annotations

from typing import Any, Callable

from .html import card, esc, page, table

METHODS = ("get", "post", "put", "patch", "delete")
REF = "#/components/schemas/"


def _anchor(name: str) -> str:
    return "schema-" + name


def schema_type(schema: dict[str, Any], code: Callable[[str], str], link: Callable[[str], str],
                alternatives: str) -> str:
    """A schema as a short type, in the markup the callers give: `code` for literal words,
    `link` for a component's name, `alternatives` between the choices of anyOf/oneOf/allOf or
    an enum. The served /docs (HTML) and the docs site's HTTP reference (Markdown) share it."""
    def of(s: dict[str, Any]) -> str:
        if "$ref" in s:
            return link(s["$ref"].removeprefix(REF))
        for combined in ("anyOf", "oneOf", "allOf"):
            if combined in s:
                return alternatives.join(of(c) for c in s[combined])
        if "const" in s:
            return code(repr(s["const"]))
        if "enum" in s:
            return alternatives.join(code(repr(v)) for v in s["enum"])
        kind = s.get("type")
        if kind == "array":
            return f"list of {of(s.get('items', {}))}"
        if kind == "object" and isinstance(s.get("additionalProperties"), dict):
            return f"object of {of(s['additionalProperties'])}"
        return code(kind or "any")
    return of(schema)


def type_of(schema: dict[str, Any]) -> str:
    """A schema as a short HTML type: names of components link to their definition."""
    return schema_type(schema, lambda w: f"<code>{esc(w)}</code>",
                       lambda n: f'<a href="#{esc(_anchor(n))}"><code>{esc(n)}</code></a>', " | ")


def limits_of(schema: dict[str, Any], default: Callable[[str], str]) -> str:
    """A schema's bounds and default in words (`default` marks up the default's repr)."""
    said = [f"{word} {schema[key]}" for key, word in (
        ("minimum", "≥"), ("maximum", "≤"), ("minLength", "length ≥"), ("maxLength", "length ≤"),
        ("minItems", "items ≥"), ("maxItems", "items ≤")) if key in schema]
    if "default" in schema:
        said.append(f"default {default(repr(schema['default']))}")
    return ", ".join(said)


def _limits(schema: dict[str, Any]) -> str:
    return esc(limits_of(schema, lambda text: text))


def body_schema(content: dict[str, Any]) -> dict[str, Any] | None:
    """The schema of a request or response body (its one media type's)."""
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
        schema = body_schema(body.get("content", {})) or {}
        parts.append(f"<p>Body (JSON): {type_of(schema)}</p>")
    rows = []
    for code, response in sorted(op.get("responses", {}).items()):
        answered = body_schema(response.get("content") or {})
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


__all__ = ["api_docs", "body_schema", "limits_of", "schema_type", "type_of"]
