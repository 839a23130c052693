"""Is the work necessary? (issue 31; docs/method.md section 12): bytes_necessary, avoidable_gain_pct,
the route by the larger gain and levers with their evidence, through the CLI on the real-model corpus
(fixtures/corpus: Hugging Face transformers on the H200), each number checked against an independent
count from the trace (parsed here with json) and config.json."""
from __future__ import annotations

import gzip
import json
import math
import re
from pathlib import Path

import pytest

from test_corpus import CORPUS, META, analyse

ROOT = Path(__file__).resolve().parents[1]


def _events(case: str) -> list[dict]:
    return json.load(gzip.open(CORPUS / f"{case}.json.gz"))["traceEvents"]


def _cfg(case: str) -> dict:
    return json.loads((CORPUS / "configs" / f"{case}.json").read_text())


def _entry(art: dict, pred) -> dict:
    return next(e for e in art["entries"] if pred(e))


def test_static_cache_decode_broadcast_copy_need_not_run_and_attention_reads_the_filled_kv_heads(tmp_path):
    """llama_graph_decode: a StaticCache of 576 slots (written by index_copy_ one token at a time), 512
    filled before 6 decode steps; transformers' repeat_kv materialises the 8 KV heads as 32 with a copy
    (its source has stride 0 on the n_rep dim), then SDPA reads all 576 slots of 32 heads.
    - the copy: bytes_necessary 0, avoidable_gain_pct = its whole regime share, route byte_reduction
      (it is underperforming: tuning alone would route it to the kernel track), a lever naming the
      materialised broadcast with the stride-0 evidence;
    - the attention: bytes_necessary within 15% of the filled slots of the 8 KV heads, counted here."""
    _, art = analyse("llama_graph_decode", tmp_path)
    cp = _entry(art, lambda e: "direct_copy" in e["name"])
    # independent: the trace has an aten::copy_ whose source has a stride-0 dim, writing 4x what it reads
    ev = _events("llama_graph_decode")
    bc = [e["args"] for e in ev if e.get("cat") == "cpu_op" and e["name"] == "aten::copy_"
          and 0 in (e["args"]["Input Strides"][1] or [])]
    assert bc, "the trace's repeat_kv copy"
    src_dims, src_strides = bc[0]["Input Dims"][1], bc[0]["Input Strides"][1]
    assert cp["bytes_necessary"] == 0
    assert cp["avoidable_gain_pct"] == pytest.approx(cp["regime_pct_gpu_time"], rel=1e-9)
    assert cp["avoidable_gain_pct"] > cp["expected_e2e_gain_pct"] and cp["headroom_class"] == "underperforming"
    assert cp["route"] == "byte_reduction"
    lv = [d for d in cp["levers_detail"] if d["kind"] == "materialised_broadcast"]
    assert len(lv) == 1 and "broadcast" in lv[0]["text"]
    assert "x".join(map(str, src_dims)) in lv[0]["evidence"] and "stride 0" in lv[0]["evidence"]
    assert lv[0]["evidence"].endswith("materialising a broadcast")
    stride0 = ",".join(str(i) for i, (n, s) in enumerate(zip(src_dims, src_strides)) if s == 0 and n > 1)
    assert f"dim {stride0}" in lv[0]["evidence"]
    assert lv[0]["saves_pct"] == pytest.approx(cp["avoidable_gain_pct"])
    # the attention: filled slots of the KV heads, counted from the config and the run's own record
    at = _entry(art, lambda e: e["op_class"] == "attn" and e["regime"] == "decode")
    cfg, m = _cfg("llama_graph_decode"), META["llama_graph_decode"]["decode"]
    d = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    filled = m["context_start"] + (m["steps"] + 1) / 2          # the mean over the profiled decode steps
    fewest = m["batch"] * filled * cfg["num_key_value_heads"] * d * 2 * 2     # K and V, bf16
    assert at["bytes_necessary"] == pytest.approx(fewest, rel=0.15)
    assert at["bytes_est"] > 3.5 * at["bytes_necessary"]           # 32 heads x 576 slots moved
    kinds = {d["kind"] for d in at["levers_detail"]}
    assert "kv_heads_broadcast+empty_slots" in kinds
    assert any("index_copy_" in x for x in at["necessary_evidence"])
    assert at["route"] == "byte_reduction" and at["avoidable_gain_pct"] > at["expected_e2e_gain_pct"]
    # the seed's two rankings are unchanged; the third puts the copy first
    assert art["ranking_by_larger_gain"][0] == cp["name"]
    assert set(art["ranking_by_larger_gain"]) == set(art["ranking_by_pct"])


def test_a_cat_grown_cache_needs_only_the_new_token(tmp_path):
    """llama_prefill_decode: the DynamicCache appends with torch.cat, so each decode step re-copies the
    whole cache (the kept input grows by one token per step). Necessary: the new token's K (or V), read
    and written once; the avoidable part is nearly all of the kernel's time."""
    _, art = analyse("llama_prefill_decode", tmp_path)
    cat = _entry(art, lambda e: "CatArray" in e["name"] and e["regime"] == "decode")
    ev = _events("llama_prefill_decode")
    kept = sorted({e["args"]["Input Dims"][0][0][2] for e in ev if e.get("cat") == "cpu_op" and e["name"] == "aten::cat"
                   and len(e["args"]["Input Dims"][0]) == 2 and len(e["args"]["Input Dims"][0][0]) == 4
                   and e["args"]["Input Dims"][0][1][2] == 1 and e["args"]["Input Dims"][0][0][2] > 1})
    assert len(kept) >= 3 and all(b - a == 1 for a, b in zip(kept, kept[1:]))      # grows one token per step
    cfg, m = _cfg("llama_prefill_decode"), META["llama_prefill_decode"]["decode"]
    token = m["batch"] * cfg["num_key_value_heads"] * cfg["head_dim"]               # one token of K (or V)
    assert cat["bytes_necessary"] == pytest.approx(token * 2 * 2, rel=1e-9)           # read + write, bf16
    lv = next(d for d in cat["levers_detail"] if d["kind"] == "cache_append")
    assert lv["text"].startswith("stop copying the cache") and f"{kept[0]} -> {kept[-1]}" in lv["evidence"]
    assert cat["avoidable_gain_pct"] == pytest.approx(cat["regime_pct_gpu_time"] * (1 - cat["bytes_necessary"] /
                                                                                    cat["bytes_est"]), rel=0.02)
    assert cat["avoidable_gain_pct"] > 10 * cat["expected_e2e_gain_pct"]


def test_a_sliding_window_re_copied_every_step_and_an_unsaturated_copy_route(tmp_path):
    """mistral_swa: the sliding-window cache re-copies a constant window of 1023 tokens (+1) with
    torch.cat in every decode step; the lever says a constant window is re-copied (the kernel is far
    from saturated: the lever comes from the evidence, not from the headroom class)."""
    _, art = analyse("mistral_swa", tmp_path)
    cat = _entry(art, lambda e: "CatArray" in e["name"])
    ev = _events("mistral_swa")
    win = {tuple(e["args"]["Input Dims"][0][0]) for e in ev if e.get("cat") == "cpu_op" and e["name"] == "aten::cat"
           and len(e["args"]["Input Dims"][0]) == 2 and len(e["args"]["Input Dims"][0][0]) == 4
           and e["args"]["Input Dims"][0][1][2] == 1 < e["args"]["Input Dims"][0][0][2]}
    assert len(win) == 1 and next(iter(win))[2] == _cfg("mistral_swa")["sliding_window"] - 1
    assert cat["headroom_class"] != "saturated" and cat["route"] == "byte_reduction"
    lv = next(d for d in cat["levers_detail"] if d["kind"] == "cache_window")
    assert "constant window of 1023" in lv["evidence"] and lv["text"] in cat["other_levers"]
    steps = META["mistral_swa"]["decode"]["steps"]
    assert f"each of the {steps} decode steps" in lv["evidence"]


# every kind of lever and what in the trace supports it (test_every_lever_of_the_corpus_has_its_evidence)
MEMORY_KINDS = ("lower_precision_weights", "lower_precision_kv")
NECESSARY_KINDS = ("materialised_broadcast", "reference_path", "materialised_scores", "cache_append", "cache_window", "kv_heads_broadcast", "empty_slots",
                   "kv_heads_broadcast+empty_slots")
CASES = [c for c in sorted(META) if (CORPUS / f"{c}.json.gz").exists()]


def _kernel_seq(ev: list[dict]) -> list[str]:
    return [k["name"] for k in sorted((x for x in ev if x.get("cat") == "kernel"), key=lambda x: x["ts"])]


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_every_lever_of_the_corpus_has_its_evidence(case, tmp_path):
    """Every lever of every corpus artifact, checked against the trace (parsed here):
    - fusion: the partner runs next to the kernel in the launch stream AND the tensor the evidence
      names ([dims]) is an input of one of the two ops;
    - stop copying the cache: the trace's cat of that cache grows step by step or re-copies one window;
    - materialised broadcast: the trace has a copy whose source has a stride-0 dim;
    - memory levers only on memory-bound entries, fp8 math only on compute-bound ones."""
    topn, art = analyse(case, tmp_path)
    ev = _events(case)
    # a split-K reduce folded into its GEMM is half of that op: the GEMM's consumer follows the reduce
    folded = {f["name"] for x in topn["entries"] for f in x.get("folded_kernels") or []}
    seq = [k for k in _kernel_seq(ev) if k not in folded]
    short = {e["name"]: e["short_name"] for e in topn["entries"]}
    ops = [e for e in ev if e.get("cat") == "cpu_op"]
    in_dims = {json.dumps(d) for e in ops for d in (e["args"].get("Input Dims") or [])
               if isinstance(d, list) and d and all(isinstance(v, int) for v in d)}
    n = 0
    for e in [v for x in art["entries"] for v in (x.get("regime_verdicts") or [x])]:
        for d in e.get("levers_detail") or []:
            n += 1
            assert d["evidence"], (case, d)
            if d["kind"] == "fusion" and not d["text"].startswith("fuse: "):
                partner = d["partner"]
                assert d["text"].startswith(f"fuse {short[partner]} ("), (case, d["text"])
                me = e["name"]
                adj = {b for a, b in zip(seq, seq[1:]) if a == me} | {a for a, b in zip(seq, seq[1:]) if b == me}
                assert partner in adj, (case, d["text"])
                dims = json.loads(d["evidence"].split(" writes ")[1].split("]")[0] + "]")
                # the same tensor: read with these dims, or as a view with the same elements and last dim
                assert any(x == dims or (x and math.prod(x) == math.prod(dims) and x[-1] == dims[-1])
                           for x in map(json.loads, in_dims)), (case, dims)
            if d["kind"] in ("cache_append", "cache_window"):
                cats = [x["args"]["Input Dims"][0] for x in ops if x["name"] == "aten::cat"
                        and len(x["args"]["Input Dims"][0]) == 2 and len(x["args"]["Input Dims"][0][0]) == 4]
                kept = {c[0][2] for c in cats if c[1][2] < c[0][2]}
                assert (len(kept) >= 2) if d["kind"] == "cache_append" else (len(kept) >= 1), (case, kept)
            if "kv_heads_broadcast" in d["kind"] and d["evidence"].startswith("batched GEMM"):
                # an eager attention's matmul: the trace has that bmm, its batch = sequences x q heads
                a, b = d["evidence"].split("batched GEMM ")[1].split(" = ")[0].split(" x ")
                B, M, K = json.loads(a)
                N = json.loads(b)[2]
                bmm = [x["args"]["Input Dims"] for x in ops if x["name"] == "aten::bmm"]
                assert [[B, M, K], [B, K, N]] in bmm, (case, d["evidence"])
                cfg = json.loads((CORPUS / "configs" / f"{case}.json").read_text())
                assert f"x {cfg['num_attention_heads']} heads" in d["evidence"], (case, d["evidence"])
            if d["kind"] == "materialised_broadcast":
                assert any(0 in (x["args"]["Input Strides"][1] or []) for x in ops if x["name"] == "aten::copy_")
            if d["kind"] == "reference_path":
                # Mamba2's chunk scan as torch ops: config.json's Mamba2 heads in the evidence, no fused kernel ran
                cfg = json.loads((CORPUS / "configs" / f"{case}.json").read_text())
                assert f"{cfg['mamba_n_heads']} heads" in d["evidence"], (case, d["evidence"])
                assert not any(re.search(r"_chunk_scan_fwd|_chunk_state_fwd|causal_conv1d", k) for k in seq), case
            if d["kind"] == "materialised_scores":
                # an eager attention's score chain: the trace has its QK^T bmm over b x config.json's heads
                cfg = json.loads((CORPUS / "configs" / f"{case}.json").read_text())
                qk = json.loads(d["evidence"].split("written to HBM by the QK^T bmm ")[1].split("]]")[0] + "]]")
                bmm = [x["args"]["Input Dims"] for x in ops if x["name"] == "aten::bmm"]
                assert qk in bmm and qk[0][0] % cfg["num_attention_heads"] == 0, (case, qk)
                assert f"x {cfg['num_attention_heads']} heads" in d["evidence"], (case, d["evidence"])
            if d["kind"] in MEMORY_KINDS:
                assert e["bound_type"] == "memory", (case, e.get("short_name"), d["kind"])
            if d["kind"] == "fp8_math":
                assert e["bound_type"] == "compute", (case, e.get("short_name"))
        nec = [d["saves_pct"] for d in e.get("levers_detail") or [] if d["kind"] in NECESSARY_KINDS]
        if nec and e.get("avoidable_gain_pct") is not None:
            # each avoidable-bytes lever saves its kind's share: together, the whole avoidable gain
            assert sum(nec) == pytest.approx(e["avoidable_gain_pct"], rel=1e-6, abs=1e-9), (case, e["short_name"])
    if n == 0:
        # only a trace whose kernels all ran as CUDA-graph replays (no shapes in the window) may claim no lever
        heads = {x["name"] for x in art["entries"]}
        assert heads and all(x.get("cuda_graph_replayed") for x in topn["entries"] if x["name"] in heads), case
