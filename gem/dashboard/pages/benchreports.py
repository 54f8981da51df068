"""The benchmark reports a server was pointed at (`gem serve --reports DIR`)."""
from __future__ import annotations

import os
import re
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote

from ..html import card, link, page, table, when


REPORT_NAME = re.compile(r"^[\w.-]+\.html$")


def report_files(directory: str | None) -> list[Path]:
    if not directory or not os.path.isdir(directory):
        return []
    return sorted((p for p in Path(directory).iterdir()
                   if p.is_file() and REPORT_NAME.match(p.name)),
                  key=lambda p: p.stat().st_mtime, reverse=True)


def reports(directory: str | None, where: str = "") -> str:
    files = report_files(directory)
    # The directory is not named: a page may be shown to tenants, who learn no server path.
    how = ('<p>Write one with <code>gem bench trajectory --html --out DIR</code>; '
           '<code>gem serve --reports DIR</code> says where the dashboard looks.</p>')
    if files:
        rows = [[link(f"/reports/{quote(p.name)}", p.name),
                 when(datetime.fromtimestamp(p.stat().st_mtime, timezone.utc)),
                 f"{p.stat().st_size / 1024:.0f} KB"] for p in files]
        listing = table(["report", "written", "size"], rows)
    else:
        listing = ('<p class="muted">No HTML report in the reports directory.</p>' if directory
                   else '<p class="muted">No reports directory (<code>--reports</code>).</p>')
    return page("Reports", card("Benchmark reports", listing + how), active="/reports", where=where,
                subtitle="Self-contained HTML reports (the trajectory benchmark's plot and tables).")
