"""The dashboard: read-only HTML pages over a memory (server-rendered, inline SVG, no script).

`pages` builds each page from a `Memory`'s side-effect-free reads; `svg` and `html` are the
drawing and markup helpers, also used by `gem bench trajectory --html` for its standalone
report. `gem serve` mounts the pages at `/` (gem/server/dashboard.py).
"""
