"""The #1 by larger gain on every corpus trace is of the kind written down from an independent reading of
the trace (benchmarks/first_fix.py EXPECTED), but for the known mismatches it lists with their reasons."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import first_fix  # noqa: E402

CASES = list(json.loads((ROOT / "fixtures" / "corpus" / "corpus_meta.json").read_text())["cases"])


def test_every_corpus_trace_has_an_expectation_with_a_reason():
    assert set(first_fix.EXPECTED) == set(CASES)
    assert all(len(why) > 20 for _, why in first_fix.EXPECTED.values())
    assert set(first_fix.KNOWN_MISMATCH) <= set(CASES) and len(first_fix.KNOWN_MISMATCH) <= 2


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_the_first_fix_is_of_the_expected_kind(case, tmp_path):
    meta = json.loads((ROOT / "fixtures" / "corpus" / "corpus_meta.json").read_text())["cases"][case]
    got, _ = first_fix.tool_kind(first_fix.analyse_case(case, meta, tmp_path))
    exp = first_fix.EXPECTED[case][0]
    assert first_fix.matches(exp, got) != (case in first_fix.KNOWN_MISMATCH), (case, exp, got)


@pytest.mark.parametrize("case", ["llama_compile_decode", "qwen3moe_generate_batched_mm", "qwen2_prefill_all_logits"])
def test_the_new_rules_lead_their_traces(case, tmp_path):
    meta = json.loads((ROOT / "fixtures" / "corpus" / "corpus_meta.json").read_text())["cases"][case]
    got, _ = first_fix.tool_kind(first_fix.analyse_case(case, meta, tmp_path))
    assert first_fix.matches(first_fix.EXPECTED[case][0], got), got
