"""`python -m gem ...` is the `gem` command (how `gem mcp` starts its server)."""
import sys

from .cli import main

sys.exit(main())
