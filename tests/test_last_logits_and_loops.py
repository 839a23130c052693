"""The prefill LM head over every prompt position (opclasses/last_logits.py) and the eager per-expert loop
(opclasses/expert_loop.py), end to end through the CLI on the real corpus traces qwen2_prefill_all_logits
(Qwen2.5-7B-shaped, prefill 2 x 1024 with logits_to_keep=0) and mixtral22_eager_loop / qwen3moe_eager
(transformers' experts_implementation="eager"). Expected figures are counted here from config.json, the
workload (corpus_meta.json) and the trace (json)."""
from __future__ import annotations

import pytest

from compiled_corpus import cli_artifact, config, entry, events, meta
from roofline.core.opclasses import expert_loop, last_logits


def test_the_prefill_lm_head_needs_one_row_per_sequence():
    case = "qwen2_prefill_all_logits"
    art, cfg, m = cli_artifact(case), config(case), meta(case)
    V, H = cfg["vocab_size"], cfg["hidden_size"]
    seqs, isl = m["prefill"]["batch"], m["prefill"]["tokens_per_seq"]
    # the trace's own LM-head mm: [seqs x isl, hidden] x [hidden, vocab]
    mm = [e for e in events(case) if e.get("cat") == "cpu_op" and e["name"] == "aten::mm"
          and e["args"]["Input Dims"][1] == [H, V]]
    assert {tuple(e["args"]["Input Dims"][0]) for e in mm} >= {(seqs * isl, H)}
    e = entry(art, lambda n: n.startswith("nvjet_sm90_tst_320x128"))
    v = next(x for x in [e] + (e.get("regime_verdicts") or []) if x.get("regime") == "prefill")
    assert v["shape"] == {"M": seqs * isl, "N": V, "K": H}
    want = V * H * 2 + seqs * H * 2 + seqs * V * 2
    assert v["bytes_necessary"] == pytest.approx(want, rel=1e-9)
    assert v["flops_necessary"] == pytest.approx(2 * seqs * V * H, rel=1e-9)
    # compute-bound over 2048 rows, 2 needed: nearly all of its share can go
    assert v["avoidable_gain_pct"] > 0.8 * v["regime_pct_gpu_time"]    # the weight read stays
    lv = [x for x in v["levers_detail"] if x["kind"] == last_logits.KIND]
    assert lv and "logits_to_keep" in lv[0]["text"] and f"{seqs * isl - seqs} of its {seqs * isl} rows" in lv[0]["text"]
    assert art["ranking_by_larger_gain"][0] == e["name"]
    # the decode LM head (M = the batch) needs all its rows
    d = entry(art, lambda n: n.startswith("nvjet_sm90_tst_384x8"))
    assert d["regime"] == "decode" and not any(x["kind"] == last_logits.KIND for x in d.get("levers_detail") or [])


@pytest.mark.parametrize("case", ["mixtral22_eager_loop", "qwen3moe_eager"])
def test_an_eager_per_expert_loop_is_a_grouped_gemm_priced_by_its_time(case):
    art, cfg = cli_artifact(case), config(case)
    h, mi = cfg["hidden_size"], cfg["intermediate_size"] if case.startswith("mixtral") else cfg["moe_intermediate_size"]
    first = art["ranking_by_larger_gain"][0]
    e = entry(art, lambda n: n == first)
    v = max([e] + (e.get("regime_verdicts") or []), key=lambda x: x.get("avoidable_gain_pct") or -1)
    # its shapes are one expert's projection with several token counts M (the loop)
    shapes = [u["shape"] for u in v["per_shape"]]
    assert {(s["N"], s["K"]) for s in shapes} <= {(2 * mi, h), (mi, h), (h, mi)}
    assert len({s["M"] for s in shapes}) >= 2
    lv = [x for x in v["levers_detail"] if x["kind"] == expert_loop.KIND]
    assert lv and 'experts_implementation="grouped_mm"' in lv[0]["text"]
    # the bytes stay; the saving is the launches' time against the same bytes at the target
    assert v["bytes_necessary"] == pytest.approx(v["bytes_est"], rel=1e-9)
    t_s = v["t_ms"] / 1e3
    bw = v["bytes_est"] / t_s / v["hbm_util"]               # the roof the verdict used
    kept = min(1.0, v["bytes_est"] / (bw * v["target_eff"]) / t_s)
    assert v["avoidable_gain_pct"] == pytest.approx(v["regime_pct_gpu_time"] * (1 - kept), rel=1e-6)
