"""The agent-facing operations (`ops`) and their schemas (`schemas`): what `gem serve`
(HTTP and MCP) and the CLI's `--json` output say. Titles, never internal ids."""
from . import ops, schemas

__all__ = ["ops", "schemas"]
