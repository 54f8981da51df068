"""The architecture of specs/design.md, checked against the code.

- imports go downwards through the layers of specs/design.md §5, and no module imports
  itself back through others (lazy imports inside functions count; TYPE_CHECKING ones not);
- the pipeline stages documented in §2 are the code's, in order;
- every query text lives in gem/store/;
- the type checker's error count only goes down.
"""
from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gem.pipeline import STAGES

ROOT = Path(__file__).resolve().parent.parent
GEM = ROOT / "gem"
DESIGN = (ROOT / "specs" / "design.md").read_text(encoding="utf-8")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports_of(path: Path) -> set[str]:
    """The gem modules a module imports (absolute names), outside TYPE_CHECKING blocks."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and is_type_checking(child):
                continue
            if isinstance(child, ast.Import):
                found.update(a.name for a in child.names if a.name.startswith("gem"))
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")
                    base = base[:len(base) - (child.level - 1)]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                if target.startswith("gem"):
                    if child.module:  # `from . import x` depends on x, not on the package
                        found.add(target)
                    for alias in child.names:  # `from . import conditions` names a module
                        candidate = f"{target}.{alias.name}"
                        if (GEM.parent / (candidate.replace(".", "/") + ".py")).exists() or \
                                (GEM.parent / candidate.replace(".", "/")).is_dir():
                            found.add(candidate)
            visit(child)

    visit(tree)
    found.discard(me)
    return found


MODULES = {module_name(p): p for p in GEM.rglob("*.py")}
GRAPH = {name: {m for m in imports_of(path) if m in MODULES} for name, path in MODULES.items()}


def layers() -> list[tuple[str, list[str]]]:
    """The layer table of specs/design.md §5: (layer, module prefixes), lowest first."""
    table = DESIGN.split("<!-- layers -->", 1)[1].split("\n\n", 1)[0]
    out = []
    for line in table.strip().splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        out.append((cells[0], re.findall(r"`([\w.]+)`", cells[1])))
    return out


def layer_of(module: str) -> int:
    best, rank = -1, None
    for i, (_, prefixes) in enumerate(layers()):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, rank = len(prefix), i
    assert rank is not None, f"{module} is in no layer of specs/design.md §5"
    return rank


def test_every_module_belongs_to_a_layer():
    for module in MODULES:
        layer_of(module)


def test_imports_go_downwards_only():
    upward = []
    for module, targets in GRAPH.items():
        for target in targets:
            if layer_of(target) > layer_of(module):
                upward.append(f"{module} ({layers()[layer_of(module)][0]}) imports {target} "
                              f"({layers()[layer_of(target)][0]})")
    assert upward == []


def test_there_are_no_import_cycles():
    cycles = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(GRAPH[node]):
            # a package's __init__ re-exporting its own modules is not a cycle through them
            if node.startswith(nxt + ".") or nxt.startswith(node + "."):
                continue
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                walk(nxt)
        stack.pop()
        state[node] = 2

    for module in sorted(GRAPH):
        if module not in state:
            walk(module)
    assert cycles == []


def test_the_documented_stages_are_the_code_stages():
    block = DESIGN.split("<!-- stages -->", 1)[1].split("```", 2)[1]
    documented = [line.split()[0] for line in block.strip().splitlines()]
    assert documented == [s.name for s in STAGES]


QUERY = re.compile(r"""["'](?:\s*)(?:MATCH|CREATE|MERGE|UNWIND|CALL)\b[^"']*\(""")


def test_every_query_lives_in_the_store():
    outside = []
    for name, path in MODULES.items():
        if name.startswith("gem.store"):
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if QUERY.search(line):
                outside.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert outside == []


MYPY_BASELINE = ROOT / "tests" / "mypy-errors.txt"


@pytest.mark.slow  # a whole mypy run without a cache
@pytest.mark.skipif(shutil.which("mypy") is None and
                    subprocess.run([sys.executable, "-m", "mypy", "--version"],
                                   capture_output=True).returncode != 0,
                    reason="mypy is not installed (pip install '.[test]')")
def test_type_errors_only_go_down():
    """A ratchet: the number of mypy errors in gem/ may fall, never rise. When it falls, lower
    the number in tests/mypy-errors.txt in the same commit."""
    done = subprocess.run([sys.executable, "-m", "mypy", "gem", "--ignore-missing-imports",
                           "--no-error-summary", "--cache-dir", os.devnull],
                          capture_output=True, text=True, cwd=ROOT)
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    allowed = int(MYPY_BASELINE.read_text().split()[0])
    assert len(errors) <= allowed, "new type errors:\n" + "\n".join(errors)
