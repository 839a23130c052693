"""Op class routing_sort (roofline/core/opclasses/routing_sort.py): the MoE routing's sort / top-k /
histogram kernels, recognised by name and by op, latency-bound, no HBM verdict, and the fuse
lever only where the launch stream shows routing steps side by side. Real kernel names from the
corpus's Qwen3-MoE trace (fixtures/corpus/corpus_meta.json)."""
from __future__ import annotations

import json
from pathlib import Path

from roofline.core import opclasses
from roofline.core.classify import classify

ROOT = Path(__file__).resolve().parents[1]
META = json.loads((ROOT / "fixtures" / "corpus" / "corpus_meta.json").read_text())


def _names(pattern: str) -> list[str]:
    """Kernel names of the corpus metadata containing ``pattern``."""
    out = set()

    def walk(o):
        if isinstance(o, dict):
            for k, v in o.items():
                walk(k)
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)
        elif isinstance(o, str) and pattern in o and o.startswith("void "):
            out.add(o)
    walk(META)
    return sorted(out)


def test_the_routing_kernels_of_a_real_moe_trace_are_routing_sort():
    names = _names("SortKVInPlace") + _names("gatherTopK") + _names("DeviceRadixSort")
    assert len(names) >= 6
    assert {classify(n) for n in names} == {"routing_sort"}
    assert classify("x", "aten::topk") == classify("x", "aten::sort") == "routing_sort"
    # MoE's own gating kernels stay MoE; an argmax stays a streaming reduction
    assert classify("topk_gating_softmax_kernel") == "moe" and classify("reduce_kernel[argmax]") == "elementwise"
    oc = opclasses.get("routing_sort")
    assert oc.seed_class == "elementwise" and oc.no_verdict


def test_a_routing_sort_head_gets_no_verdict_and_the_fuse_lever_only_with_evidence():
    from roofline import api
    from roofline.io.schema import validate_artifact

    from conftest import entry, h200_env, topn

    sort, topk = _names("radixSortKVInPlace")[0], _names("gatherTopK")[0]
    n = 4 * 1024 * 1024                       # fp32 in and out: 33.6 MB, above half the H200's L2
    nbytes = n * 4 * 2
    t_ms = nbytes / (0.85 * 4.8e12) * 1e3     # 85% of the HBM pin rate: a copy model would say saturated
    t_small = nbytes / (0.10 * 4.8e12) * 1e3  # 10%: a routing launch as it runs, latency-bound

    def head(name, pct, after=None, t=t_ms):
        e = entry(name, pct, t, lps=48, dtypes={"act": "fp32", "out": "fp32"},
                  shapes=[{"elems_in": n, "elems_out": n}])
        if after:
            e["launch_neighbours"] = {"after": {after: 48}}
        return e

    for after, moe_too, lever in ((topk, True, "fused MoE router"), (topk, False, "fuse the routing"), (None, True, None)):
        extra = [entry("fused_moe_kernel", 30.0, 0.2, shapes=[{"M": 64, "E": 128, "top_k": 8, "hidden": 2048,
                                                                "inter": 768}])] if moe_too else []
        art = api.analyze(topn(head(sort, 12.0, after), head(topk, 9.0), *extra), h200_env(model_arch_class="moe"))
        validate_artifact(art)
        e = next(x for x in art["entries"] if x["name"] == sort)
        assert (e["op_class"], e["op_kind"], e["bound_type"], e["headroom_class"]) == \
            ("elementwise", "routing_sort", "memory", "unknown")
        assert e["modeled"] is True and e["bytes_est"] == nbytes and 0.8 < e["hbm_util"] < 0.9
        assert "routing step (sort / top-k / histogram)" in e["notes"] and e["expected_e2e_gain_pct"] is None
        fuse = [lv for lv in e["other_levers"] if lv.startswith("fuse the routing into one kernel")]
        if lever is None:
            assert fuse == []                 # no launch-stream evidence: no routing step named
        else:
            assert len(fuse) == 1 and "gatherTopK" in fuse[0] and "21.00% GPU together" in fuse[0]
            assert ("fused MoE router" in fuse[0]) is moe_too


def test_a_routing_launch_as_it_runs_is_latency_bound_with_no_verdict():
    from roofline import api

    from conftest import entry, h200_env, topn

    name = _names("radixSortKVInPlace")[0]
    n = 4 * 1024 * 1024
    t_ms = n * 8 / (0.10 * 4.8e12) * 1e3
    art = api.analyze(topn(entry(name, 12.0, t_ms, lps=48, dtypes={"act": "fp32", "out": "fp32"},
                                 shapes=[{"elems_in": n, "elems_out": n}])), h200_env())
    e = art["entries"][0]
    assert (e["bound_type"], e["headroom_class"], e["route"]) == ("latency", "unknown", "pct_fallback")
    assert any(lv.startswith("occupancy") for lv in e["other_levers"])
