"""`gem serve`'s options that back the memory's hooks with a model (gem/cli/serving.py):
`--extractor-model M --llm-base-url URL` and the like, which `gem mcp` also takes and hands to
the server it starts; the API key comes from the environment
(OPENAI_API_KEY), never from the command line, where other users of the machine can read it."""
from __future__ import annotations

import argparse
from typing import Any

from ..errors import InvalidInput
from .hooks import Extractor, Resolver, Reviser, Summarizer

HOOKS = {"extractor": Extractor, "reviser": Reviser, "resolver": Resolver,
         "summarizer": Summarizer}


def add_arguments(p: argparse.ArgumentParser) -> None:
    group = p.add_argument_group("hooks backed by a model (any OpenAI-compatible endpoint; "
                                 "the API key from OPENAI_API_KEY)")
    for name in HOOKS:
        group.add_argument(f"--{name}-model", metavar="MODEL",
                           help=f"the {name} asks MODEL (gem.llm.{HOOKS[name].__name__})")
    group.add_argument("--llm-base-url", metavar="URL",
                       help="the endpoint, e.g. https://api.openai.com/v1 or "
                            "http://127.0.0.1:11434/v1 (ollama)")
    group.add_argument("--llm-timeout", type=float, default=60.0, metavar="SECONDS",
                       help="per request (default 60)")
    group.add_argument("--llm-cache", metavar="DIR",
                       help="keep the models' answers in DIR, so a replay costs nothing")


def hooks(args: argparse.Namespace) -> dict[str, Any]:
    """gem.open's hook arguments the options ask for."""
    wanted = {name: getattr(args, f"{name}_model", None) for name in HOOKS}
    wanted = {name: model for name, model in wanted.items() if model}
    if not wanted:
        return {}
    if not args.llm_base_url:
        raise InvalidInput(f"--{next(iter(wanted))}-model needs --llm-base-url")
    return {name: HOOKS[name](model, args.llm_base_url, timeout=args.llm_timeout,
                              cache_dir=args.llm_cache)
            for name, model in wanted.items()}


def serve_arguments(args: argparse.Namespace) -> list[str]:
    """The options given, as `gem serve` arguments (how `gem mcp` passes them to the server it
    starts). Read back through add_arguments' own definitions, so the two cannot drift."""
    parser = argparse.ArgumentParser(add_help=False)
    add_arguments(parser)
    given: list[str] = []
    for action in parser._actions:
        value = getattr(args, action.dest, None)
        if action.option_strings and value is not None and value != action.default:
            given += [action.option_strings[0], str(value)]
    return given
