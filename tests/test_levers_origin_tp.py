"""Lower precision: whose bytes, in a tensor-parallel run (docs/method.md section 12). One rank of a Megatron
TP run holds a shard of each weight: q/k/v and gate/up column-parallel (N / tp), o_proj and down row-parallel
(K / tp), heads / tp. Such a shard matches no config.json dim; the origin rule accepts config dim / tp only
where the run's TP degree is known (the env report's `tp`, the all-reduce group size, the world size of a
Top-N of several ranks: roofline.core.necessary.tp_degree), and says so where it is not.

On the real per-rank traces of fixtures/traces_tp (a hand-split Llama-3-8B-shaped layer, TP 2 and TP 4, one
H200; tools/device/make_tp_traces.py). The model's dims (config.json) and each rank's split come from the
script's own record (meta_rank<r>.json), each GEMM's weight dims from the trace's aten::linear Input Dims
(parsed here with json), the Top-N and the analysis from the CLI's topn and the API."""
from __future__ import annotations

import copy
import dataclasses
import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from roofline import api
from roofline.core.necessary import tp_degree
from roofline.core.opclasses import origin
from roofline.core.opclasses.base import NecessaryCtx

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "traces_tp"
RUNS = {"tp2": 2, "tp4": 4}
BF16 = 2
_CACHE: dict = {}


def _meta(run: str, r: int = 0) -> dict:
    return json.loads((FIX / run / f"meta_rank{r}.json").read_text())


def _config(run: str) -> dict:
    """config.json of the whole model the script split (its own record of the dims)."""
    m = _meta(run)["model"]
    return {"model_type": "llama", "hidden_size": m["d"], "intermediate_size": m["d_ff"],
            "num_attention_heads": m["n_q"], "num_key_value_heads": m["n_kv"], "head_dim": m["hd"]}


def _expected(run: str) -> dict[tuple[int, int], tuple[str, str]]:
    """Each rank's weight [N, K] -> (projection, how TP cuts it), from the script's split (meta per_rank)."""
    m, pr = _meta(run)["model"], _meta(run)["per_rank"]
    d, hd = m["d"], m["hd"]
    return {(pr["n_q"] * hd, d): ("q_proj", "column-parallel"), (pr["n_kv"] * hd, d): ("k_proj / v_proj", "column-parallel"),
            (d, pr["n_q"] * hd): ("o_proj", "row-parallel"), (pr["d_ff"], d): ("gate / up", "column-parallel"),
            (d, pr["d_ff"]): ("down", "row-parallel")}


def _linears(run: str, r: int) -> dict[tuple[int, int], tuple[int, int]]:
    """The rank's trace: weight [N, K] of every bf16 aten::linear -> (rows M, calls)."""
    out: dict = {}
    for e in json.load(gzip.open(FIX / run / f"rank{r}.json.gz"))["traceEvents"]:
        if e.get("cat") == "cpu_op" and e["name"] == "aten::linear":
            x, w = e["args"]["Input Dims"][:2]
            m, n = out.get(tuple(w), (x[0], 0))
            out[tuple(w)] = (m, n + 1)
    return out


def _topn(key: str, *sources, tmp_path_factory, env_tp: int | None = None) -> tuple[Path, dict]:
    """`roofline topn SOURCES --config` (its starter env report beside it; `tp` added when given)."""
    if key not in _CACHE:
        run = Path(sources[0]).parent.name if str(sources[0]).endswith(".gz") else Path(sources[0]).name
        d = tmp_path_factory.mktemp(key)
        cfg = d / "config.json"
        cfg.write_text(json.dumps(_config("tp2" if run == "nccl_layout" else run)))
        out = d / "profile_topN.json"
        r = subprocess.run([sys.executable, "-m", "roofline.cli", "topn", *map(str, sources), "-o", str(out),
                            "--config", str(cfg), "--isl", "1024", "--osl", "8", "--conc", "64", "--top", "400", "-q"],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        _CACHE[key] = d, json.loads(out.read_text())
    d, doc = _CACHE[key]
    env = json.loads((d / "env_report.json").read_text())
    if env_tp is not None:
        env["tp"] = env_tp
    return d, {"topn": copy.deepcopy(doc), "env": env, "config": json.loads((d / "config.json").read_text())}


def _gemm_verdicts(art: dict) -> list[dict]:
    return [v for x in art["entries"] for v in (x.get("regime_verdicts") or [x]) if v["op_kind"] == "gemm"]


def _origins(doc: dict, config: dict, tp: int | None, tp_ev: str) -> dict[tuple[int, int], origin.Origin]:
    """The origin rule on every 2-D GEMM shape of the Top-N (its entry's shapes, aten ops), keyed [N, K]."""
    out = {}
    for e in doc["entries"]:
        shapes = [s for s in e.get("shapes") or [] if "N" in s and "batch" not in s]
        if not shapes:
            continue
        ctx = NecessaryCtx(config=config, workload={}, regime="decode", shapes=shapes, launches=None, steps=None,
                           trace_evidence={}, aten_ops=e["aten_ops"], tp=tp, tp_evidence=tp_ev)
        out.update({(s["N"], s["K"]): origin.gemm_origin(s, ctx) for s in shapes})
    return out


@pytest.mark.parametrize("run", RUNS)
def test_every_ranks_projections_are_weights_where_the_ranks_give_the_tp_degree(run, tmp_path_factory):
    """Each rank's q/k/v, o_proj, gate/up and down (its trace's aten::linear weights, exactly the script's
    split) are weights, named as the column- or row-parallel shard of their config.json dim, with the TP
    degree the merged Top-N of the ranks gives (world_size)."""
    n, cfg, exp = RUNS[run], _config(run), _expected(run)
    _, merged = _topn(run, FIX / run, tmp_path_factory=tmp_path_factory)
    tp, ev = tp_degree(merged["topn"])
    assert tp == n == merged["topn"]["ranks"]["world_size"] and f"world_size {n} of the Top-N's {n} ranks" in ev
    for r in range(n):
        assert set(_linears(run, r)) == set(exp)                       # the trace's weights are the split's
        _, alone = _topn(f"{run}_r{r}", FIX / run / f"rank{r}.json.gz", tmp_path_factory=tmp_path_factory)
        got = _origins(alone["topn"], cfg, tp, ev)
        assert set(got) == set(exp)                                    # every projection has a GEMM entry
        for (N, K), (proj, how) in exp.items():
            o = got[(N, K)]
            assert (o.kind, o.operand) == ("parameter", "B"), (proj, o.evidence)
            assert f"one rank's {how} shard" in o.evidence and f"/ TP {n}" in o.evidence, (proj, o.evidence)
            cut = N if how == "column-parallel" else K
            whole = K if how == "column-parallel" else N
            assert whole == cfg["hidden_size"] and cut * n in origin.weight_dims(cfg)


@pytest.mark.parametrize("run", RUNS)
def test_without_tp_evidence_the_shards_are_unknown_and_the_notes_say_why(run, tmp_path_factory):
    """The same ranks' Top-Ns read alone (no env tp, one rank, no all-reduce record in a gloo trace): the TP
    degree is not known; a shard that matches no config.json dim is unknown, with the TP degree that would
    explain it; only a shard that happens to equal another whole dim (TP 2's q: N = 2048 = 2 x KV heads x
    head_dim) is still a weight (as before TP was read)."""
    n, cfg, exp = RUNS[run], _config(run), _expected(run)
    full = origin.weight_dims(cfg)
    for r in range(n):
        _, alone = _topn(f"{run}_r{r}", FIX / run / f"rank{r}.json.gz", tmp_path_factory=tmp_path_factory)
        tp, ev = tp_degree(alone["topn"])
        assert tp is None and "tensor-parallel degree is not known" in ev
        got = _origins(alone["topn"], cfg, tp, ev)
        unknown = {nk for nk in exp if not (nk[0] in full and nk[1] in full)}
        assert {exp[nk][0] for nk in unknown} == {"gate / up", "down", "k_proj / v_proj"}
        for nk, o in got.items():
            if nk in unknown:
                assert o.kind == "unknown" and "is no weight dim of config.json" in o.evidence, o.evidence
                assert f"under TP {n}," in o.evidence and "tensor-parallel degree is not known" in o.evidence
            else:
                assert o.kind == "parameter" and "shard" not in o.evidence


def test_tp2_memory_bound_shards_get_the_weights_lever_with_the_models_saving(tmp_path_factory):
    """TP 2 through the API: the memory-bound GEMMs (gate/up, down: a 59 MB weight shard each) get the
    lower-precision weights lever where the TP degree is known (merged ranks: world_size; one rank with
    the env report's tp), saving half of the shard's bytes of the model's bytes per launch; analysed without
    the evidence (one rank alone, or the merged Top-N without its `ranks`) they get none, and the notes say
    the TP degree is not known."""
    exp = _expected("tp2")
    rows = {nk: m for nk, (m, _) in _linears("tp2", 0).items()}
    d, merged = _topn("tp2", FIX / "tp2", tmp_path_factory=tmp_path_factory)
    _, alone = _topn("tp2_r1", FIX / "tp2" / "rank1.json.gz", tmp_path_factory=tmp_path_factory)
    _, alone_tp = _topn("tp2_r1", FIX / "tp2" / "rank1.json.gz", tmp_path_factory=tmp_path_factory, env_tp=2)
    stripped = dict(merged, topn={k: v for k, v in merged["topn"].items() if k != "ranks"})
    arts = {how: _gemm_verdicts(api.analyze(x["topn"], x["env"], x["config"], head_threshold_pct=0.0, head_cap=400))
            for how, x in (("merged", merged), ("env tp", alone_tp), ("alone", alone), ("stripped", stripped))}
    for how, vs in arts.items():
        mem = {(v["shape"]["N"], v["shape"]["K"]): v for v in vs if v["bound_type"] == "memory"}
        assert {exp[nk][0] for nk in mem} == {"gate / up", "down"}, how
        for (N, K), v in mem.items():
            lv = [x for x in v["levers_detail"] if x["kind"] == "lower_precision_weights"]
            M = rows[(N, K)]
            assert v["bytes_est"] == pytest.approx((M * K + K * N + M * N) * BF16)
            if how in ("merged", "env tp"):
                saved = K * N * BF16 / 2
                assert len(lv) == 1 and (f"saves {saved / 1e6:.1f} MB of the {v['bytes_est'] / 1e6:.1f} MB it moves "
                                         "per launch") in lv[0]["text"]
                assert lv[0]["saves_pct"] == pytest.approx(v["regime_pct_gpu_time"] * saved / v["bytes_est"])
                src = "world_size 2 of the Top-N's 2 ranks" if how == "merged" else "TP 2: the env report's tp"
                assert f"{exp[(N, K)][1]} shard" in lv[0]["evidence"] and src in lv[0]["evidence"]
            else:
                assert not lv and "no lower-precision lever: the origin of its operands is unknown" in v["notes"]
                assert "the run's tensor-parallel degree is not known" in v["notes"] and "under TP 2," in v["notes"]


def test_the_all_reduce_group_size_gives_the_tp_degree(tmp_path_factory):
    """nccl_layout/rank0 (tp2's rank 0 in the layout Kineto writes for NCCL: its collective records carry
    `Group size` 2), read alone: TP 2 from its all-reduces; its memory-bound shards get the weights lever.
    An env report tp that disagrees with the group size: the degree is not known."""
    _, one = _topn("nccl_r0", FIX / "nccl_layout" / "rank0.json.gz", tmp_path_factory=tmp_path_factory)
    sizes = {s["group_size"] for e in one["topn"]["entries"] for s in e.get("shapes") or [] if s.get("coll") == "all_reduce"}
    assert sizes == {2}
    tp, ev = tp_degree(one["topn"])
    assert tp == 2 and "group size of the run's all-reduces" in ev
    assert tp_degree(one["topn"], 2)[0] == 2
    bad, why = tp_degree(one["topn"], 4)
    assert bad is None and "tp 4 and the group size of the run's all-reduces (2) disagree" in why
    vs = [v for v in _gemm_verdicts(api.analyze(one["topn"], one["env"], one["config"], head_threshold_pct=0.0,
                                                head_cap=400)) if v["bound_type"] == "memory"]
    assert len(vs) == 2
    for v in vs:
        lv, = [x for x in v["levers_detail"] if x["kind"] == "lower_precision_weights"]
        assert "TP 2: the group size of the run's all-reduces" in lv["evidence"]


def test_eager_attention_kv_rule_reads_heads_per_rank(tmp_path_factory):
    """The KV rule's heads / tp. The TP traces run cuDNN SDPA (no batched GEMM), so the rule is checked on
    qwen3_static_eager's real QK^T [960,1,128] x [960,128,2816] over its 2816-slot static cache (24
    sequences x 40 heads), read as one rank of TP 2 of a model with twice its heads (config.json's 80 query,
    16 KV heads): with TP 2 known, 960 = 24 x 40 heads (80 / TP 2) and B is the cache record of 24
    sequences; without it, 960 = 12 x 80 heads matches no cache record: no KV claim."""
    from test_levers_origin import _CACHE as OC, _cfg, _ctx, _wide

    case = "qwen3_static_eager"
    _wide(case, tmp_path_factory)
    cfg = _cfg(case)
    hq, hk, d = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    wide = dict(cfg, num_attention_heads=2 * hq, num_key_value_heads=2 * hk)
    e = next(x for x in OC[case][1]["entries"] if any(s.get("batch") and s.get("K") == d for s in x.get("shapes") or []))
    ctx = dataclasses.replace(_ctx(case, e, "decode"), config=wide)
    sh = next(s for s in ctx.shapes if s.get("batch") and s["K"] == d)
    b = sh["batch"] // hq
    with_tp = origin.gemm_origin(sh, dataclasses.replace(ctx, tp=2, tp_evidence="TP 2"))
    assert with_tp.kind == "kv_cache" and with_tp.operand == "B"
    assert f"batch {sh['batch']} = {b} x {hq} heads (config.json's {2 * hq} / TP 2)" in with_tp.evidence
    assert f"of {sh['N']} slots (trace_evidence.kv_caches)" in with_tp.evidence
    without = origin.gemm_origin(sh, ctx)
    assert without.kind == "activation" and f"= {b // 2} x {2 * hq} heads" in without.evidence
    assert origin.gemm_origin(sh, _ctx(case, e, "decode")).kind == "kv_cache"     # its own config: as before


def test_fused_attention_reads_kv_heads_per_rank(tmp_path):
    """The fused attention's KV-heads rule (opclasses/attn.py necessary) with kv heads / tp: qwen3_static_sdpa's
    real cuDNN attention reads K/V repeat_kv'd to 40 heads (config.json: 8 KV heads). Read as one rank of
    TP 2 of a model with twice the heads (16 KV heads) and the env report's tp 2, it needs the same bytes as
    with its own config (8 KV heads on this rank, broadcast 5x); with the wide config and no TP degree, 16
    KV heads do not divide the 40 it carries: no broadcast is claimed."""
    from test_corpus import analyse

    case = "qwen3_static_sdpa"
    analyse(case, tmp_path)
    rd = tmp_path / case / "profile" / "round_1"
    env = json.loads((rd / "env_report.json").read_text())
    cfg = json.loads((Path(__file__).resolve().parent.parent / "fixtures" / "corpus" / "configs" / f"{case}.json").read_text())
    wide = dict(cfg, num_attention_heads=2 * cfg["num_attention_heads"], num_key_value_heads=2 * cfg["num_key_value_heads"])

    def attn(config, tp=None):
        art = api.analyze(str(rd / "profile_topN.json"), dict(env, tp=tp), config)
        return next(v for x in art["entries"] for v in (x.get("regime_verdicts") or [x])
                    if v["regime"] == "decode" and v["op_kind"] == "attn")
    own, per_rank, blind = attn(cfg), attn(wide, 2), attn(wide)
    hq, hk = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    assert own["bytes_necessary"] < own["bytes_est"]
    assert per_rank["bytes_necessary"] == pytest.approx(own["bytes_necessary"], rel=1e-12)
    assert any(f"K/V carry {hq} heads, config.json num_key_value_heads = {2 * hk} / TP 2 = {hk} on this rank" in x
               and f"broadcast {hq // hk}x" in x for x in per_rank["necessary_evidence"])
    assert not any("KV heads were broadcast" in x for x in blind["necessary_evidence"])
    assert blind["bytes_necessary"] > own["bytes_necessary"]
