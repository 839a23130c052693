"""CUDA-graph replays (roofline/ingest/graph_capture.py) and static caches written by inductor kernels (roofline/ingest/compiled_caches.py): a replayed inductor kernel takes the arguments its
launcher cpu_op (named like the kernel) recorded where the window holds one; a replay-only window
(fixtures/corpus/qwen3_compile_cudagraphs: torch.compile mode="reduce-overhead", every kernel a replay)
degrades with a reason that says what would give a verdict."""
from __future__ import annotations

from pathlib import Path

from compiled_corpus import cli_artifact
from roofline.ingest.graph_capture import capture_shapes
from roofline.ingest.topn import KernelAgg
from roofline.ingest.torch_trace import parse_trace

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "corpus"


def test_a_replayed_inductor_kernel_takes_its_launchers_arguments():
    # the compiled (no graph) decode: its repeat_kv launcher cpu_op is in the trace; a replay of the same kernel
    # (no linked launch) gets that signature
    pt = parse_trace(str(CORPUS / "qwen3_compile_static.json.gz"), range_regex=["decode", "prefill"])
    name = next(n for n in pt.kernel_names if n.startswith("triton_poi_fused__scaled_dot_product") and n.endswith("_5"))
    a = KernelAgg(name)
    a.count["decode"], a.total_us["decode"] = 24, 2400.0
    other = KernelAgg("nvjet_sm90_tst_384x32_64x4_2x1_v_bz_TNT")
    other.count["decode"] = 6
    assert capture_shapes(pt, [a, other], {1}) == 1
    (s, reg), = a.sigs
    assert reg == "decode" and a.sigs[(s, reg)] == 24 and pt.sigs[s].name == name
    assert pt.sigs[s].dims[:2] == ((32, 8, 3072, 128), (32, 32, 3072, 128))
    assert not other.sigs                          # a cuBLAS kernel's capture does not name it: no shape
    assert capture_shapes(pt, [KernelAgg(name)], set()) == 0     # no graph in the trace: nothing to do


def test_a_replay_only_window_says_what_would_give_a_verdict():
    art = cli_artifact("qwen3_compile_cudagraphs")
    e = next(x for x in art["entries"] if x["name"].startswith("triton_poi_fused__scaled_dot_product"))
    assert not e["modeled"] and e["avoidable_gain_pct"] is None
    assert "replayed from a CUDA graph" in e["notes"] and "capture" in e["notes"] and "--counters" in e["notes"]


def test_a_static_cache_written_by_an_inductor_kernel_bounds_the_attention():
    # qwen2moe_compile_grouped: index_copy_ fused by inductor writes one token a step into a [32, 16, 2048, 128]
    # cache (its cpu_op's arguments and numel); the SDPA reads all 2048 slots, the filled ones are the workload's
    # isl + osl / 2 (no prompt write in the window: said so)
    from compiled_corpus import config, events, meta

    case = "qwen2moe_compile_grouped"
    art, cfg, m = cli_artifact(case), config(case), meta(case)
    w = next(e for e in events(case) if e.get("cat") == "cpu_op" and e["name"].startswith("triton_")
             and "index_copy" in e["name"] and [32, 16, 2048, 128] in e["args"]["Input Dims"])
    numel = int([c for c, t in zip(w["args"]["Concrete Inputs"], w["args"]["Input type"]) if t == "Scalar"][-1])
    assert numel == 32 * 16 * 128          # one token per write
    e = next(x for x in art["entries"] if x.get("op_kind") == "attn")
    assert e["shape"]["seq_len"] == 2048
    isl, osl = m["prefill"]["tokens_per_seq"], max(m["decode"]["steps"], 1)
    filled = isl + osl / 2
    hkv, d = cfg["num_key_value_heads"], cfg["hidden_size"] // cfg["num_attention_heads"]
    want = 32 * filled * hkv * d * 2 * 2
    assert abs(e["bytes_necessary"] / want - 1) < 1e-9
    assert any("index_copy fused" in x and "not from the trace" in x for x in e["necessary_evidence"])
    assert e["avoidable_gain_pct"] > 0.7 * e["regime_pct_gpu_time"]
