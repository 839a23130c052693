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
