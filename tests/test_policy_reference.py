"""The language reference is executable: every example in specs/policy-language.md runs here.

The conventions are documented at the top of the reference ("How this document is tested"):

    ```policy          must parse and check clean against the actions this build implements;
                       <!-- warns: CODE ... --> above it: with exactly those warnings
    ```policy-error    preceded by <!-- expect: CODE ... [; available: a, b] -->; must be refused
                       with exactly those diagnostic codes, in order
    ```diagnostics     right after a policy-error block: its exact rendered error text;
                       right after a policy block with warns: its exact rendered warnings
    ```python          runs after the block marked <!-- preamble -->, against a real memory
    ```lark            every line is a line of grammar/policy.lark (whitespace-normalised)
    <!-- default-policy -->   on policy blocks: together they are policies/default.policy (and
                              they are checked together, not one by one)
    <!-- after: default -->   on policy and policy-error blocks: composed after the default policy
    <!-- encoding: NAME -->   on policy-error blocks: the text is saved in that encoding and read
                              from a file, as gem.policy.load reads one
    <!-- table: NAME -->      a reference table compared with gem/policy/catalogue.py

Any other fenced block fails the suite, so nothing in the document goes unexercised.
The last tests feed the runners broken examples to show they can fail.
"""
from __future__ import annotations

import contextlib
import functools
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ENGINE

import gem
from gem.errors import PolicyError
from gem.policy import CODES, WARNINGS, default_policy_path, grammar_path, load, load_sources, load_text, parse
from gem.policy import catalogue as C
from gem.runtime import available_actions

DOC = Path(__file__).resolve().parent.parent / "specs" / "policy-language.md"
EXAMPLE_FILE = "example.policy"
# Under a short, stable name, so that diagnostics naming it read the same on every machine.
DEFAULT_FILE = "default.policy"
KINDS = ("policy", "policy-error", "diagnostics", "python", "lark")


# ---- extraction --------------------------------------------------------------------------


@dataclass(frozen=True)
class Block:
    kind: str
    text: str
    line: int  # line of the opening fence, 1-based
    note: str | None  # the HTML comment on the line(s) right above the fence

    @property
    def id(self) -> str:
        return f"L{self.line}-{self.kind}"


_FENCE = re.compile(r"^```(\S*)\s*$")
_NOTE = re.compile(r"^<!--\s*(.*?)\s*-->\s*$")


def extract_blocks(markdown: str) -> list[Block]:
    lines = markdown.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        kind, start = m.group(1), i
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        if j == len(lines):
            raise AssertionError(f"line {start + 1}: fenced block is never closed")
        k = start - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        note_match = _NOTE.match(lines[k]) if k >= 0 else None
        blocks.append(Block(kind, "\n".join(lines[start + 1:j]) + "\n", start + 1,
                            note_match.group(1) if note_match else None))
        i = j + 1
    return blocks


def directives(note: str | None) -> dict[str, str]:
    """`expect: a b; available: x, y` -> {"expect": "a b", "available": "x, y"}; a bare word maps to ''."""
    out: dict[str, str] = {}
    for part in (note or "").split(";"):
        if not part.strip():
            continue
        key, _, value = part.partition(":")
        out[key.strip()] = value.strip()
    return out


def extract_tables(markdown: str) -> dict[str, list[list[str]]]:
    """Tables announced by <!-- table: NAME -->: their body rows, cells unescaped (\\| -> |)."""
    lines = markdown.splitlines()
    tables: dict[str, list[list[str]]] = {}
    for i, line in enumerate(lines):
        m = _NOTE.match(line)
        if not m or not m.group(1).startswith("table:"):
            continue
        name = m.group(1).split(":", 1)[1].strip()
        assert name not in tables, f"table {name!r} appears twice"
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        rows = []
        while j < len(lines) and lines[j].lstrip().startswith("|"):
            cells = re.split(r"(?<!\\)\|", lines[j].strip())[1:-1]
            rows.append([c.strip().replace("\\|", "|") for c in cells])
            j += 1
        assert len(rows) >= 3 and set(rows[1][0]) <= set("-: "), f"table {name!r} is malformed"
        tables[name] = rows[2:]
    return tables


def code_spans(cell: str) -> list[str]:
    return re.findall(r"`([^`]*)`", cell)


# ---- runners (pure: the meta-tests at the end feed them broken examples) ------------------


def load_block(block: Block, available=None):
    """Load a block as its note says: alone, after the default policy, or from a file in an encoding."""
    d = directives(block.note)
    available = available_actions() if available is None else available
    if "encoding" in d:
        with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
            Path(EXAMPLE_FILE).write_bytes(block.text.encode(d["encoding"]))
            return load([EXAMPLE_FILE], available, defaults=False)
    sources = [(EXAMPLE_FILE, block.text)]
    if d.get("after") == "default":
        sources.insert(0, (DEFAULT_FILE, default_policy_path().read_text(encoding="utf-8")))
    elif "after" in d:
        raise AssertionError(f"{block.id}: 'after: {d['after']}' is not a thing; only 'after: default' is")
    return load_sources(sources, available)


def run_policy(block: Block, rendered: Block | None = None) -> None:
    policy_set = load_block(block)
    d = directives(block.note)
    if "warns" not in d:
        assert rendered is None, f"{block.id}: a diagnostics block follows a policy block without warns:"
        return
    expected = d["warns"].split()
    unknown = [c for c in expected if c not in WARNINGS]
    assert not unknown, f"{block.id}: no such warning code {unknown}"
    got = [w.code for w in policy_set.warnings]
    assert got == expected, f"{block.id}: expected warnings {expected}, got {got}"
    if rendered is not None:
        text = "\n".join(w.render() for w in policy_set.warnings)
        assert text == rendered.text.rstrip("\n"), (
            f"{block.id}: rendered warnings differ\n--- document\n{rendered.text}--- actual\n{text}\n")


def run_policy_error(block: Block, rendered: Block | None) -> None:
    d = directives(block.note)
    if "expect" not in d or not d["expect"].split():
        raise AssertionError(f"{block.id}: a policy-error block needs <!-- expect: CODE --> above it")
    expected = d["expect"].split()
    unknown = [c for c in expected if c not in CODES]
    assert not unknown, f"{block.id}: no such diagnostic code {unknown}"
    available = None
    if "available" in d:
        available = frozenset(a.strip() for a in d["available"].split(",") if a.strip())
    try:
        load_block(block, available)
    except PolicyError as e:
        got = [x.code for x in e.diagnostics]
        assert got == expected, f"{block.id}: expected {expected}, got {got}:\n{e}"
        if rendered is not None:
            assert str(e) == rendered.text.rstrip("\n"), (
                f"{block.id}: rendered diagnostics differ\n--- document\n{rendered.text}--- actual\n{e}\n")
        return
    raise AssertionError(f"{block.id}: expected {expected}, but the example checks clean")


def check_lark(block: Block, grammar: str) -> None:
    known = {" ".join(line.split()) for line in grammar.splitlines()}
    for offset, line in enumerate(block.text.splitlines(), 1):
        norm = " ".join(line.split())
        if not norm or norm.startswith("//"):
            continue
        assert norm in known, f"{block.id}, line {offset}: not in grammar/policy.lark: {line!r}"


def run_python(block: Block, preamble: Block | None) -> dict:
    namespace: dict = {"__name__": f"policy_reference_{block.line}"}
    if preamble is not None and preamble is not block:
        exec(compile(preamble.text, f"{DOC.name}:{preamble.line}", "exec"), namespace)
    # Pad with blank lines so tracebacks point at the document's own line numbers.
    source = "\n" * block.line + block.text
    exec(compile(source, str(DOC), "exec"), namespace)
    return namespace


# ---- the document ---------------------------------------------------------------------------

TEXT = DOC.read_text(encoding="utf-8")
BLOCKS = extract_blocks(TEXT)
TABLES = extract_tables(TEXT)
PREAMBLES = [b for b in BLOCKS if b.kind == "python" and "preamble" in directives(b.note)]
PREAMBLE = PREAMBLES[0] if PREAMBLES else None


def _rendered_for(block: Block) -> Block | None:
    i = BLOCKS.index(block)
    nxt = BLOCKS[i + 1] if i + 1 < len(BLOCKS) else None
    return nxt if nxt is not None and nxt.kind == "diagnostics" else None


def test_every_block_is_of_a_kind_this_suite_runs():
    odd = [b.id for b in BLOCKS if b.kind not in KINDS]
    assert not odd, f"fenced blocks this suite cannot run (give them a kind from {KINDS}): {odd}"


def test_the_document_has_examples_of_every_kind():
    counts = {k: sum(1 for b in BLOCKS if b.kind == k) for k in KINDS}
    assert counts["policy"] >= 15, counts
    assert counts["policy-error"] >= len(CODES), counts
    assert counts["diagnostics"] >= len(CODES), counts
    assert counts["python"] >= 8, counts
    assert counts["lark"] >= 2, counts
    assert len(PREAMBLES) == 1, "exactly one python block is the preamble"
    against_memory = [b for b in BLOCKS if b.kind == "python" and "gem.open(" in b.text and "clock=" in b.text]
    assert len(against_memory) >= 8, "the Python examples must run against real memories with a clock"


def test_every_diagnostics_block_follows_a_policy_error_or_a_warning_block():
    for i, b in enumerate(BLOCKS):
        if b.kind == "diagnostics":
            before = BLOCKS[i - 1] if i > 0 else None
            assert before is not None and (before.kind == "policy-error" or (
                before.kind == "policy" and "warns" in directives(before.note))), \
                f"{b.id} follows no policy-error block and no policy block with warns:"


def _is_default(block: Block) -> bool:
    return "default-policy" in directives(block.note)


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.kind == "policy" and not _is_default(b)],
                         ids=lambda b: b.id)
def test_policy_example_checks_clean(block):
    run_policy(block, _rendered_for(block))


def test_the_default_policy_blocks_check_clean_together_without_warnings():
    text = "".join(b.text for b in BLOCKS if _is_default(b))
    assert load_text(text, DEFAULT_FILE, available_actions=available_actions()).warnings == ()


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.kind == "policy-error"], ids=lambda b: b.id)
def test_policy_error_example_fails_with_its_code(block):
    run_policy_error(block, _rendered_for(block))


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.kind == "lark"], ids=lambda b: b.id)
def test_grammar_excerpt_is_the_grammar(block):
    check_lark(block, grammar_path().read_text(encoding="utf-8"))


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """Temporary files of the examples go to pytest's tmp_path; the engine under test is used."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    if ENGINE != "kuzu":
        monkeypatch.setattr(gem, "open", functools.partial(gem.open, engine=ENGINE))
    return tmp_path


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.kind == "python"], ids=lambda b: b.id)
def test_python_example_runs(block, sandbox):
    run_python(block, PREAMBLE)


# ---- the reference tables are the catalogue --------------------------------------------------


def _table(name: str) -> list[list[str]]:
    assert name in TABLES, f"the document has no <!-- table: {name} -->"
    return TABLES[name]


def _first_code(row: list[str]) -> str:
    spans = code_spans(row[0])
    assert spans, f"row {row} names nothing in backticks"
    return spans[0]


def test_events_table_is_the_catalogue():
    rows = _table("events")
    documented = {_first_code(r): code_spans(r[1]) for r in rows}
    expected = {name: [f"{n}: {t}" for n, t in sig.bindings if n != "timestamp"]
                for name, sig in C.EVENTS.items()}
    assert documented == expected


def test_relations_table_is_the_catalogue():
    documented = {_first_code(r): code_spans(r[1])[0] for r in _table("relations")}
    assert documented == {name: str(sig.type) for name, sig in C.RELATIONS.items()}


@pytest.mark.parametrize("type_name", sorted(C.ATTRIBUTES))
def test_attribute_tables_are_the_catalogue(type_name):
    documented = {_first_code(r): code_spans(r[1])[0] for r in _table(f"attributes {type_name}")}
    assert documented == {name: str(sig.type) for name, sig in C.ATTRIBUTES[type_name].items()}


def test_functions_table_is_the_catalogue():
    documented = {_first_code(r): code_spans(r[1])[0] for r in _table("functions")}
    assert documented == {f"{n}({', '.join(str(p) for p in sig.params)})": str(sig.result)
                          for n, sig in C.FUNCTIONS.items()}


def test_actions_table_is_the_catalogue():
    documented = {_first_code(r): sorted(code_spans(r[1])) for r in _table("actions")}
    assert documented == {f"{n}({', '.join(str(p) for p in sig.params)})": sorted(sig.emits)
                          for n, sig in C.ACTIONS.items()}


def test_settings_table_is_the_catalogue_and_the_compiled_defaults():
    defaults = load_text('POLICY p ON tick DO reject("x")').settings
    documented = {_first_code(r): (code_spans(r[1])[0], code_spans(r[2])[0]) for r in _table("settings")}
    assert documented == {n: (str(sig.type), defaults[n].text) for n, sig in C.SETTINGS.items()}


def test_codes_table_lists_every_code_and_each_has_an_example():
    assert [_first_code(r) for r in _table("codes")] == list(CODES) + list(WARNINGS)
    exemplified = {c for b in BLOCKS if b.kind == "policy-error"
                   for c in directives(b.note).get("expect", "").split()}
    assert set(CODES) <= exemplified
    rendered = {directives(b.note)["expect"].split()[0] for b in BLOCKS
                if b.kind == "policy-error" and _rendered_for(b) is not None}
    assert set(CODES) <= rendered, f"codes without a rendered example: {set(CODES) - rendered}"
    warned = {c for b in BLOCKS if b.kind == "policy" and _rendered_for(b) is not None
              for c in directives(b.note).get("warns", "").split()}
    assert set(WARNINGS) <= warned, f"warnings without a rendered example: {set(WARNINGS) - warned}"


def test_the_default_policy_blocks_are_the_default_policy_file():
    blocks = [b for b in BLOCKS if "default-policy" in directives(b.note)]
    assert blocks and all(b.kind == "policy" for b in blocks)
    documented = [parse(b.text, EXAMPLE_FILE) for b in blocks]
    shipped = parse(default_policy_path().read_text(encoding="utf-8"), "default.policy")
    assert [s for f in documented for s in f.settings] == list(shipped.settings)
    assert [p for f in documented for p in f.policies] == list(shipped.policies)


# ---- the runners can fail --------------------------------------------------------------------


def _blocks(markdown: str) -> list[Block]:
    return extract_blocks(markdown)


def test_runner_refuses_a_policy_that_does_not_check():
    (b,) = _blocks("```policy\nPOLICY p ON field_updatd DO contest(field)\n```\n")
    with pytest.raises(PolicyError):
        run_policy(b)


def test_runner_refuses_a_policy_error_example_that_checks_clean_or_fails_otherwise():
    clean, wrong, unannotated = _blocks(
        "<!-- expect: gem_type -->\n```policy-error\nPOLICY p ON tick DO reject(\"x\")\n```\n"
        "<!-- expect: gem_type -->\n```policy-error\nPOLICY p ON tck DO reject(\"x\")\n```\n"
        "```policy-error\nPOLICY p ON tck DO reject(\"x\")\n```\n")
    with pytest.raises(AssertionError, match="checks clean"):
        run_policy_error(clean, None)
    with pytest.raises(AssertionError, match="gem_unknown_event"):
        run_policy_error(wrong, None)
    with pytest.raises(AssertionError, match="needs <!-- expect"):
        run_policy_error(unannotated, None)


def test_runner_checks_warnings_exactly_and_composes_after_the_default_when_told():
    quiet, noisy, composed, wrong = _blocks(
        "<!-- warns: gem_c6_no_reinforcement -->\n```policy\nPOLICY p ON tick DO reject(\"x\")\n```\n"
        "<!-- warns: gem_c3_no_propagation -->\n```policy\nPOLICY r ON retrieved DO reinforce(topic, 1)\n```\n"
        "<!-- after: default -->\n```policy\nDISABLE POLICY hide-faded-fields\n```\n"
        "<!-- after: default -->\n```policy\nDISABLE POLICY hide-faded-field\n```\n")
    with pytest.raises(AssertionError, match="expected warnings"):
        run_policy(quiet)
    run_policy(noisy)
    run_policy(composed)
    with pytest.raises(PolicyError, match="gem_nothing_to_disable"):
        run_policy(wrong)
    (alone,) = _blocks("```policy\nDISABLE POLICY hide-faded-fields\n```\n")
    with pytest.raises(PolicyError, match="gem_nothing_to_disable"):
        run_policy(alone)


def test_runner_reads_an_encoded_example_from_a_file():
    (b,) = _blocks("<!-- expect: gem_not_utf8; encoding: latin-1 -->\n```policy-error\n# café\n```\n")
    run_policy_error(b, None)
    (b,) = _blocks("<!-- expect: gem_not_utf8; encoding: utf-8 -->\n```policy-error\n"
                   "POLICY p ON tick DO reject(\"café\")\n```\n")
    with pytest.raises(AssertionError, match="checks clean"):
        run_policy_error(b, None)


def test_runner_compares_rendered_diagnostics_exactly():
    err, rendered = _blocks("<!-- expect: gem_unknown_event -->\n```policy-error\nPOLICY p ON tck DO reject(\"x\")\n"
                            "```\n```diagnostics\nexample.policy:1:13: gem_unknown_event: unknown event 'tck'\n```\n")
    with pytest.raises(AssertionError, match="rendered diagnostics differ"):
        run_policy_error(err, rendered)


def test_runner_fails_a_python_example_whose_assertion_fails():
    (b,) = _blocks("```python\nassert 1 + 1 == 3, 'arithmetic'\n```\n")
    with pytest.raises(AssertionError, match="arithmetic"):
        run_python(b, None)


def test_runner_fails_a_grammar_excerpt_that_is_not_the_grammar():
    (b,) = _blocks("```lark\npolicy: \"POLICY\" NAME on_clause do_clause\n```\n")
    with pytest.raises(AssertionError, match="not in grammar"):
        check_lark(b, grammar_path().read_text(encoding="utf-8"))


def test_extraction_reads_notes_and_escaped_table_cells():
    md = ("<!-- expect: gem_action_unavailable; available: reject, contest -->\n\n```policy-error\nx\n```\n"
          "<!-- table: t -->\n| a | b |\n|---|---|\n| `f(Time\\|Unit)` | `Number` |\n")
    (b,) = extract_blocks(md)
    assert directives(b.note) == {"expect": "gem_action_unavailable", "available": "reject, contest"}
    assert extract_tables(md) == {"t": [["`f(Time|Unit)`", "`Number`"]]}
