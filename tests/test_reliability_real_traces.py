"""The real-trace mutation campaign's quick part (issue 34, item 6): one real corpus trace (the
CUDA-graph Llama decode, fixtures/corpus/llama_graph_decode.json.gz), one case of each mutation
class, through `roofline topn` + `roofline analyze` beside the undamaged trace
(tests/trace_mutations.py says how a case is classified). The whole campaign, every real trace x
every mutation, is benchmarks/real_trace_campaign.py (figures: benchmarks/real_trace_campaign_results.md)."""
import pytest

import trace_mutations as M

TRACE = M.CORPUS / "llama_graph_decode.json.gz"
# one case per class, and the outcome the tool gives it
CASES = [("truncated", "mid-event at 90%", "error"),
         ("duplicated", "10% of kernel events twice", "identical"),
         ("out of order", "all events shuffled", "identical"),
         ("unlinked", "External id removed from kernels and launches", "degraded"),
         ("second device", "all kernels copied to device 1", "error"),
         ("second stream", "every other kernel on stream 21", "identical"),
         ("clock offset", "GPU events -1 s", "identical"),
         ("older field names", "cpu ops as Operator", "degraded")]


@pytest.mark.parametrize("cls,label,outcome", CASES, ids=[c[0] for c in CASES])
def test_a_damaged_real_trace_is_refused_noted_or_unchanged(cls, label, outcome):
    r = M.run_case(TRACE, cls, label)
    assert r["outcome"] not in ("silent", "bad error"), r
    assert r["outcome"] == outcome, r


def test_every_mutation_class_is_in_the_quick_part():
    assert {c[0] for c in CASES} == set(M.MUTATIONS)


@pytest.mark.parametrize("label", ["kernels alone +half a step", "kernels alone -1 s"])
def test_kernels_shifted_out_of_their_steps_are_placed_by_the_launching_step(tmp_path, label):
    """A real two-regime trace (fixtures/corpus/qwen3moe_grouped_mm.json.gz) whose kernels alone are
    shifted against their GPU step ranges (the ranges kept: a damaged trace; a clock offset moves
    both): each launch is placed by the CPU step range its launch call sits in, so every head's
    numbers equal the undamaged trace's, and the Top-N says why."""
    import random

    trace = M.CORPUS / "qwen3moe_grouped_mm.json.gz"
    r = M.run_case(trace, "clock offset", label)
    assert r["outcome"] == "identical", r
    fn, args = next((f, a) for lb, f, a in M.MUTATIONS["clock offset"] if lb == label)
    data, _ = fn(M.items_of(trace), random.Random(0), *args)
    src, out = tmp_path / "trace.json", tmp_path / "profile_topN.json"
    src.write_bytes(data)
    code, _, err = M.R.cli(["topn", str(src), "-o", str(out), "-q", "--force", *M.topn_args(trace)])
    assert code == 0, err
    import json
    notes = json.loads(out.read_text())["notes"]
    moved = [n for n in notes if "left their own steps" in n]
    assert len(moved) == 1 and not any("outside any step range" in n for n in notes), notes
