"""Is the work necessary? (issue 31) on the corpus's second round (fixtures/corpus, recorded on the H200
2026-12-03: Qwen3 on a static cache with eager and SDPA attention, gpt-oss eager with sinks, Gemma-3
sliding window, Llama-3B with a cat-grown cache, an fp8 grouped MoE with ncu counters), end to end
through the CLI (topn + analyze), every number checked against an independent count from the trace
(parsed here with json), config.json, corpus_meta.json and the ncu rows."""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from test_corpus import CORPUS, META, NCU, analyse

BF16 = 2


def _events(case: str) -> list[dict]:
    return json.load(gzip.open(CORPUS / f"{case}.json.gz"))["traceEvents"]


def _ops(case: str, name: str) -> list[dict]:
    return [e["args"] for e in _events(case) if e.get("cat") == "cpu_op" and e["name"] == name]


def _cfg(case: str) -> dict:
    return json.loads((CORPUS / "configs" / f"{case}.json").read_text())


def _decode(art: dict, pred) -> dict:
    return next(v for x in art["entries"] for v in (x.get("regime_verdicts") or [x]) if v["regime"] == "decode" and pred(v))


def _broadcast_copies(case: str) -> dict[str, int]:
    """The trace's repeat_kv: each aten::copy_ whose source has a stride-0 dim of size > 1 ->
    {source dims 'AxBx..': n_rep}."""
    out = {}
    for a in _ops(case, "aten::copy_"):
        src, st = a["Input Dims"][1], a["Input Strides"][1] or []
        rep = [n for n, s in zip(src, st) if s == 0 and n > 1]
        if rep:
            out["x".join(map(str, src))] = rep[0]
    assert out, "no broadcast copy in the trace"
    return out


def _check_copy_need_not_run(art: dict, case: str) -> dict:
    cp = _decode(art, lambda e: "direct_copy" in e["name"] and e.get("bytes_necessary") == 0)
    copies = _broadcast_copies(case)
    cfg = _cfg(case)
    assert set(copies.values()) == {cfg["num_attention_heads"] // cfg["num_key_value_heads"]}   # the config's GQA ratio
    assert cp["avoidable_gain_pct"] == pytest.approx(cp["regime_pct_gpu_time"], rel=1e-9)
    assert cp["route"] == "byte_reduction"
    lv = next(d for d in cp["levers_detail"] if d["kind"] == "materialised_broadcast")
    src = next(k for k in copies if f"from a {k} view" in lv["evidence"])
    assert "stride 0" in lv["evidence"] and f"writes {copies[src]}x" in lv["evidence"]
    assert lv["saves_pct"] == pytest.approx(cp["avoidable_gain_pct"])
    return cp


def test_static_cache_eager_attention_copy_and_matmuls(tmp_path):
    """qwen3_static_eager: 24 sequences on a StaticCache of 2816 slots, 700 filled, 40 q heads over 8 KV
    heads. repeat_kv's copy need not run (bytes_necessary 0, its whole share avoidable); the eager
    QK^T and PV batched matmuls read 40 heads x 2816 slots where the result needs the 8 KV heads
    over the ~702 filled slots: bytes_necessary within 15% of that count, made here."""
    _, art = analyse("qwen3_static_eager", tmp_path)
    case, cfg, m = "qwen3_static_eager", _cfg("qwen3_static_eager"), META["qwen3_static_eager"]
    cp = _check_copy_need_not_run(art, case)
    assert cp["headroom_class"] != "saturated" and cp["avoidable_gain_pct"] > cp["expected_e2e_gain_pct"]
    b, hq, hk, d = m["decode"]["batch"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    slots = m["options"]["static"]
    filled = m["decode"]["context_start"] + (m["decode"]["steps"] + 1) / 2
    # the trace's bmm of the attention: [b*hq, 1, d] x [b*hq, d, slots] and [b*hq, 1, slots] x [b*hq, slots, d]
    bmm = {json.dumps(a["Input Dims"]) for a in _ops(case, "aten::bmm")}
    assert json.dumps([[b * hq, 1, d], [b * hq, d, slots]]) in bmm and json.dumps([[b * hq, 1, slots], [b * hq, slots, d]]) in bmm
    mm = [v for x in art["entries"] for v in (x.get("regime_verdicts") or [x])
          if v["op_class"] == "gemm" and (v.get("shape") or {}).get("batch") == b * hq]
    assert {(v["shape"]["N"], v["shape"]["K"]) for v in mm} == {(slots, d), (d, slots)}
    for v in mm:
        assert v["bytes_est"] == pytest.approx(b * hq * slots * d * BF16, rel=0.02)        # all slots of 40 heads moved
        assert v["bytes_necessary"] == pytest.approx(b * hk * filled * d * BF16, rel=0.15)  # the filled KV heads
        assert v["avoidable_gain_pct"] == pytest.approx(
            v["regime_pct_gpu_time"] * (1 - v["bytes_necessary"] / v["bytes_est"]), rel=0.05)
        assert v["route"] == "byte_reduction"
        lv = next(d_ for d_ in v["levers_detail"] if d_["kind"] == "kv_heads_broadcast+empty_slots")
        assert f"{b} sequences x {hq} heads" in lv["evidence"] and f"holds {hk} KV heads" in lv["evidence"]
        assert f"{slots}-slot cache" in lv["evidence"] and f"isl {m['prefill']['tokens_per_seq']}" in lv["evidence"]
    assert art["ranking_by_larger_gain"][0] == cp["name"]


def test_static_cache_sdpa_reads_the_filled_kv_heads(tmp_path):
    """qwen3_static_sdpa: the same cache under SDPA (transformers still runs repeat_kv): the copy need
    not run; the cuDNN attention's bytes_necessary is K and V of the 8 KV heads over the filled slots."""
    _, art = analyse("qwen3_static_sdpa", tmp_path)
    cfg, m = _cfg("qwen3_static_sdpa"), META["qwen3_static_sdpa"]
    _check_copy_need_not_run(art, "qwen3_static_sdpa")
    at = _decode(art, lambda e: e["op_class"] == "attn")
    sd = [a["Input Dims"] for a in _ops("qwen3_static_sdpa", "aten::scaled_dot_product_attention")]
    assert sd and all(x[1][1] == cfg["num_attention_heads"] and x[1][2] == m["options"]["static"] for x in sd)
    filled = m["decode"]["context_start"] + (m["decode"]["steps"] + 1) / 2
    fewest = m["decode"]["batch"] * cfg["num_key_value_heads"] * filled * cfg["head_dim"] * 2 * BF16   # K and V
    assert at["bytes_necessary"] == pytest.approx(fewest, rel=0.15)
    assert at["route"] == "byte_reduction" and at["avoidable_gain_pct"] > at["expected_e2e_gain_pct"]


def test_gptoss_broadcast_copy_and_sinks_are_no_cache(tmp_path):
    """gpt-oss eager: 64 q heads over 8 KV heads, attention sinks joined to the logits with a cat along
    the LAST dim. The repeat_kv copy (8x) need not run; the sinks cat (logits + one column, growing
    with the context) is no KV cache: no cache record, no cache lever on it."""
    topn, art = analyse("gptoss_eager", tmp_path)
    _check_copy_need_not_run(art, "gptoss_eager")
    cfg = _cfg("gptoss_eager")
    sinks = [a["Input Dims"][0] for a in _ops("gptoss_eager", "aten::cat")
             if a["Concrete Inputs"][1] == "-1" and len(a["Input Dims"][0]) == 2 and a["Input Dims"][0][1][-1] == 1
             and a["Input Dims"][0][0][1] == cfg["num_attention_heads"]]
    assert len({x[0][-1] for x in sinks}) >= 3                # the logits' length grows step by step
    recs = topn["trace_evidence"]["kv_caches"]
    assert recs and all(r["dims"][1] == cfg["num_key_value_heads"] and r["dims"][3] == cfg["head_dim"] for r in recs)
    token = META["gptoss_eager"]["decode"]["batch"] * cfg["num_key_value_heads"] * cfg["head_dim"]
    n = 0
    for x in art["entries"]:
        for v in x.get("regime_verdicts") or [x]:
            for d in v.get("levers_detail") or []:
                if d["kind"] in ("cache_append", "cache_window"):
                    n += 1
                    # one K (or V) token of the cache appended, never a sinks column (batch x heads x 1)
                    assert f"+{token} appended" in d["evidence"] or f"appends {token} elements" in d["evidence"], d
    assert n >= 1


def test_sliding_window_re_copied_beside_the_growing_global_layer(tmp_path):
    """Gemma-3 eager, 3 sliding (1024) + 1 global layer: the sliding layers' cat re-copies a constant
    window of 1023 in every decode step (3 layers x K,V x 5 steps = 30 launches, from the config);
    the global layer's cat grows one token per step. The window lever says so; the cache records
    keep the two apart."""
    topn, art = analyse("gemma3_swa_eager", tmp_path)
    cfg, m = _cfg("gemma3_swa_eager"), META["gemma3_swa_eager"]["decode"]
    n_sliding = sum(t == "sliding_attention" for t in cfg["layer_types"])
    cats = [a["Input Dims"][0] for a in _ops("gemma3_swa_eager", "aten::cat") if a["Concrete Inputs"][1] == "-2"
            and len(a["Input Dims"][0]) == 2 and len(a["Input Dims"][0][0]) == 4 and a["Input Dims"][0][1][2] == 1]
    window = [c for c in cats if c[0][2] == cfg["sliding_window"] - 1]
    grown = sorted({c[0][2] for c in cats if c[0][2] >= m["context_start"]})
    assert len(window) == n_sliding * 2 * m["steps"]
    assert grown == list(range(m["context_start"], m["context_start"] + m["steps"]))
    recs = {r["slots"]: r for r in topn["trace_evidence"]["kv_caches"]}
    assert recs[cfg["sliding_window"]]["tokens_written"] == {"1": len(window)}
    assert all(g + 1 in recs for g in grown)
    cat = _decode(art, lambda e: e["name"].endswith("CatArrayBatchedCopy") or "CatArrayBatchedCopy<" in e["name"])
    lv = next(d for d in cat["levers_detail"] if d["kind"] == "cache_window")
    assert f"constant window of {cfg['sliding_window'] - 1}" in lv["evidence"]
    assert f"each of the {m['steps']} decode steps ({len(window)} launches)" in lv["evidence"]
    token = m["batch"] * cfg["num_key_value_heads"] * cfg["head_dim"]
    assert f"+{token} appended elements" in lv["evidence"]
    assert cat["route"] == "byte_reduction" and cat["headroom_class"] != "saturated"
    assert lv["saves_pct"] == pytest.approx(cat["avoidable_gain_pct"])
    _check_copy_need_not_run(art, "gemma3_swa_eager")


def test_cat_grown_cache_seen_step_by_step(tmp_path):
    """Llama-3B, DynamicCache grown by torch.cat over 10 decode steps from 1536 tokens: the cat re-copies
    the cache each step (its kept length grows by one per step, counted from the trace); necessary:
    the new token's K (or V) read and written once. SDPA reads the 8 KV heads in place (no repeat_kv):
    nothing of it is avoidable (the mechanism finds no saving that is not there)."""
    _, art = analyse("llama3b_cat_decode", tmp_path)
    cfg, m = _cfg("llama3b_cat_decode"), META["llama3b_cat_decode"]["decode"]
    kept = sorted({a["Input Dims"][0][0][2] for a in _ops("llama3b_cat_decode", "aten::cat")
                   if a["Concrete Inputs"][1] == "-2" and len(a["Input Dims"][0]) == 2 and len(a["Input Dims"][0][0]) == 4 and a["Input Dims"][0][1][2] == 1})
    assert kept == list(range(m["context_start"], m["context_start"] + m["steps"]))
    cat = _decode(art, lambda e: "CatArray" in e["name"])
    token = m["batch"] * cfg["num_key_value_heads"] * cfg["head_dim"]
    assert cat["bytes_necessary"] == pytest.approx(token * 2 * BF16, rel=1e-9)
    lv = next(d for d in cat["levers_detail"] if d["kind"] == "cache_append")
    assert f"({kept[0]} -> {kept[-1]} over {len(kept)} shapes)" in lv["evidence"] and "grows by 1 per step" in lv["evidence"]
    assert cat["avoidable_gain_pct"] == pytest.approx(cat["regime_pct_gpu_time"] * (1 - cat["bytes_necessary"] / cat["bytes_est"]),
                                                      rel=0.02)
    assert cat["route"] == "byte_reduction"
    sd = _ops("llama3b_cat_decode", "aten::scaled_dot_product_attention")
    assert all(a["Input Dims"][1][1] == cfg["num_key_value_heads"] for a in sd)
    at = _decode(art, lambda e: e["op_class"] == "attn")
    assert at["bytes_necessary"] == pytest.approx(at["bytes_est"], rel=1e-9) and at["avoidable_gain_pct"] == 0


def _ncu_page(tmp: Path, regime: str) -> Path:
    p = tmp / f"fp8_{regime}.csv"
    p.write_bytes(gzip.open(CORPUS / "ncu" / f"qwen3moe_fp8_grouped__{regime}.csv.gz").read())
    return p


@pytest.mark.parametrize("regime", ["decode", "prefill"])
def test_fp8_grouped_gemm_issued_vs_useful_work_names_the_padding(tmp_path, regime):
    """The fp8 MoE's torch._scaled_grouped_mm (a CUTLASS kernel whose mangled name the demangler
    refuses, matched to ncu's readable one by its identifiers), analysed with the ncu page of one
    step: issued tensor FLOPs (ncu sm__ops_path_tensor_src_fp8, averaged here from the rows) vs the
    useful 2 x rows x N x K (rows = tokens x top_k, N x K of gate_up and down from the config), and
    the padding lever with that ratio."""
    topn, _ = analyse("qwen3moe_fp8_grouped", tmp_path)
    topn_p = next(tmp_path.rglob("profile_topN.json"))
    r = subprocess.run([sys.executable, "-m", "roofline.cli", "analyze", str(topn_p), "--counters",
                        str(_ncu_page(tmp_path, regime)), "--no-write", "--format", "json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    art = json.loads(r.stdout)
    cfg, m = _cfg("qwen3moe_fp8_grouped"), META["qwen3moe_fp8_grouped"]
    rows = (m["decode"]["batch"] if regime == "decode" else m["prefill"]["batch"] * m["prefill"]["tokens_per_seq"]) \
        * cfg["num_experts_per_tok"]
    h, i = cfg["hidden_size"], cfg["moe_intermediate_size"]
    useful = (2 * rows * 2 * i * h + 2 * rows * h * i) / 2           # gate_up and down, one launch each per layer
    ncu = [x for x in NCU if x["case"] == "qwen3moe_fp8_grouped" and x["regime"] == regime and x["function"] == "device_kernel"]
    issued = sum(x["sm__ops_path_tensor_src_fp8.sum"] for x in ncu) / len(ncu)
    e = next(v for x in art["entries"] for v in (x.get("regime_verdicts") or [x]) if v["op_class"] == "moe"
             and v["regime"] == regime)
    other = [v for x in art["entries"] for v in (x.get("regime_verdicts") or [x]) if v["op_class"] == "moe"
             and v["regime"] != regime]
    assert all(not v.get("counters") for v in other)          # the other regime's instantiation got none
    assert e["flops_useful"] == pytest.approx(useful, rel=1e-9)
    assert e["flops_issued"] == pytest.approx(issued, rel=1e-9)
    assert e["padding_waste_ratio"] == pytest.approx(issued / useful, rel=1e-9)
    lv = next(d for d in e["levers_detail"] if d["kind"] == "padding")
    assert f"issued {issued / useful:.2f}x the useful FLOPs" in lv["text"]
    assert f"about {rows / cfg['num_local_experts']:.1f} rows per expert" in lv["evidence"]
    assert (lv["saves_pct"] == 0) == (e["bound_type"] != "compute")


def test_a_window_and_a_growing_cache_in_one_kernel_are_told_apart():
    """stream.growth_run on the kept lengths of every cache cat of the Gemma-3 trace (the sliding layers'
    constant 1023 and the global layer's 1792, 1793, ... as if one kernel launched both): the growth
    is the global layer's run, the window is no part of it."""
    from roofline.core.opclasses.stream import growth_run

    m = META["gemma3_swa_eager"]["decode"]
    kept = sorted({a["Input Dims"][0][0][2] for a in _ops("gemma3_swa_eager", "aten::cat") if a["Concrete Inputs"][1] == "-2"
                   and len(a["Input Dims"][0]) == 2 and len(a["Input Dims"][0][0]) == 4 and a["Input Dims"][0][1][2] == 1})
    window = _cfg("gemma3_swa_eager")["sliding_window"] - 1
    assert kept[0] == window and len(kept) == 1 + m["steps"]
    assert growth_run(kept, window) is None
    assert growth_run(kept, kept[2]) == list(range(m["context_start"], m["context_start"] + m["steps"]))
