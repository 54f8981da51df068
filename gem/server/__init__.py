"""`gem serve` (HTTP + MCP over streamable HTTP) and `gem mcp` (MCP over stdio, bridged to
it). Needs the server extra: pip install 'gem-memory[server]'."""
