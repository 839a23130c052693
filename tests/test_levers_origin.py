"""Lower precision: whose bytes (docs/method.md section 12). A lower-precision lever names one operand:
the weights only where the trace and config.json say the operand is a parameter, the KV cache only where
the trace evidences a cache, none where the origin is unknown. On the real corpus (fixtures/corpus, H200
traces) through the CLI's topn and the API's analysis of every kernel (no head threshold), each figure
checked against the trace's own aten::bmm / aten::mm Input Dims (parsed here with json) and config.json."""
from __future__ import annotations

import dataclasses
import gzip
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from roofline import api
from roofline.core.opclasses import origin
from roofline.core.opclasses.base import NecessaryCtx
from test_corpus import CORPUS, META

BF16 = 2
_CACHE: dict = {}


def _wide(case: str, tmp_path_factory) -> dict:
    """The corpus case through `roofline topn` (the corpus's workload and config.json), then every kernel
    analysed (head threshold 0)."""
    if case not in _CACHE:
        m = META[case]
        d, p = m["decode"], m["prefill"]
        topn = tmp_path_factory.mktemp(case) / "profile_topN.json"
        r = subprocess.run([sys.executable, "-m", "roofline.cli", "topn", str(CORPUS / f"{case}.json.gz"),
                            "-o", str(topn),
                            "--isl", str(p["tokens_per_seq"]), "--osl", str(max(d["steps"], 1)),
                            "--conc", str(d["batch"] if d["steps"] else p["batch"]), "--top", "400",
                            "--config", str(CORPUS / "configs" / f"{case}.json")], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        _CACHE[case] = api.analyze(str(topn), head_threshold_pct=0.0, head_cap=400), json.loads(topn.read_text())
    return _CACHE[case][0]


def _ctx(case: str, entry: dict, regime: str, evidence: bool = True) -> NecessaryCtx:
    """What the origin rule reads for one Top-N entry in one regime: its shapes there, its aten ops, the
    trace's cache records (or none), config.json."""
    topn = _CACHE[case][1]
    regs = entry.get("shape_regimes") or [regime] * len(entry["shapes"])
    return NecessaryCtx(config=_cfg(case), workload={}, regime=regime, launches=None, steps=None,
                        shapes=[s for s, r in zip(entry["shapes"], regs) if regime in r.split("+")],
                        trace_evidence=topn.get("trace_evidence", {}) if evidence else {}, aten_ops=entry["aten_ops"])


def _cfg(case: str) -> dict:
    return json.loads((CORPUS / "configs" / f"{case}.json").read_text())


def _gemm_dims(case: str, op: str) -> Counter:
    """(A dims, B dims) of every bf16 `op` the trace records -> calls."""
    out = Counter()
    for e in json.load(gzip.open(CORPUS / f"{case}.json.gz"))["traceEvents"]:
        if e.get("cat") == "cpu_op" and e["name"] == op and e["args"].get("Input type", [""])[0] == "c10::BFloat16":
            a, b = e["args"]["Input Dims"][:2]
            out[(tuple(a), tuple(b))] += 1
    return out


def _verdicts(art: dict, regime: str, pred) -> list[dict]:
    return [v for x in art["entries"] for v in (x.get("regime_verdicts") or [x]) if v["regime"] == regime and pred(v)]


def _precision(v: dict) -> dict[str, dict]:
    return {d["kind"]: d for d in v["levers_detail"] if d["kind"].startswith("lower_precision")}


def _saving_text(saved: float, moved: float) -> str:
    return f"saves {saved / 1e6:.1f} MB of the {moved / 1e6:.1f} MB it moves per launch"


def test_eager_attention_bmm_over_a_static_cache_gets_the_kv_lever_not_the_weights_one(tmp_path_factory):
    """qwen3_static_eager: the QK^T [960,1,128] x [960,128,2816] and PV [960,1,2816] x [960,2816,128] of an
    eager attention read the 2816-slot static cache through B (repeat_kv'd to 40 heads): no weights lever;
    the KV lever, saving half of B per launch."""
    case = "qwen3_static_eager"
    art, cfg = _wide(case, tmp_path_factory), _cfg(case)
    bmms = {k for k in _gemm_dims(case, "aten::bmm") if len(k[0]) == 3 and k[0][0] > 1}
    cache = next(c for c in json.load(gzip.open(CORPUS / f"{case}.json.gz"))["traceEvents"]
                 if c.get("cat") == "cpu_op" and c["name"] == "aten::index_copy_")["args"]["Input Dims"][0]
    assert len(bmms) == 2
    for a, b in bmms:
        hq, S = cfg["num_attention_heads"], cache[2]
        assert a[0] == cache[0] * hq and S in b and cfg["head_dim"] in b     # b sequences x hq heads over S slots
        v, = _verdicts(art, "decode", lambda e, a=a, b=b: e["op_kind"] == "gemm" and e["shape"].get("batch") == a[0]
                       and e["shape"]["K"] == a[2] and e["shape"]["N"] == b[2])
        assert v["bound_type"] == "memory"
        lv = _precision(v)
        assert set(lv) == {"lower_precision_kv"}
        kv = lv["lower_precision_kv"]
        b_bytes = a[0] * b[1] * b[2] * BF16
        assert _saving_text(b_bytes / 2, v["bytes_est"]) in kv["text"]
        assert v["bytes_est"] == pytest.approx((a[0] * a[1] * a[2] + b[0] * b[1] * b[2] + a[0] * a[1] * b[2]) * BF16)
        assert kv["saves_pct"] == pytest.approx(v["regime_pct_gpu_time"] * b_bytes / 2 / v["bytes_est"])
        assert f"aten::index_copy_ {list(cache)}" in kv["evidence"] and f"of {S} slots" in kv["evidence"]
        assert not any("lower-precision weights" in t for t in v["byte_reduction_levers"] + v["other_levers"])


def test_a_dense_linear_keeps_the_weights_lever_with_its_saving(tmp_path_factory):
    """qwen3_static_eager's LM head (aten::mm, B [hidden, vocab]): a weight of config.json's dims; the lever
    saves half of it."""
    case = "qwen3_static_eager"
    art, cfg = _wide(case, tmp_path_factory), _cfg(case)
    (a, b), = [k for k in _gemm_dims(case, "aten::mm") if k[1] == (cfg["hidden_size"], cfg["vocab_size"])]
    v, = _verdicts(art, "decode", lambda e: e["op_kind"] == "gemm" and e["shape"].get("N") == cfg["vocab_size"])
    pw = _precision(v)["lower_precision_weights"]
    assert _saving_text(b[0] * b[1] * BF16 / 2, v["bytes_est"]) in pw["text"]
    assert "K = hidden_size, N = vocab_size (config.json)" in pw["evidence"]
    assert v["bytes_est"] == pytest.approx((a[0] * a[1] + b[0] * b[1] + a[0] * b[1]) * BF16)


def test_sliding_window_eager_attention_gets_the_kv_lever_on_its_window_cache(tmp_path_factory):
    """gemma3_swa_eager: the sliding layers' QK^T over the 1024-token window (a cat-grown cache record of
    1024 slots, 24 sequences x 8 heads, head_dim 256)."""
    case = "gemma3_swa_eager"
    art, cfg = _wide(case, tmp_path_factory), _cfg(case)
    (a, b), = [k for k in _gemm_dims(case, "aten::bmm") if k[1][2] == cfg["sliding_window"]]
    v, = _verdicts(art, "decode", lambda e: e["op_kind"] == "gemm" and e["shape"].get("batch") == a[0]
                   and e["shape"]["N"] == b[2] and e["shape"]["K"] == b[1])
    assert set(_precision(v)) == {"lower_precision_kv"}
    assert _saving_text(a[0] * b[1] * b[2] * BF16 / 2, v["bytes_est"]) in _precision(v)["lower_precision_kv"]["text"]
    kv = _precision(v)["lower_precision_kv"]
    assert f"of {cfg['sliding_window']} slots (trace_evidence.kv_caches)" in kv["evidence"]


def test_prefill_attention_bmm_reads_activations_no_precision_lever(tmp_path_factory):
    """gptoss_eager prefill: QK^T [256,1024,64] x [256,64,1024] (4 sequences x 64 heads) is memory-bound; its
    B is this step's K, no cache read: no lever (it had the weights lever), and the notes say why."""
    case = "gptoss_eager"
    art, cfg = _wide(case, tmp_path_factory), _cfg(case)
    (a, b), = [k for k in _gemm_dims(case, "aten::bmm") if k[0][1] == k[1][2] > 1 and k[0][2] == cfg["head_dim"]]
    v, = _verdicts(art, "prefill", lambda e: e["op_kind"] == "gemm" and e["shape"].get("batch") == a[0]
                   and e["shape"]["K"] == cfg["head_dim"])
    assert v["bound_type"] == "memory" and not _precision(v)
    assert "no lower-precision lever: its operands are activations" in v["notes"]
    assert f"batch {a[0]} = {a[0] // cfg['num_attention_heads']} x {cfg['num_attention_heads']} heads" in v["notes"]


def test_batched_mm_moe_experts_keep_the_weights_lever_on_the_gathered_weights(tmp_path_factory):
    """qwen3moe_generate_batched_mm: transformers' batched_mm experts run aten::bmm of W[expert_ids]
    [512, 1536, 2048] (gate_up: 2 x moe_intermediate x hidden) x the tokens [512, 2048, 1]: A is expert
    weights, so the weights lever stands and saves half of A."""
    case = "qwen3moe_generate_batched_mm"
    art, cfg = _wide(case, tmp_path_factory), _cfg(case)
    mi, h = cfg["moe_intermediate_size"], cfg["hidden_size"]
    bmms = [k for k in _gemm_dims(case, "aten::bmm") if k[0][1:] in ((2 * mi, h), (h, mi))]
    assert len(bmms) == 2
    for a, b in bmms:
        v, = _verdicts(art, "decode", lambda e, a=a: e["op_kind"] == "gemm" and e["shape"].get("batch") == a[0]
                       and e["shape"]["M"] == a[1] and e["shape"]["K"] == a[2])
        assert v["bound_type"] == "memory"
        lv = _precision(v)
        assert set(lv) == {"lower_precision_weights"}
        assert _saving_text(a[0] * a[1] * a[2] * BF16 / 2, v["bytes_est"]) in lv["lower_precision_weights"]["text"]
        assert f"gathered expert weights of {a[1]} x {a[2]}" in lv["lower_precision_weights"]["evidence"]


def test_a_weight_under_a_tenth_of_the_bytes_gets_no_lever(tmp_path_factory):
    """gptoss_eager prefill's router (aten::addmm, 4096 rows x hidden 2880 -> 32 experts): memory-bound,
    a weight of config.json's dims, but 2880 x 32 x 2 bytes of the ~24 MB it moves: no lever; the notes give
    what it would save."""
    case = "gptoss_eager"
    art, cfg = _wide(case, tmp_path_factory), _cfg(case)
    E = cfg["num_local_experts"]
    v, = _verdicts(art, "prefill", lambda e: e["op_kind"] == "gemm" and e["shape"].get("N") == E)
    saved = cfg["hidden_size"] * E * BF16 / 2
    assert v["bound_type"] == "memory" and not _precision(v)
    assert (f"bf16 -> fp8 weights would save {saved / 1e6:.2f} MB of the {v['bytes_est'] / 1e6:.2f} MB per launch "
            "(under 10%)") in v["notes"]


def test_a_cache_is_also_known_by_its_length_growing_step_by_step(tmp_path_factory):
    """gemma3_swa_eager's global layers: PV [192,1,S] x [192,S,256] with S = 1789 .. 1793 over the decode
    steps (the trace's bmm dims). With the cache records the origin names the cat's cache; without them,
    S growing one token per step still says B is a cache; a single S with no record says nothing of a cache."""
    case = "gemma3_swa_eager"
    _wide(case, tmp_path_factory)
    cfg = _cfg(case)
    Ss = sorted(b[1] for a, b in _gemm_dims(case, "aten::bmm") if a[2] == b[1] and b[2] == cfg["head_dim"]
                and a[0] == 24 * cfg["num_attention_heads"] and b[1] > cfg["sliding_window"])
    assert Ss == list(range(Ss[0], Ss[0] + len(Ss))) and len(Ss) >= 2          # one more slot per decode step
    e = next(x for x in _CACHE[case][1]["entries"] if any(s.get("K") == Ss[-1] and s.get("N") == cfg["head_dim"]
                                                            for s in x.get("shapes") or []))
    ctx = _ctx(case, e, "decode", evidence=False)
    got = [origin.gemm_origin(s, ctx) for s in ctx.shapes]
    assert {o.kind for o in got} == {"kv_cache"} and {o.operand for o in got} == {"B"}
    assert all(f"grows step by step ({Ss[0]} -> {Ss[-1]})" in o.evidence for o in got)
    with_rec = [origin.gemm_origin(s, _ctx(case, e, "decode")) for s in ctx.shapes]
    assert all("(trace_evidence.kv_caches)" in o.evidence for o in with_rec)
    one = origin.gemm_origin(ctx.shapes[0], dataclasses.replace(ctx, shapes=ctx.shapes[:1]))
    assert one.kind == "activation" and "no length that grows step by step" in one.evidence


def test_weights_of_several_projections_under_one_kernel_are_constant_not_growing(tmp_path_factory):
    """gemma3_swa_eager prefill: one nvjet kernel runs two linear layers, B [2048, 2560] (o_proj: heads x
    head_dim -> hidden) and [10240, 2560] (down_proj: intermediate -> hidden), equal but for K; K differs by
    far more than a step's tokens: both are weights of config.json's dims, not an operand that grows."""
    case = "gemma3_swa_eager"
    _wide(case, tmp_path_factory)
    cfg = _cfg(case)
    h, hq, hd, inter = cfg["hidden_size"], cfg["num_attention_heads"], cfg["head_dim"], cfg["intermediate_size"]
    pairs = {(h, hq * hd), (h, inter)}           # (N, K) of o_proj and down_proj
    e = next(x for x in _CACHE[case][1]["entries"] if {(s.get("N"), s.get("K")) for s in x.get("shapes") or []
                                                       if "batch" not in s} == pairs)
    ctx = _ctx(case, e, "prefill")
    assert {(s["N"], s["K"]) for s in ctx.shapes} == pairs and len({s["M"] for s in ctx.shapes}) == 1
    for s in ctx.shapes:
        o = origin.gemm_origin(s, ctx)
        assert o.kind == "parameter" and o.operand == "B" and "the same in every step" in o.evidence
        assert "N = hidden_size" in o.evidence


def test_grouped_moe_keeps_the_weights_lever_on_the_experts_it_streams(tmp_path_factory):
    """qwen3moe_grouped_mm decode: aten::_grouped_mm's W [E, K, N] = config.json's 128 (num_local_experts)
    experts of hidden x 2 x moe_intermediate (gate_up) and moe_intermediate x hidden (down): the expert weights; the lever saves
    half of the weight bytes the model streams (the experts the rows hit, per launch)."""
    from roofline.core.models.moe import experts_hit

    case = "qwen3moe_grouped_mm"
    art, cfg = _wide(case, tmp_path_factory), _cfg(case)
    E, h, mi = cfg["num_local_experts"], cfg["hidden_size"], cfg["moe_intermediate_size"]
    v, = _verdicts(art, "decode", lambda e: e["op_kind"] == "moe" and e["bound_type"] == "memory")
    pw = _precision(v)["lower_precision_weights"]
    mix = [(u["shape"], u["weight"]) for u in v["shapes_used"]]
    assert {frozenset((s["N"], s["K"])) for s, _ in mix} == {frozenset((h, 2 * mi)), frozenset((mi, h))}
    saved = sum(w * experts_hit(E, s["pairs"]) * s["N"] * s["K"] * BF16 / 2 for s, w in mix)
    assert _saving_text(saved, v["bytes_est"]) in pw["text"]
    assert f"is the expert weights: E = {E} experts" in pw["evidence"]
