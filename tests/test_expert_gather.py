"""A batched_mm MoE's per-pair expert-weight gather and its batched GEMM (roofline/ingest/gathers.py,
roofline/core/opclasses/index_gather.py, expert_gather.py) on the real corpus trace qwen3moe_generate_batched_mm
(Qwen3-MoE-shaped, 128 experts, top-8, decode batch 64, transformers' experts_implementation="batched_mm"
at decode; H200, ncu of one decode step). Expected figures are counted here from the trace (json),
config.json, the workload and ncu_rows.json.gz."""
from __future__ import annotations

import pytest

from compiled_corpus import cli_artifact, config, entry, events, meta, ncu_bytes
from roofline.core.opclasses import expert_gather
from roofline.ingest.gathers import resolve_index_outputs
from roofline.ingest.trace_tables import OpSig, ParsedTrace

CASE = "qwen3moe_generate_batched_mm"


def _decode_index_ops():
    """The aten::index cpu_ops under the decode steps' gather kernels, and the bmm operands after them."""
    ev = events(CASE)
    return [e for e in ev if e.get("cat") == "cpu_op" and e["name"] == "aten::index"
            and len(e["args"].get("Input Dims", [[]])[0]) == 3]


def test_the_gather_is_sized_from_its_consumer_and_within_ncu():
    art = cli_artifact(CASE)
    cfg, m = config(CASE), meta(CASE)
    pairs = m["decode"]["batch"] * cfg["num_experts_per_tok"]          # 64 tokens x top-8
    e = entry(art, lambda n: "vectorized_gather_kernel" in n)
    assert e["regime"] == "decode" and e["modeled"]
    sh = e["shape"]
    assert sh["gather_rows"] == pairs and sh["gather_consumer"] == "aten::bmm"
    tables = {tuple(op["args"]["Input Dims"][0]) for op in _decode_index_ops()}
    E, h, mi = cfg["num_local_experts"], cfg["hidden_size"], cfg["moe_intermediate_size"]
    assert tables == {(E, 2 * mi, h), (E, h, mi)}
    # ncu: the step's large gather launches (the gate/up gather is split over two launches: 3.2 GB > 2^31 B)
    meas = [b for b in ncu_bytes(CASE, "decode", lambda n: "vectorized_gather_kernel" in n) if b > 1e8]
    assert len(meas) == 6
    # per launch of the gate/up gather: its half of the pairs written, each expert's rows read once at most
    half = pairs // 2
    w_up = half * 2 * mi * h * 2 + min(half, E) * 2 * mi * h * 2
    w_down = pairs * h * mi * 2 + min(pairs, E) * h * mi * 2
    gate_up = sorted(meas)[-4:]
    down = sorted(meas)[:2]
    assert all(abs(w_up / b - 1) <= 0.15 for b in gate_up)
    assert all(abs(w_down / b - 1) <= 0.15 for b in down)
    # the tool's bytes per launch of each gather shape are those counts
    per = {p["shape"].get("gather_table"): p["bytes_est"] for p in e["per_shape"]}
    assert per[f"{E}x{2 * mi}x{h}"] == pytest.approx(w_up, rel=1e-6)
    assert per[f"{E}x{h}x{mi}"] == pytest.approx(w_down, rel=1e-6)


def test_the_gather_need_not_run_and_the_bmm_needs_each_routed_expert_once():
    art = cli_artifact(CASE)
    cfg, m = config(CASE), meta(CASE)
    E, k, h, mi = cfg["num_local_experts"], cfg["num_experts_per_tok"], cfg["hidden_size"], cfg["moe_intermediate_size"]
    tokens = m["decode"]["batch"]
    g = entry(art, lambda n: "vectorized_gather_kernel" in n)
    # the per-pair gathers need nothing; the kernel's other launch (the LM head's token gather) keeps its bytes
    assert g["bytes_necessary"] < 1e-3 * g["bytes_est"]
    assert g["avoidable_gain_pct"] > 0.95 * g["regime_pct_gpu_time"]
    kinds = {x["kind"] for x in g["levers_detail"]}
    assert expert_gather.KIND_GATHER in kinds
    assert any('experts_implementation="grouped_mm"' in x["text"] for x in g["levers_detail"])
    b = entry(art, lambda n: n == "nvjet_sm90_tst_512x8_64x3_1x1_v_bz_TNT")
    assert b["shape"] == {"M": 2 * mi, "N": 1, "K": h, "batch": tokens * k}
    hit = E * (1 - (1 - k / E) ** tokens)
    want = hit * 2 * mi * h * 2 + tokens * k * h * 2 + tokens * k * 2 * mi * 2
    assert b["bytes_necessary"] == pytest.approx(want, rel=1e-9)
    assert b["bytes_necessary"] < 0.3 * b["bytes_est"]
    assert b["avoidable_gain_pct"] > 0
    # the #1 by larger gain is the gather
    assert art["ranking_by_larger_gain"][0] == g["name"]


def test_an_index_without_a_consumer_keeps_no_shape():
    pt = ParsedTrace("x")
    pt.sigs = [OpSig("aten::index", ((128, 1536, 2048), ()), ("c10::BFloat16", ""), ("", "")),
               OpSig("aten::mul", ((64, 7), (64, 7)), ("float", "float"), ("", ""))]
    for i, (ext, s) in enumerate(((1, 0), (2, 1))):
        pt.k_name.append(i), pt.k_ts.append(float(i)), pt.k_dur.append(1.0), pt.k_ext.append(ext)
        pt.k_corr.append(ext), pt.k_dev.append(0)
        pt.op_ext.append(ext), pt.op_sig.append(s)
    assert resolve_index_outputs(pt) == 0
    # a consumer whose operand is [P, *table[1:]] gives the rows
    pt.sigs[1] = OpSig("aten::bmm", ((512, 1536, 2048), (512, 2048, 1)), ("c10::BFloat16",) * 2, ("", ""))
    assert resolve_index_outputs(pt) == 1
    assert pt.sigs[pt.op_sig[0]].dims[2] == (512, 1536, 2048)
