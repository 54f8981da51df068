"""`gem serve` (HTTP and MCP over HTTP, the dashboard) and `gem mcp` (MCP over stdio, bridged
to the one server of a database)."""
from __future__ import annotations

import argparse
import logging
import os
import sys

from ..errors import InvalidInput
from ..llm import options as llm_options
from .commands import _path, non_negative_float, port_number, positive_float, positive_int


# ---------------------------------------------------------------------- serving
def serve_arguments(p: argparse.ArgumentParser) -> None:
    _path(p)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=port_number, default=8765, help="0 picks a free port (default 8765)")
    p.add_argument("--policies", nargs="+", metavar="FILE", help="load these policy files")
    p.add_argument("--maintain-every", type=positive_float, metavar="SECONDS",
                   help="run maintenance (forget + revise) this often")
    p.add_argument("--create", action="store_true", help="create the database if it is missing")
    p.add_argument("--idle-exit", type=positive_float, metavar="SECONDS",
                   help="exit after this long with no request and no `gem mcp` attached")
    p.add_argument("--lock-timeout", type=non_negative_float, default=10.0, metavar="SECONDS",
                   help="wait this long for another process to release the database")
    p.add_argument("--max-body", type=positive_int, default=1 << 20, metavar="BYTES",
                   help="refuse larger request bodies with 413 (default 1 MiB)")
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    p.add_argument("--reports", default="bench/out", metavar="DIR",
                   help="the dashboard's Reports page lists the HTML reports in DIR "
                        "(default bench/out, where `gem bench trajectory --html` writes)")
    p.add_argument("--keys", metavar="FILE",
                   help='API keys: a JSON object {"KEY": "scope"} ("*": every scope); each '
                        "request then needs `Authorization: Bearer KEY` and sees its scope only")
    llm_options.add_arguments(p)


def _logging(level: str) -> None:
    logging.basicConfig(stream=sys.stderr, level=getattr(logging, level),
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")


def serve(args: argparse.Namespace) -> int:
    try:
        from ..server.runner import serve as run
        from ..server.service import ServeConfig
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise InvalidInput(f"gem serve needs the server extra: pip install 'gem-memory[server]' ({exc})")
    from ..server.keys import Keys
    keys = Keys.read(args.keys) if args.keys else None
    _logging(args.log_level)
    if keys is None and args.host not in ("127.0.0.1", "localhost", "::1"):
        logging.getLogger("gem.server").warning(
            "listening on %s without --keys: whoever reaches it can read and change the memory",
            args.host)
    return run(ServeConfig(
        path=args.path, engine=args.engine, create=args.create, host=args.host, port=args.port,
        policies=tuple(args.policies) if args.policies else None,
        maintain_every=args.maintain_every, idle_exit=args.idle_exit,
        lock_timeout=args.lock_timeout, max_body=args.max_body, reports=args.reports, keys=keys,
        hooks=tuple(llm_options.hooks(args).items())))


def mcp_arguments(p: argparse.ArgumentParser) -> None:
    _path(p)
    p.add_argument("--idle-exit", type=positive_float, default=60.0, metavar="SECONDS",
                   help="a server this command starts exits this long after its last client "
                        "(default 60)")
    p.add_argument("--key", default=os.environ.get("GEM_API_KEY"),
                   help="the API key to present to a server started with --keys "
                        "(default: $GEM_API_KEY)")
    llm_options.add_arguments(p)  # for the server it starts: `gem serve` takes the same


def mcp(args: argparse.Namespace) -> int:
    try:
        from ..server.bridge import run_bridge
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise InvalidInput(f"gem mcp needs the server extra: pip install 'gem-memory[server]' ({exc})")
    if args.engine == "falkordb":
        raise InvalidInput("gem mcp starts or finds the one server of a database path; for a "
                           "FalkorDB memory run `gem serve URL --engine falkordb` (as many as "
                           "you like) and point the MCP client at its /mcp")
    llm_options.hooks(args)  # refuse bad model options here, not in a server's log
    _logging("WARNING")
    return run_bridge(args.path, args.engine, args.idle_exit, key=args.key,
                      serve_args=llm_options.serve_arguments(args))
