"""Stage-C re-run logic on the CPU, replaying measurements recorded on the H200
(fixtures/rerun/rerun_h200: `bash tools/device/rerun_demo.sh`)."""
import copy
import json
import math
import statistics

import pytest

from roofline.ladder import dispatch
from click.testing import CliRunner

from roofline import hook, rerun
from roofline.stagec import playbook, profiler as rerun_counters
from roofline.cli import main
from roofline.report.artifact import to_markdown

from conftest import FIXTURES, ROOT, _gpu_available

RECORDED = FIXTURES / "rerun" / "rerun_h200" / "profile_roofline.json"
STAGE_B = FIXTURES / "rerun" / "profile" / "round_1" / "profile_roofline.json"
# issue 14: every level 1-10 and cuBLAS in one H200 run (the dispatch table is built from it alone)
BENCHES = [ROOT / "fixtures" / "ladder" / "levels7_10_h200" / s / "bench_all.json" for s in ("start4_levels1_10_bench_sanitize", "start6_levels1_10_bench")]
MID_BENCHES = [ROOT / "fixtures" / "ladder" / "grouped_fp8_h200" / s / "bench_mid.json" for s in ("start4_round2", "start5_round3")]


@pytest.fixture(scope="module")
def recorded():
    return json.loads(RECORDED.read_text())


def test_gemm_problems_dense_and_moe():
    assert rerun.gemm_problems({"op_class": "gemm", "shape": {"M": 512, "N": 5632, "K": 1024},
                                "dtypes": {"act": "bf16"}})[0].count == 1.0
    ps = rerun.gemm_problems({"op_class": "moe", "shape": {"M": 64, "E": 256, "top_k": 8, "hidden": 2048,
                                                           "inter": 512}, "dtypes": {"act": "fp8"}})
    hit = 256 * (1 - (1 - 1 / 256) ** 512)
    # one grouped GEMM per stage: 64 x 8 = 512 token-expert rows over 256 experts (the re-run draws
    # the split), gate/up N = 2 x inter, K = hidden; down N = hidden, K = inter
    assert [(p.M, p.N, p.K, p.E, p.tokens, p.top_k) for p in ps] == [(512, 1024, 2048, 256, 64, 8),
                                                                     (512, 2048, 512, 256, 64, 8)]
    assert ps[0].count == 1.0 and ps[0].dtype == "fp8" and ps[0].grouped
    assert ps[0].experts_hit_model == pytest.approx(hit)
    assert rerun.gemm_problems({"op_class": "attn", "shape": {}}) == []
    mix = rerun.gemm_problems({"op_class": "gemm", "shape": {"M": 8, "N": 3072, "K": 1024}, "dtypes": {"act": "bf16"},
                               "shapes_used": [{"shape": {"M": 8, "N": 3072, "K": 1024}, "weight": 0.5},
                                               {"shape": {"M": 8, "N": 5632, "K": 1024}, "weight": 0.5}]})
    assert [(p.N, p.count) for p in mix] == [(3072, 0.5), (5632, 0.5)]


def test_shape_classes():
    assert rerun.shape_class(64, 4096, 4096) == "decode-skinny"
    assert rerun.shape_class(512, 5632, 1024) == "mid"            # 4 x 22 = 88 tiles of 128x256: one wave
    assert rerun.shape_class(1000, 3000, 2000) == "mid"
    assert rerun.shape_class(2048, 5632, 1024) == "prefill"
    assert rerun.shape_class(3000, 5000, 1000) == "ragged"
    # mid ends at two waves of 128x256 tiles on 132 SMs, and at M = 1024
    assert rerun.shape_class(1024, 33 * 256 - 256, 4096) == "mid" and rerun.shape_class(1024, 33 * 256, 4096) == "prefill"
    assert rerun.shape_class(1025, 4096, 4096) == "ragged" and rerun.shape_class(257, 4096, 4096) == "mid"


def test_dispatch_table_is_built_from_the_measured_benches():
    # as `python -m roofline.rerun --build-dispatch A B --class mid C D OUT` builds it: the mid-shape
    # benches inform the mid class only
    bench = rerun.merge_benches([json.loads(p.read_text()) for p in BENCHES] +
                                [dispatch.only_class(json.loads(p.read_text()), "mid") for p in MID_BENCHES])
    table = rerun.build_dispatch_table(bench)
    assert table == rerun.default_dispatch_table()          # the shipped table is these benches'
    # the latest run wins where two runs measured the same (level, shape)
    assert len(bench["rows"]) == len({(r["level"], r["name"], r["m"], r["n"], r["k"]) for r in bench["rows"]})
    best_prefill = table["classes"]["prefill"][0]
    rows = [r["pct_cublas"] for r in bench["rows"] if r["level"] == best_prefill["level"]
            and r.get("check_ok") and rerun.shape_class(r["m"], r["n"], r["k"]) == "prefill"]
    assert best_prefill["median_pct_cublas"] == pytest.approx(statistics.median(rows))
    # single-tile levels win the one-tile bench row but cannot run a 64x4096 decode shape
    lvl, why = rerun.choose_level(table, 64, 4096, 4096, "bf16")
    from roofline.ladder.registry import get_level

    assert get_level(lvl).supports(64, 4096, 4096) and "decode-skinny" in why
    # a benched shape whose class pick was > 3 % below the best build there has its own pick (round 8): 128x128x64
    # ran level 4 at 92 % of cuBLAS, level 10 at 81 %
    assert rerun.choose_level(table, 128, 128, 64, "bf16")[0] == table["cases"]["128x128x64"]["level"] == 4
    assert rerun.choose_level(table, 128, 128, 128, "bf16")[0] == table["classes"]["decode-skinny"][0]["level"]
    lvl, why = rerun.choose_level(table, 3000, 5000, 1000, "bf16")
    assert why.startswith("ragged: level") and lvl == table["classes"]["ragged"][0]["level"]
    lvl, why = rerun.choose_level(table, 1000, 3000, 2000, "bf16")     # a mid shape: the named build
    assert why.startswith("mid: level 9 (build l09_mid)") and lvl == "l09_mid"
    # the stopping rule: each class's default is the lowest level within the noise band of the best
    for rows in table["classes"].values():
        best = max(r["median_pct_cublas"] for r in rows)
        inside = [r["level"] for r in rows if r["median_pct_cublas"] >= best * (1 - rerun.NOISE_BAND_ISOLATED)]
        assert rows[0]["level"] == min(inside) and rows[0]["within_noise_of_best"]
    assert rerun.choose_level(table, 512, 512, 512, "fp8") == (None, "dtype fp8 is not supported by the ladder (bf16 only)")
    assert rerun.choose_level(table, 512, 512, 512, "bf16", arch="sm_80")[0] is None
    assert rerun.choose_level(None, 512, 512, 512, "bf16")[0] is None


def test_dispatch_order_keeps_the_simpler_level_inside_the_band():
    rows = [{"level": 9, "median_pct_cublas": 97.0}, {"level": 6, "median_pct_cublas": 95.0},
            {"level": 5, "median_pct_cublas": 90.0}]
    out = rerun.dispatch_order(rows)
    assert [r["level"] for r in out] == [6, 9, 5]            # 95 >= 97 * (1 - 0.034): level 6 stays
    assert [r["within_noise_of_best"] for r in out] == [True, True, False]
    out = rerun.dispatch_order([{"level": 9, "median_pct_cublas": 100.0}, {"level": 6, "median_pct_cublas": 96.0}])
    assert out[0]["level"] == 9                              # beyond the band: the complex level wins
    assert rerun.dispatch_order([]) == []


@pytest.mark.parametrize("speedup,predicted,verdict,contra", [
    (0.78, 1.3, "no real gain: the best isolated kernel is slower than the in-run kernel", False),
    (1.02, 1.3, "no real gain (inside the 3.4% isolated noise band)", False),
    (1.2, 1.3, "real gain, within the prediction", False),
    (1.6, 1.3, "measured speedup exceeds the predicted attainable: the model was wrong, the measurement wins", True),
    (1.31, 1.3, "real gain, within the prediction", False),   # within the band of the prediction
])
def test_guards(speedup, predicted, verdict, contra):
    from roofline.core.judge import judge_isolated

    j = judge_isolated(speedup, predicted, words="rerun")
    assert (j["verdict"], j["model_contradicted"]) == (verdict, contra)


def test_one_judge_and_its_boundaries():
    """Exactly 1 + band is inside the band (not a gain), 1 - band too (not a regression); the next
    float beyond either is real. Every stage-C verdict (re-run, feedback, compare, the playbook's
    evidence) goes through this one judge, so they agree at the boundary."""
    from roofline.core import judge
    from roofline.stagec import playbook

    b = rerun.NOISE_BAND_ISOLATED
    hi, lo = 1.0 + b, 1.0 - b
    for words in ("rerun", "like-for-like", "feedback"):
        assert judge.judge_isolated(hi, None, words=words)["outcome"] == "inside"
        assert judge.judge_isolated(math.nextafter(hi, 2.0), None, words=words)["outcome"] == "gain"
        assert judge.judge_isolated(lo, None, words=words)["outcome"] == "inside"
        assert judge.judge_isolated(math.nextafter(lo, 0.0), None, words=words)["outcome"] == "slower"
    assert judge.judge_isolated(hi, None)["real"] is False
    assert judge.contradicts(1.3 * hi, 1.3) is False and judge.contradicts(math.nextafter(1.3 * hi, 9), 1.3)
    # the playbook counts a speedup of exactly 1 + band as no evidence, like the judge
    rec = {"measured_isolated_speedup": hi, "roofline_pct": 0.5, "op_class": "gemm"}
    assert playbook.propose_priors([rec])["gemm"]["evidence"] == 0
    rec["measured_isolated_speedup"] = math.nextafter(hi, 2.0)
    assert playbook.propose_priors([rec])["gemm"]["evidence"] == 1
    # the re-run's write-back: a like-for-like ratio of exactly 1 + band is no real gain
    e = {"name": "nvjet_x", "t_ms": 1.0, "launches_per_logical_op": 1, "roof_axis": "memory", "bytes_est": 1e6,
         "attainable_speedup": 2.0, "notes": ""}
    art = {"entries": [e], "peaks": {"hbm_bw_bytes_s": 4.8e12}}
    out = rerun.write_back(art, "nvjet_x", {"ladder_t_ms": 1.0, "cublas_t_ms": hi, "check_ok": True})
    assert out["measured"]["verdict"] == f"no real gain (inside the {b:.1%} isolated noise band)"


@pytest.mark.parametrize("fix", ["rerun", "rerun_mixed"])
def test_write_back_replays_the_recorded_measurements(fix):
    recorded = json.loads((FIXTURES / fix / "rerun_h200" / "profile_roofline.json").read_text())
    base = json.loads((FIXTURES / fix / "profile" / "round_1" / "profile_roofline.json").read_text())
    assert base["stage"] == "B"
    measured = [e for e in recorded["entries"] if e.get("measured")]
    assert len(measured) == 4                       # every GEMM head of the real prefill Top-N
    for rec in measured:
        m = rec["measured"]
        meas = {k: m[k] for k in ("problems", "ladder_level", "ladder_t_ms", "ladder_t_ms_p20", "ladder_t_ms_p80",
                                  "cublas_t_ms", "cublas_t_ms_p20", "cublas_t_ms_p80", "check_ok", "counters",
                                  "dispatch_reason", "device", "time_utc")}
        conf_before = next(x for x in base["entries"] if x["name"] == rec["name"])["confidence"]
        e = rerun.write_back(base, rec["name"], meas)
        current = e["t_ms"] * e.get("launches_per_logical_op", 1)
        # like for like: the in-run kernel is the library's (nvjet), so the verdict rests on ladder
        # vs library, both isolated under the same L2 state, projected onto the in-run time
        like = m["cublas_t_ms"] / m["ladder_t_ms"]
        assert e["measured_attainable_speedup"] == pytest.approx(like)
        assert e["measured"]["speedup_basis"] == "ladder vs library, both isolated"
        assert e["measured"]["projected_in_run_t_ms"] == pytest.approx(current / like)
        lo, hi = e["measured"]["ladder_vs_library_speedup_range"]
        assert lo == pytest.approx(m["cublas_t_ms_p20"] / m["ladder_t_ms_p80"]) and lo <= like <= hi
        assert e["measured"]["cublas_roofline_pct"] == pytest.approx(
            e["flops_est"] / (m["cublas_t_ms"] / 1e3) / base["peaks"]["flops"][e["compute_dtype"]]
            if e["roof_axis"] == "compute" else e["bytes_est"] / (m["cublas_t_ms"] / 1e3) / base["peaks"]["hbm_bw_bytes_s"])
        # the in-run kernel is cuBLAS (nvjet): isolation alone costs cublas_isolated / in-run
        assert e["measured"]["isolation_ratio"] == pytest.approx(m["cublas_t_ms"] / current)
        assert e["measured"]["isolation_ratio"] > 1.0    # cold L2 in isolation: slower than in the run
        # confidence is raised only by the stage-C merge of measured bytes (the re-analysis), never here
        assert e["confidence"] == conf_before
    assert base["stage"] == "C"
    md = to_markdown(base)
    assert "## Predicted vs measured (stage C isolated re-runs)" in md and md.count("no real gain") >= 4


def test_playbook_append_read_and_propose(tmp_path, recorded):
    for e in recorded["entries"]:
        if e.get("measured"):
            playbook.append_playbook(tmp_path, playbook.rerun_record(recorded, e))
    recs = playbook.read_records(tmp_path)
    assert len(recs) == 4 and all(r["measured_e2e_delta_pct"] is None for r in recs)
    assert all(list(r) == list(playbook.RECORD_KEYS) for r in recs)        # the one schema
    # every recorded re-run was no real gain: none is evidence for a new target_eff
    assert all(r["measured_isolated_speedup"] <= 1 + rerun.NOISE_BAND_ISOLATED for r in recs)
    prop = playbook.propose_priors(recs)["gemm"]
    assert prop["evidence"] == 0 and prop["proposed_target_eff"] is None
    md = (tmp_path / "backend_playbook.md").read_text()
    assert md.count("\n| 20") == 4
    res = CliRunner().invoke(main, ["playbook", str(tmp_path)])
    assert res.exit_code == 0 and "gemm" in res.stdout and "proposals only" in res.stdout


def test_old_playbook_records_still_read():
    """A re-run record written before the one schema (no op_kind, regime, source, ...) reads back
    with those keys unknown, and counts as evidence by its own fields."""
    recs = playbook.read_records(FIXTURES / "rerun_real" / "decode" / "knowledge")
    assert recs and all(set(playbook.RECORD_KEYS) <= set(r) for r in recs)
    raw = [json.loads(x) for x in (FIXTURES / "rerun_real" / "decode" / "knowledge" / "backend_playbook.jsonl")
           .read_text().splitlines() if x.strip()]
    assert all("op_kind" not in r for r in raw)        # they are the old schema
    assert [r["measured_isolated_speedup"] for r in recs] == [r["measured_isolated_speedup"] for r in raw]
    assert all(r["op_kind"] is None and r["model_contradicted"] is False for r in recs)


def test_recorded_playbook_matches_the_recorded_artifact(recorded):
    recs = playbook.read_records(FIXTURES / "rerun" / "rerun_h200" / "backend_playbook.jsonl")
    by = {e["name"]: e for e in recorded["entries"]}
    for r in recs:
        assert r["measured_isolated_speedup"] == by[r["kernel"]]["measured_attainable_speedup"]


@pytest.mark.skipif(_gpu_available(), reason="checks the no-GPU path")
def test_cli_rerun_without_gpu_changes_nothing(tmp_path):
    p = tmp_path / "profile_roofline.json"
    p.write_text(STAGE_B.read_text())
    before = p.read_bytes()
    res = CliRunner().invoke(main, ["rerun", str(p)])
    assert res.exit_code == 2
    from roofline.stagec import timing as rerun_measure

    assert res.stderr.strip() == f"roofline rerun: {rerun_measure.no_gpu_reason()}: nothing re-run, artifact unchanged"
    assert p.read_bytes() == before


def test_hook_rerun_never_raises(tmp_path):
    r = hook.rerun(tmp_path / "missing.json")
    assert r["rerun"] == [] and r["error"]


def test_counters_backend_follows_the_versions(monkeypatch):
    import sys
    import types

    monkeypatch.setattr(rerun_counters.shutil, "which", lambda name: "/usr/bin/ncu")
    monkeypatch.setattr(rerun_counters, "ncu_version", lambda ncu=None: (2025, 3, 1))
    monkeypatch.setitem(sys.modules, "nsight", types.ModuleType("nsight"))
    import importlib.metadata as md

    for ver, expect, said in (("1.1.0", "ncu-cli", "nsight-python 1.1.0 needs ncu >= 2026.2.1, this ncu is 2025.3.1"),
                              ("0.9.6", "nsight-python", "nsight-python 0.9.6 with ncu 2025.3.1")):
        monkeypatch.setattr(md, "version", lambda name, v=ver: v)
        backend, why = rerun_counters.counters_backend()
        assert backend == expect and why.startswith(said), why
    monkeypatch.setattr(rerun_counters, "ncu_version", lambda ncu=None: (2026, 3, 1))
    monkeypatch.setattr(md, "version", lambda name: "1.1.0")
    assert rerun_counters.counters_backend()[0] == "nsight-python"
    monkeypatch.setattr(rerun_counters.shutil, "which", lambda name: None)
    assert rerun_counters.counters_backend()[0] is None


def test_a_build_benched_on_few_of_its_class_shapes_is_not_the_class_default():
    """A median over one shape says little: a row benched on fewer than half of its class's shapes
    is kept (ranked) but never the default, however high its median."""
    rows = [{"level": 10, "median_pct_cublas": 86.0, "shapes_benched": 5},
            {"level": 9, "build": "l09_mid", "median_pct_cublas": 90.0, "shapes_benched": 1}]
    out = rerun.dispatch_order(rows)
    assert out[0]["level"] == 10 and [r.get("build") for r in out] == [None, "l09_mid"]
    rows[1]["shapes_benched"] = 3          # benched on more than half: the better median wins
    assert rerun.dispatch_order(rows)[0].get("build") == "l09_mid"
    # a bench made for one class informs that class only
    b = {"rows": [{"level": 9, "m": m, "n": 6144, "k": 4096} for m in (200, 512, 4096)]}
    assert [r["m"] for r in dispatch.only_class(b, "mid")["rows"]] == [512]


FP8_TRACE = ROOT / "fixtures" / "ladder" / "grouped_fp8_h200" / "start8_round5" / "rerun_fp8_trace"


def test_write_back_of_a_cutlass_kernel_its_library_op_launched_is_like_for_like():
    """The real fp8 MoE trace's head is torch's CUTLASS grouped kernel (editable by name), launched
    by aten::_scaled_grouped_mm: the re-run's baseline torch._scaled_grouped_mm runs that very kernel,
    so the verdict is ladder vs library. Replayed from the H200 re-run: the prefill row's ladder build
    (l15_pp_m128) ran slower than the library and must not read as a gain (it once did: isolation
    made torch faster than in the run, and the in-run-vs-best-isolated basis credited that to the ladder)."""
    from roofline import api

    recorded = json.loads((FP8_TRACE / "rerun_profile_roofline.json").read_text())
    art = api.analyze(FP8_TRACE / "profile_topN.json", FP8_TRACE / "env_report.json",
                      FP8_TRACE / "config_qwen3moe_fp8_grouped.json")
    measured = [e for e in recorded["entries"] if e.get("measured")]
    assert len(measured) == 2
    keys = ("problems", "ladder_level", "ladder_build", "ladder_t_ms", "ladder_t_ms_p20", "ladder_t_ms_p80",
            "cublas_t_ms", "cublas_t_ms_p20", "cublas_t_ms_p80", "check_ok", "library", "l2_mode")
    seen = {}
    for rec in measured:
        m = rec["measured"]
        e = next(x for x in art["entries"] if x["name"] == rec["name"])
        assert "aten::_scaled_grouped_mm" in e["aten_ops"]          # the trace's link, read, not assumed
        out = rerun.write_back(art, rec["name"], {k: m[k] for k in keys})
        like = m["cublas_t_ms"] / m["ladder_t_ms"]
        assert out["measured"]["speedup_basis"] == "ladder vs library, both isolated"
        assert out["measured_attainable_speedup"] == pytest.approx(like)
        seen[m["ladder_build"]] = (like, out["measured"]["verdict"])
    like, verdict = seen["l15_pp_m128"]
    assert like < 1 - rerun.NOISE_BAND_ISOLATED and verdict.startswith("no real gain: the ladder level is slower")
    like, verdict = seen["l11_fp8_tn32"]
    assert like > 1 + rerun.NOISE_BAND_ISOLATED and verdict == "real gain, within the prediction"


def test_write_back_names_the_library_when_it_alone_beats_an_in_run_kernel():
    """An in-run kernel that is neither the library's nor launched by its op (a hand-written one):
    the basis is in-run vs the best isolated; where the library is that best and the ladder is slower
    than it, the verdict says the gain is the library op's."""
    e = {"name": "my_grouped_kernel", "t_ms": 2.0, "launches_per_logical_op": 1, "roof_axis": "compute",
         "bytes_est": 1e6, "flops_est": 1e12, "compute_dtype": "fp8", "attainable_speedup": 3.0, "notes": "",
         "aten_ops": {"aten::my_op": 4}}
    art = {"entries": [e], "peaks": {"hbm_bw_bytes_s": 4.8e12, "flops": {"fp8": 1.47e15}}}
    out = rerun.write_back(art, e["name"], {"ladder_t_ms": 1.25, "cublas_t_ms": 1.0, "check_ok": True,
                                            "library": "torch._scaled_grouped_mm"})
    assert out["measured"]["speedup_basis"].startswith("in-run kernel (not a library one)")
    assert out["measured_attainable_speedup"] == pytest.approx(2.0)
    assert "by the library op torch._scaled_grouped_mm, not the ladder" in out["measured"]["verdict"]
    assert "ran 0.800x the library" in out["measured"]["verdict"]
