"""`gem mcp install CLIENT PATH`: put gem into a desktop client's MCP configuration.

The entry launches `gem mcp PATH` with absolute paths (a client starts servers from its own
working directory and environment). An existing configuration is merged into, never
replaced: the other servers stay, and the old file is kept as a backup beside it.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

from ..errors import InvalidInput

CLIENTS = ["claude-desktop", "cursor", "vscode"]


def config_file(client: str) -> Path:
    """Where `client` reads its MCP servers (VS Code: the workspace in the current directory)."""
    home = Path(os.path.expanduser("~"))
    if client == "cursor":
        return home / ".cursor" / "mcp.json"
    if client == "vscode":
        return Path.cwd() / ".vscode" / "mcp.json"
    if sys.platform == "darwin":
        return home / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
    if sys.platform == "win32":
        return Path(os.environ.get("APPDATA", home)) / "Claude" / "claude_desktop_config.json"
    return home / ".config" / "Claude" / "claude_desktop_config.json"


def gem_command() -> list[str]:
    """The `gem` of this environment, absolute: the one beside this Python, else the one on
    PATH, else this Python running the module."""
    beside = Path(sys.executable).parent / "gem"
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    found = shutil.which("gem")
    return [os.path.abspath(found)] if found else [sys.executable, "-m", "gem"]


def entry(client: str, database: str, engine: str | None) -> dict[str, Any]:
    command, *prefix = gem_command()
    args = [*prefix, "mcp", database, *(["--engine", engine] if engine else [])]
    server: dict[str, Any] = {"command": command, "args": args}
    return {"type": "stdio", **server} if client == "vscode" else server


def merged(client: str, current: dict[str, Any], name: str,
           server: dict[str, Any]) -> dict[str, Any]:
    key = "servers" if client == "vscode" else "mcpServers"
    servers = current.get(key, {})
    if not isinstance(servers, dict):
        raise InvalidInput(f"its {key!r} is not a JSON object; fix it by hand")
    return {**current, key: {**servers, name: server}}


def install_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("client", metavar="CLIENT", nargs="?", choices=CLIENTS,
                   help="claude-desktop, cursor or vscode (.vscode/mcp.json here); with --print "
                        "only, default claude-desktop")
    p.add_argument("path", metavar="PATH", help="the database")
    p.add_argument("--engine", choices=["kuzu", "ladybug"], dest="engine_choice",
                   help="passed on to `gem mcp` (default: the engine that made the database)")
    p.add_argument("--name", default="gem", help="the server's name in the configuration "
                                                 "(default gem)")
    p.add_argument("--print", action="store_true", dest="print_only",
                   help="print the configuration instead of writing it")


def install(args: argparse.Namespace) -> int:
    database = os.path.abspath(args.path)
    if not os.path.exists(database):
        raise InvalidInput(f"no database at {args.path!r} (create one with `gem init`)")
    if not args.client and not args.print_only:
        raise InvalidInput(f"name the client ({', '.join(CLIENTS)}) or give --print")
    client = args.client or "claude-desktop"
    server = entry(client, database, args.engine_choice)
    if args.print_only:
        print(json.dumps(merged(client, {}, args.name, server), indent=2))
        return 0
    target = config_file(client)
    current: dict[str, Any] = {}
    if target.exists():
        try:
            current = json.loads(target.read_text(encoding="utf-8") or "{}")
        except (ValueError, UnicodeDecodeError) as exc:
            raise InvalidInput(f"{target} is not JSON ({exc}); fix or move it, nothing was "
                               f"changed") from None
        if not isinstance(current, dict):
            raise InvalidInput(f"{target} is not a JSON object; nothing was changed")
    try:
        updated = merged(client, current, args.name, server)
    except InvalidInput as exc:
        raise InvalidInput(f"{target}: {exc}; nothing was changed") from None
    target.parent.mkdir(parents=True, exist_ok=True)
    backup = None
    if target.exists():
        backup = target.with_name(f"{target.name}.{datetime.now():%Y%m%d-%H%M%S}.bak")
        shutil.copy2(target, backup)
    # Written beside it and renamed: a client reading it never sees half a file.
    fd, scratch = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(json.dumps(updated, indent=2) + "\n")
        os.replace(scratch, target)
    except BaseException:
        os.unlink(scratch)
        raise
    print(f"gem: added {args.name!r} ({database}) to {target}"
          + (f"; the old file is {backup}" if backup else "") + f"; restart {client}")
    return 0
