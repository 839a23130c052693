"""The real-model corpus (fixtures/corpus/: Hugging Face transformers models traced on the H200, with
ncu counters of one step) through the CLI, each finding checked against an independent count:
the trace parsed here with json, the model config, and ncu's DRAM bytes."""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "fixtures" / "corpus"
META = json.loads((CORPUS / "corpus_meta.json").read_text())["cases"]
NCU = json.load(gzip.open(CORPUS / "ncu_rows.json.gz"))["rows"]


def analyse(case: str, tmp: Path) -> tuple[dict, dict]:
    m = META[case]
    d, p = m["decode"], m["prefill"]
    rd = tmp / case / "profile" / "round_1"
    topn = rd / "profile_topN.json"
    r = subprocess.run([sys.executable, "-m", "roofline.cli", "topn", str(CORPUS / f"{case}.json.gz"), "-o", str(topn),
                        "--isl", str(p["tokens_per_seq"]), "--osl", str(max(d["steps"], 1)),
                        "--conc", str(d["batch"] if d["steps"] else p["batch"]),
                        "--config", str(CORPUS / "configs" / f"{case}.json")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, "-m", "roofline.cli", "analyze", str(topn)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return json.loads(topn.read_text()), json.loads((rd / "profile_roofline.json").read_text())


def ncu_mean_bytes(case: str, regime: str, function: str) -> float:
    rows = [r for r in NCU if r["case"] == case and r["regime"] == regime and r["function"] == function]
    assert rows
    return sum(r["dram__bytes_read.sum"] + r["dram__bytes_write.sum"] for r in rows) / len(rows)


def test_grouped_mm_head_gets_its_shapes_and_bytes_match_ncu(tmp_path):
    """Qwen3-MoE, transformers' grouped_mm backend: the CUTLASS grouped GEMM launched by
    aten::_grouped_mm is shaped from its recorded operands (pairs = batch x top_k rows, E experts,
    N x K from the expert weights), and its decode bytes per launch agree with ncu's DRAM bytes."""
    _, art = analyse("qwen3moe_grouped_mm", tmp_path)
    cfg = json.loads((CORPUS / "configs" / "qwen3moe_grouped_mm.json").read_text())
    dec = next(v for x in art["entries"] if x["op_class"] == "moe" for v in (x.get("regime_verdicts") or [x])
               if v["regime"] == "decode")
    shapes = {(u["shape"]["N"], u["shape"]["K"]) for u in dec["shapes_used"]}
    h, i = cfg["hidden_size"], cfg["moe_intermediate_size"]
    assert shapes == {(2 * i, h), (h, i)}                     # gate_up and down, from the weights
    assert {u["shape"]["pairs"] for u in dec["shapes_used"]} == {64 * cfg["num_experts_per_tok"]}
    assert dec["headroom_class"] != "unknown" and not dec["suspect"]
    measured = ncu_mean_bytes("qwen3moe_grouped_mm", "decode", "device_kernel")
    # the head of the run: the largest entry, a memory-bound moderate verdict near 60% of the roof
    assert art["ranking_by_pct"][0] == art["entries"][0]["name"] and art["entries"][0]["op_class"] == "moe"
    assert dec["bound_type"] == "memory" and 0.5 < dec["roofline_pct"] < 0.7
    assert dec["bytes_est"] == pytest.approx(measured, rel=0.15)


def test_a_gemm_in_both_regimes_gains_only_on_its_regimes_share(tmp_path):
    """The fp8 _scaled_mm kernel runs decode (M=64) and prefill (M=8192): each regime has its own
    verdict, and each gain is at most that regime's share of the GPU time, counted from the trace."""
    topn, art = analyse("llama_fp8_prefill_decode", tmp_path)
    e = next(x for x in art["entries"] if "qqtst" in x["name"])
    vs = {v["regime"]: v for v in e["regime_verdicts"]}
    assert set(vs) == {"decode", "prefill"} and e["regime"] == "prefill"
    ev = json.load(gzip.open(CORPUS / "llama_fp8_prefill_decode.json.gz"))["traceEvents"]
    ranges = [x for x in ev if x.get("cat") == "gpu_user_annotation" and x["name"] == "decode_step"]
    ks = [x for x in ev if x.get("cat") == "kernel"]
    dec_us = sum(k["dur"] for k in ks if k["name"] == e["name"]
                 and any(r["ts"] <= k["ts"] <= r["ts"] + r["dur"] for r in ranges))
    total_us = sum(k["dur"] for k in ks)
    share = 100 * dec_us / total_us
    assert vs["decode"]["regime_pct_gpu_time"] == pytest.approx(share, rel=0.02)
    for v in vs.values():
        assert v["expected_e2e_gain_pct"] is None or v["expected_e2e_gain_pct"] <= v["regime_pct_gpu_time"]


def test_regime_from_shapes_without_step_ranges(tmp_path):
    """A 16384-token prefill traced without step ranges is read as prefill (attention q_len 4096),
    and the artifact says it was inferred."""
    topn, art = analyse("llama_prefill_noranges", tmp_path)
    assert topn["serving"]["n_prefill_steps"] == 1 and topn["serving"]["n_decode_steps"] == 0
    assert all(e["regime"] == "prefill" for e in art["entries"])
    assert all("inferred from the shapes" in e["notes"] for e in art["entries"] if e["modeled"])


def test_expanded_view_copy_counts_distinct_elements(tmp_path):
    """transformers' repeat_kv copies K/V from 8 kv heads to 32 query heads through an expanded
    view: the copy reads a quarter of what it writes (Input Strides), as ncu measures."""
    _, art = analyse("llama_graph_decode", tmp_path)
    e = next(x for x in art["entries"] if "direct_copy" in x["name"])
    sh = e["shape"]
    assert sh["elems_out"] == 4 * sh["elems_in"]
    rows = [r for r in NCU if r["case"] == "llama_graph_decode" and "direct_copy" in r["name"]
            and r["dram__bytes_write.sum"] > 1e8]
    measured = sum(r["dram__bytes_read.sum"] + r["dram__bytes_write.sum"] for r in rows) / len(rows)
    assert e["bytes_est"] == pytest.approx(measured, rel=0.15)


def test_the_recorded_corpus_reruns_say_what_their_numbers_say():
    """fixtures/rerun_corpus (H200): the grouped and fp8 heads re-ran on the grouped / fp8 levels
    beside the library op; the stage-C figures agree with independent counts."""
    R = ROOT / "fixtures" / "rerun_corpus"
    moe = json.loads((R / "qwen3moe_grouped_mm" / "profile" / "round_1" / "profile_roofline.json").read_text())
    dec = next(e for e in moe["entries"] if e["regime"] == "decode" and e["op_class"] == "moe")
    m = dec["measured"]
    assert m["library"] == "torch._grouped_mm" and m["ladder_level"] == 12
    rt = m["routing"][0]
    E, rows = 128, 64 * 8
    assert rt["experts_hit_model"] == pytest.approx(E * (1 - (1 - 1 / E) ** rows))
    assert 0 < rt["experts_hit_drawn"] <= E and str(rows) in rt["rule"]
    assert m["ladder_vs_library_speedup"] == pytest.approx(m["cublas_t_ms"] / m["ladder_t_ms"], rel=1e-6)
    # counters of torch._grouped_mm's own kernel on the drawn routing: the measured DRAM bytes are the
    # model's bytes for the experts that routing hit (weights of the hit experts + A + C), counted here
    for e in (x for x in moe["entries"] if x["op_class"] == "moe" and x.get("measured")):
        mm = e["measured"]
        drawn = sum(q["count"] * (q["experts_hit_drawn"] * q["N"] * q["K"] * 2 + q["M"] * (q["K"] + q["N"]) * 2)
                    for q in mm["problems"])
        assert mm["counters"]["launched"] == "torch._grouped_mm" and e["confidence"] == "high"
        assert e["bytes_measured"] == pytest.approx(drawn, rel=0.01)
    fp8 = json.loads((R / "llama_fp8_prefill_decode" / "profile" / "round_1" / "profile_roofline.json").read_text())
    # the fp8 prefill head: torch._scaled_mm's issued fp8 tensor ops are 2 M N K of its mix, exactly;
    # its DRAM bytes exceed the fewest (A, B once, C once) where K or N is long: the library kernel
    # re-reads operand panels (8192x4096x14336: 3.4x), a lower bound, not a model error
    q8 = next(e for e in fp8["entries"] if "qqtst" in e["name"])
    assert q8["compute_dtype"] == "fp8" and q8["confidence"] == "high"
    assert q8["flops_issued"] == pytest.approx(sum(q["count"] * 2 * q["M"] * q["N"] * q["K"]
                                                   for q in q8["measured"]["problems"]), rel=1e-9)
    big = [p for p in q8["measured"]["counters"]["per_problem"] if p["K"] >= 14336]
    assert big and all(p["dram_bytes"] > 3 * (p["M"] * p["K"] + p["N"] * p["K"] + 2 * p["M"] * p["N"]) for p in big)
    lm = next(e for e in fp8["entries"] if e.get("bytes_measured") and "qqtst" not in e["name"])
    p = lm["measured"]["counters"]["per_problem"][0]
    fewest = 2 * (p["M"] * p["K"] + p["K"] * p["N"] + p["M"] * p["N"])          # bf16 A + B + C once
    assert lm["bytes_measured"] == p["dram_bytes"] and lm["confidence"] == "high"
    assert lm["bytes_measured"] == pytest.approx(fewest, rel=0.02)
    assert next(e for e in fp8["entries"] if "qqtst" in e["name"])["measured"]["library"] == "torch._scaled_mm"


def test_levers_come_from_the_launch_stream_on_a_real_decode(tmp_path):
    """decode_b64_cat (a batch-64 decode whose KV cache grows by torch.cat): the cat gets the
    stop-copying lever, and a fusion lever names only kernels launched next to its head (counted
    here from the trace's own launch order)."""
    src = ROOT / "fixtures" / "traces_real" / "decode_b64_cat.json.gz"
    rd = tmp_path / "profile" / "round_1"
    r = subprocess.run([sys.executable, "-m", "roofline.cli", "topn", str(src), "-o", str(rd / "profile_topN.json"),
                        "--isl", "1024", "--osl", "8", "--conc", "64"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, "-m", "roofline.cli", "analyze", str(rd / "profile_topN.json")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    art = json.loads((rd / "profile_roofline.json").read_text())
    cat = next(e for e in art["entries"] if "CatArrayBatchedCopy" in e["name"])
    assert any(lv.startswith("stop copying the cache") for lv in cat["byte_reduction_levers"] + cat["other_levers"])
    ev = json.load(gzip.open(src))["traceEvents"]
    seq = [k["name"] for k in sorted((x for x in ev if x.get("cat") == "kernel"), key=lambda x: x["ts"])]
    for e in art["entries"]:
        adj = {b for a, b in zip(seq, seq[1:]) if a == e["name"]} | {a for a, b in zip(seq, seq[1:]) if b == e["name"]}
        short = {x["short_name"]: x["name"] for x in art["entries"]}
        for lv in e["byte_reduction_levers"]:
            if lv.startswith("fuse ") and not lv.startswith("fuse:"):
                named = lv[len("fuse "):].split(" (")[0]
                topn = json.loads((rd / "profile_topN.json").read_text())
                full = next(t["name"] for t in topn["entries"] if t.get("short_name") == named) \
                    if named not in short else short[named]
                assert full in adj, (e["short_name"], named)


def test_beside_the_peer_on_the_corpus(tmp_path):
    """TraceLens (fixtures/peer/tracelens_corpus_*.csv) beside roofline on the corpus:
    - aten::_scaled_mm (rowwise fp8): the peer's bytes and FLOPs per op equal roofline's per-shape
      bytes and FLOPs exactly (both count A and B once at 1 byte, C once at 2 bytes, 2MNK);
    - aten::_grouped_mm: the peer has no perf model (no bytes); roofline models it, and ncu's DRAM
      bytes agree with roofline within 15% (test_grouped_mm_head_gets_its_shapes_and_bytes_match_ncu)."""
    import csv

    peer = list(csv.DictReader(open(ROOT / "fixtures" / "peer" / "tracelens_corpus_llama_fp8_prefill_decode.csv")))
    _, art = analyse("llama_fp8_prefill_decode", tmp_path)
    e = next(x for x in art["entries"] if "qqtst" in x["name"])
    ours = {}
    for v in e["regime_verdicts"]:
        for r in v["per_shape"]:
            sh = r["shape"]
            ours[(sh["M"], sh["N"], sh["K"])] = (r["bytes_est"], r["flops_est"])
    seen = 0
    for r in peer:
        if r["op"] != "aten::_scaled_mm":
            continue
        d = json.loads(r["input_dims"])
        key = (d[0][0], d[1][1], d[0][1])
        assert key in ours, key
        assert float(r["bytes_per_op"]) == ours[key][0] and float(r["flops_per_op"]) == ours[key][1]
        seen += 1
    assert seen == len(ours) == 8
    for case in ("qwen3moe_grouped_mm", "deepseekv3_mla_moe"):
        rows = [r for r in csv.DictReader(open(ROOT / "fixtures" / "peer" / f"tracelens_corpus_{case}.csv"))
                if r["op"] == "aten::_grouped_mm"]
        assert rows and all(r["peer_model"] == "none" and not r["bytes_per_op"] for r in rows)


def test_a_grouped_head_reruns_its_launch_weighted_mix():
    """The Qwen3-MoE grouped-GEMM head runs gate_up and down under one kernel name: the stage-C
    re-run times both, weighted by their launches as the analysis weighs them (not the first only)."""
    from roofline.core.opclasses import gemm_problems

    R = ROOT / "fixtures" / "rerun_corpus" / "qwen3moe_grouped_mm" / "profile" / "round_1"
    art = json.loads((R / "stage_b_roofline.json").read_text())
    e = next(x for x in art["entries"] if x["op_class"] == "moe" and x["regime"] == "decode")
    probs = gemm_problems(e)
    assert [(p.M, p.N, p.K) for p in probs] == [(u["shape"]["pairs"], u["shape"]["N"], u["shape"]["K"])
                                                for u in e["shapes_used"]]
    assert [p.count for p in probs] == [u["weight"] for u in e["shapes_used"]] and sum(p.count for p in probs) == 1.0
    assert all(p.E == 128 and p.grouped for p in probs)
