"""Eager attention's materialised score matrix (roofline/core/opclasses/eager_attention.py, the Top-N's
trace_evidence.score_chains: roofline/ingest/score_chains.py; docs/method.md section 12) on the real-model
corpus (fixtures/corpus: transformers 5.17 on the H200). Every expected figure is computed here from the
trace (parsed with json), config.json and the corpus' own record of the run (corpus_meta.json), never
typed in."""
from __future__ import annotations

import copy
import functools
import gzip
import json
from math import prod
from pathlib import Path

import pytest

from hybrid_corpus import CORPUS, meta, topn_path
from roofline import api
from roofline.core.opclasses import eager_attention

KIND = eager_attention.KIND
CASE = "gptoss_eager"


@functools.lru_cache(maxsize=None)
def config(case: str = CASE) -> dict:
    return json.loads((CORPUS / "configs" / f"{case}.json").read_text())


@functools.lru_cache(maxsize=None)
def topn(case: str = CASE) -> dict:
    return json.loads(open(topn_path(case)).read())


def analyse(case: str = CASE, doc: dict | None = None, cfg: dict | None = None) -> dict:
    """Every kernel above 0.3% of GPU time analysed (the chain's bmm and max heads included)."""
    env = str(Path(topn_path(case)).with_name("env_report.json")) if doc is not None else None
    return api.analyze(doc if doc is not None else topn_path(case), env=env,
                       config=cfg if cfg is not None else config(case), head_threshold_pct=0.3, head_cap=60)


@functools.lru_cache(maxsize=None)
def artifact(case: str = CASE) -> dict:
    return analyse(case)


def verdicts(art: dict):
    for e in art["entries"]:
        for v in e.get("regime_verdicts") or [e]:
            yield e, v


def scores_lever(v: dict) -> list[dict]:
    return [x for x in v.get("levers_detail") or [] if x["kind"] == KIND]


def rows(v: dict) -> list[dict]:
    return v.get("per_shape") or [{"shape": v["shape"], "weight": 1.0, "bytes_est": v["bytes_est"]}]


@functools.lru_cache(maxsize=None)
def prefill_ops(case: str = CASE) -> list[dict]:
    """The aten ops that launched the kernels of the prefill step, in GPU order (from the trace)."""
    ev = json.load(gzip.open(CORPUS / f"{case}.json.gz"))["traceEvents"]
    ops = {e["args"].get("External id"): e for e in ev if e.get("cat") == "cpu_op"}
    rng = next(e for e in ev if e.get("cat") == "gpu_user_annotation" and e["name"] == "prefill_step")
    ks = sorted((e for e in ev if e.get("cat") == "kernel" and rng["ts"] <= e["ts"] <= rng["ts"] + rng["dur"]),
                key=lambda e: e["ts"])
    return [ops[k["args"]["External id"]] for k in ks if k["args"].get("External id") in ops]


@functools.lru_cache(maxsize=None)
def expected_parts() -> dict:
    """The fused attention's bytes for one gpt-oss prefill layer, by the op of the eager chain that moves
    them, from the trace's QK^T bmm and mask, config.json and the corpus record (4 prompts of 1024)."""
    cfg, m = config(), meta(CASE)["prefill"]
    hq, hk, d = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    b, q = m["batch"], m["tokens_per_seq"]
    a = 2                                                            # bf16 (config.json dtype)
    assert cfg["dtype"] == "bfloat16"
    qk = [o["args"]["Input Dims"] for o in prefill_ops() if o["name"] == "aten::bmm"
          and o["args"]["Input Dims"][0] == [b * hq, q, d] and o["args"]["Input Dims"][1] == [b * hq, d, q]]
    assert qk, "the trace's QK^T bmm over b x heads of the config"
    mask = next(o["args"]["Input Dims"][1] for o in prefill_ops() if o["name"] == "aten::add"
                and o["args"]["Input Dims"][0] == [b, hq, q, q])
    return {"b": b, "hq": hq, "q": q, "d": d, "QK": (b * hq * q * d + b * hk * q * d) * a,
            "PV": (b * hk * q * d + b * hq * q * d) * a, "sinks": hq * 1 * a, "mask": prod(mask) * a,
            "mask_elems": prod(mask)}


def expected_row(kernel: str, shape: dict, bytes_est: float) -> float:
    """What a fused attention needs of this row's op: the QK^T its Q and K, the PV its V and O, the mask
    add the mask, the sink cat the sinks, every other op over the scores (scale, max, sub, softmax) nothing;
    an op that reads no score matrix its own bytes."""
    p = expected_parts()
    b, hq, q, d = p["b"], p["hq"], p["q"], p["d"]
    S, S1, row = b * hq * q * q, b * hq * q * (q + 1), b * hq * q     # the scores; with the sink column; one per row
    if shape.get("batch") == b * hq and (shape.get("M"), shape.get("N"), shape.get("K")) == (q, q, d):
        return p["QK"]
    if shape.get("batch") == b * hq and (shape.get("M"), shape.get("N"), shape.get("K")) == (q, d, q):
        return p["PV"]
    if shape.get("elems_in") == S + p["mask_elems"] and shape.get("elems_out") == S:
        return p["mask"]
    if shape.get("elems_in") == shape.get("elems_out") == S1 and "CatArray" in kernel:
        return p["sinks"]
    if shape.get("elems_in") in (S, S1, S1 + row):
        return 0.0
    return bytes_est


def test_score_chain_evidence_is_the_trace_s():
    """roofline topn records gpt-oss's prefill chain: 4 sequences x the config's 64 heads x 1024 x 1024 (+1 sink
    column), one per layer of the prefill step (counted here: the softmax ops over [4, 64, 1024, 1025]), from
    the QK^T bmm to the PV bmm through the scale, mask, sink cat, max, sub and softmax."""
    cfg, m = config(), meta(CASE)["prefill"]
    recs = [r for r in topn()["trace_evidence"]["score_chains"] if r["regime"] == "prefill"]
    assert len(recs) == 1
    r = recs[0]
    hq, b, q = cfg["num_attention_heads"], m["batch"], m["tokens_per_seq"]
    assert (r["batch"], r["heads"], r["q_len"], r["kv_len"], r["head_dim"], r["extra_cols"]) == (b, hq, q, q,
                                                                                                cfg["head_dim"], 1)
    soft = [o for o in prefill_ops() if o["name"] == "aten::_softmax" and o["args"]["Input Dims"][0] == [b, hq, q, q + 1]]
    assert r["chains"] == len(soft) == cfg["num_hidden_layers"]
    assert [lk["op"] for lk in r["links"]] == ["aten::bmm", "aten::mul", "aten::add", "aten::cat", "aten::max",
                                                "aten::sub", "aten::_softmax", "aten::bmm"]
    assert r["mask"] == [b, 1, q, q]


def test_gptoss_prefill_cat_and_softmax_are_not_necessary():
    """The prefill sink cat (268.7 M elements, the largest head the tuning verdict would send to occupancy
    tuning) and the softmax over the scores: the rule's verdict, necessary bytes from the trace's dims and
    config.json, the avoidable gain at the kernel's own pace, one lever with its evidence and saving, the
    route byte_reduction."""
    cfg, p = config(), expected_parts()
    art = artifact()
    cat = next(v for e, v in verdicts(art) if "CatArrayBatchedCopy" in e["name"] and v["regime"] == "prefill")
    soft = next(v for e, v in verdicts(art) if "softmax_warp_forward" in e["name"] and v["regime"] == "prefill")
    sink_cat = p["b"] * p["hq"] * p["q"] * (p["q"] + 1)
    assert any(r["shape"].get("elems_in") == sink_cat for r in rows(cat))
    # the cat: the sink column's bytes on its scores shape, the model's bytes on its other shapes (KV, rotary)
    want = sum(r["weight"] * (p["sinks"] if r["shape"].get("elems_in") == sink_cat else r["bytes_est"]) for r in rows(cat))
    assert cat["bytes_necessary"] == pytest.approx(want, rel=1e-9)
    # the softmax: every prefill launch is the chain's softmax: nothing necessary, the launch need not run
    assert all(r["shape"]["elems_in"] == sink_cat for r in rows(soft))
    assert soft["bytes_necessary"] == 0
    assert soft["avoidable_gain_pct"] == pytest.approx(soft["regime_pct_gpu_time"], rel=1e-9)
    bw, pf = cat["achieved_bw_bytes_s"] / cat["hbm_util"], cat["achieved_flops"] / cat["compute_util"]
    kept = max(cat["bytes_necessary"] / bw, cat["flops_est"] / pf) / max(cat["bytes_est"] / bw, cat["flops_est"] / pf)
    assert cat["avoidable_gain_pct"] == pytest.approx(cat["regime_pct_gpu_time"] * (1 - kept), rel=1e-6)
    for v in (cat, soft):
        lv = scores_lever(v)
        assert len(lv) == 1
        assert lv[0]["saves_pct"] == pytest.approx(v["avoidable_gain_pct"], rel=1e-9)
        assert "fused attention" in lv[0]["text"] and "sinks" in lv[0]["text"]
        for word in (f"x {cfg['num_attention_heads']} heads", f"num_attention_heads {cfg['num_attention_heads']}",
                     f"head_dim {cfg['head_dim']}", "+ 1 sink column", f"q_len = kv_len = {p['q']}",
                     f"[{p['b'] * p['hq']}, {p['q']}, {p['d']}]", "not known from the trace"):
            assert word in lv[0]["evidence"], word
        # tuning the kernel was the verdict; removing the scores saves more: the route follows the larger gain
        assert v["avoidable_gain_pct"] > v["expected_e2e_gain_pct"] and v["route"] == "byte_reduction"
        assert (v.get("byte_reduction_levers") or v["other_levers"])[0] == lv[0]["text"]
    assert "[4, 64, 1024, 1024], [4, 64, 1024, 1]" in scores_lever(cat)[0]["evidence"]
    assert art["ranking_by_larger_gain"][0] == next(e["name"] for e, v in verdicts(art) if v is cat)


def test_every_link_of_the_prefill_chain_needs_its_part_of_the_fused_attention():
    """Each head of the chain: QK^T needs Q and K (of the 8 KV heads, not the 64 repeat_kv gave it), PV V and O,
    the mask add the mask, the sink cat the sinks, the scale / max / sub / softmax nothing: their necessary bytes
    sum to one fused attention per layer."""
    seen = set()
    for e, v in verdicts(artifact()):
        if v["regime"] != "prefill" or not scores_lever(v):
            continue
        want = sum(r["weight"] * expected_row(e["name"], r["shape"], r["bytes_est"]) for r in rows(v))
        assert v["bytes_necessary"] == pytest.approx(want, rel=1e-9, abs=1e-6), e["short_name"]
        seen |= set(e["aten_ops"])
    # the QK^T, the PV and the streaming links are all heads of this run
    assert {"aten::bmm", "aten::cat", "aten::_softmax", "aten::max"} <= seen


def test_one_lever_per_cause():
    """A link gets no fusion lever with another op of its own chain (the fused attention removes both): the
    note says so. The decode QK^T / PV over the KV cache keep the KV-cache rule's verdict (broadcast KV heads),
    not a second one."""
    art = artifact()
    chain = {k for r in topn()["trace_evidence"]["score_chains"] for lk in r["links"] for k in lk["kernels"]}
    for e, v in verdicts(art):
        if scores_lever(v):
            assert all(x.get("partner") not in chain for x in v["levers_detail"] if x["kind"] == "fusion"), e["short_name"]
    soft = next(v for e, v in verdicts(art) if "softmax_warp_forward" in e["name"] and v["regime"] == "prefill")
    assert "no fusion lever with" in soft["notes"] and KIND in soft["notes"]
    dec = [(e, v) for e, v in verdicts(art) if v["regime"] == "decode" and v.get("shape", {}).get("batch") ==
           meta(CASE)["decode"]["batch"] * config()["num_attention_heads"]]
    assert dec, "the decode bmm heads"
    for e, v in dec:
        kinds = [x["kind"] for x in v["levers_detail"]]
        assert "kv_heads_broadcast" in kinds and KIND not in kinds, (e["short_name"], kinds)


def test_sdpa_traces_get_none():
    """SDPA runs (qwen3_static_sdpa, the eager twin's; llama_prefill_decode; qwen3moe_eager, whose 'eager' is
    its experts, its attention SDPA and its softmax the router's): no score chain, no verdict."""
    for case in ("qwen3_static_sdpa", "llama_prefill_decode", "qwen3moe_eager"):
        assert not topn(case).get("trace_evidence", {}).get("score_chains"), case
        assert not any(scores_lever(v) for _, v in verdicts(analyse(case))), case


def test_qwen3_static_eager_decode_chain_is_found_and_its_bmm_keeps_the_cache_rule():
    """The eager twin of qwen3_static_sdpa: its decode chain (24 sequences x the config's 40 heads x 1 query x the
    2816-slot static cache) is recorded; the QK^T / PV heads keep the KV-cache verdict (8 KV heads broadcast, the
    empty slots): one lever per cause."""
    cfg, m = config("qwen3_static_eager"), meta("qwen3_static_eager")["decode"]
    recs = topn("qwen3_static_eager")["trace_evidence"]["score_chains"]
    static = meta("qwen3_static_eager")["options"]["static"]
    assert [(r["batch"], r["heads"], r["q_len"], r["kv_len"]) for r in recs] == [(m["batch"], cfg["num_attention_heads"],
                                                                                   1, static)]
    assert m["context_start"] + m["steps"] < static         # the static cache holds empty slots
    art = artifact("qwen3_static_eager")
    bmm = [v for e, v in verdicts(art) if v.get("shape", {}).get("batch") == m["batch"] * cfg["num_attention_heads"]]
    assert len(bmm) == 2
    for v in bmm:
        kinds = [x["kind"] for x in v["levers_detail"]]
        assert "kv_heads_broadcast+empty_slots" in kinds and KIND not in kinds


def _gptoss_prefill_levers(art: dict) -> list:
    return [(e["short_name"], v["regime"]) for e, v in verdicts(art) if scores_lever(v) and v["regime"] == "prefill"]


def test_heads_must_be_the_config_s():
    """The same trace under a config of 32 query heads (head_dim stays 64: the chain's 64 heads are not the
    config's): no verdict, the cat's bytes are the model's."""
    assert _gptoss_prefill_levers(artifact())
    art = analyse(cfg=dict(config(), num_attention_heads=config()["num_attention_heads"] // 2))
    assert not any(scores_lever(v) for _, v in verdicts(art))
    cat = next(v for e, v in verdicts(art) if "CatArrayBatchedCopy" in e["name"] and v["regime"] == "prefill")
    assert cat["bytes_necessary"] == pytest.approx(cat["bytes_est"], rel=1e-9)


def test_head_dim_must_be_the_config_s():
    """A config whose head_dim is not the chain's d: no verdict."""
    art = analyse(cfg=dict(config(), head_dim=2 * config()["head_dim"]))
    assert not any(scores_lever(v) for _, v in verdicts(art))


def test_decode_chains_need_the_cache_record_for_their_length():
    """The decode chains' kv_len is the length of the step's KV cache (trace_evidence.kv_caches); without that
    record nothing says it is the step's key length: the decode links get no verdict, the prefill ones (q_len
    = kv_len) keep theirs."""
    doc = copy.deepcopy(topn())
    assert any(r["regime"] == "decode" for r in doc["trace_evidence"]["score_chains"])
    before = [v for _, v in verdicts(artifact()) if v["regime"] == "decode" and scores_lever(v)]
    assert before
    doc["trace_evidence"].pop("kv_caches")
    art = analyse(doc=doc)
    assert not [v for _, v in verdicts(art) if v["regime"] == "decode" and scores_lever(v)]
    assert _gptoss_prefill_levers(art) == _gptoss_prefill_levers(artifact())


def test_no_chain_evidence_no_verdict():
    """A Top-N without trace_evidence.score_chains (an older roofline topn): the streaming heads are as modelled."""
    doc = copy.deepcopy(topn())
    doc["trace_evidence"].pop("score_chains")
    assert not any(scores_lever(v) for _, v in verdicts(analyse(doc=doc)))


def test_a_tensor_parallel_rank_carries_heads_over_tp():
    """The gpt-oss trace read as one rank of a TP 2 run of a model with twice the heads (128 query, 16 KV heads
    of head_dim 64): with the env report's tp 2 the chain's 64 heads are the config's / 2 and the verdict and
    its bytes are those of the real config (8 KV heads on the rank); without a TP degree, no verdict."""
    cfg = dict(config(), num_attention_heads=2 * config()["num_attention_heads"],
               num_key_value_heads=2 * config()["num_key_value_heads"])
    env = json.loads(Path(topn_path(CASE)).with_name("env_report.json").read_text())
    art = api.analyze(copy.deepcopy(topn()), env=dict(env, tp=2), config=cfg, head_threshold_pct=0.3, head_cap=60)
    want = {(e["short_name"], v["regime"]): v["bytes_necessary"] for e, v in verdicts(artifact()) if scores_lever(v)}
    got = {(e["short_name"], v["regime"]): v["bytes_necessary"] for e, v in verdicts(art) if scores_lever(v)}
    assert got.keys() == want.keys() and want
    assert all(got[k] == pytest.approx(want[k], rel=1e-12) for k in want)
    lv = next(scores_lever(v)[0] for e, v in verdicts(art) if scores_lever(v))
    assert "/ TP 2 on this rank" in lv["evidence"] and "the env report's tp" in lv["evidence"]
    assert not any(scores_lever(v) for _, v in verdicts(analyse(cfg=cfg)))
