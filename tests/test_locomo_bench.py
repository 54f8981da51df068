"""bench/locomo.py runs end to end on one LoCoMo conversation (skipped without the data)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "locomo.py"


def _module():
    spec = importlib.util.spec_from_file_location("locomo_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["locomo_bench"] = module
    spec.loader.exec_module(module)
    return module


def test_locomo_bench_on_one_conversation():
    locomo = _module()
    if not locomo.DATA.is_file():
        pytest.skip(f"no LoCoMo data at {locomo.DATA}")
    lines: list[str] = []
    result = locomo.run(locomo.DATA, 1, "hashing", [5, 10], out=lines.append, questions=40)
    text = "\n".join(lines)
    for system in ("gem (maintenance on)", "gem (maintenance off)", "BM25", "dense", "RRF"):
        assert f"{system} " in text
        for k in (5, 10):
            any_k, all_k = result["recall"][system][k]
            assert 0.0 <= all_k <= any_k <= 1.0
    assert result["questions"] == 40
    assert "ms/turn" in text and "p95" in text and "reverse order" in text
    # gem finds evidence at all: a broken ranking (or ingest) scores zero here
    assert result["recall"]["gem (maintenance off)"][10][0] > 0.3


def test_locomo_bench_skips_cleanly_without_the_data(monkeypatch, capsys):
    locomo = _module()
    monkeypatch.setattr(locomo, "DATA", Path("/nonexistent/locomo-dev.json"))
    assert locomo.main([]) == 0
    assert "skipped" in capsys.readouterr().out
