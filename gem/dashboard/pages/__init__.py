"""The dashboard's pages, each a function of a `Memory` (and the request's parameters) that
returns a whole HTML document. They use the public, side-effect-free reads only (`topics`,
`episodes`, `inspect`, `explain`, `salience_history`, `graph`, `recent_transitions`,
`titles`, `audit`, `policies`): viewing a page never runs a transition and never reinforces.

`gem serve` runs each on its memory's worker thread (gem/server/dashboard.py). A page family
per module: the listings (overview, episodes), a topic and its graph, the log and the audit,
the policies, the benchmark reports; what they share is in `common`.
"""
from .benchreports import report_files, reports
from .common import PAGE_SIZE, error
from .ledger import audit, log
from .listings import OverviewQuery, episodes, overview
from .topics import graph, topic
from .triggers import policies

__all__ = ["overview", "OverviewQuery", "episodes", "topic", "graph", "log", "policies", "audit",
           "reports", "report_files", "error", "PAGE_SIZE"]
