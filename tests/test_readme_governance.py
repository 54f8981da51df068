"""The policies guide's example (docs/guides/policies.md) runs as written: its policy file is saved
as team.policy in a fresh directory, and its Python runs there (the asserts are the test)."""
from __future__ import annotations

import re
from pathlib import Path

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guides" / "policies.md"


def _section() -> str:
    return GUIDE.read_text(encoding="utf-8")


def test_the_custom_policy_extends_the_default_governance(tmp_path, monkeypatch):
    (policy,) = re.findall(r"```policy\n(.*?)```", _section(), re.S)
    (code,) = re.findall(r"```python\n(.*?)```", _section(), re.S)
    (tmp_path / "team.policy").write_text(policy, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    import gem
    loaded = gem.policy.load([str(tmp_path / "team.policy")])
    names = [p.name for p in loaded.policies]
    assert "no-passwords" in names and "propagate-on-change" in names   # added, not replaced
    assert loaded.settings["half_life"].text == "14d"
    exec(compile(code, str(GUIDE), "exec"), {})
