"""Stage-C re-run logic on the CPU, replaying measurements recorded on the H200
(fixtures/rerun/rerun_h200: `bash tools/device/rerun_demo.sh`)."""
import copy
import json
import math
import statistics

import pytest
from click.testing import CliRunner

from roofline import hook, playbook, rerun, rerun_counters
from roofline.cli import main
from roofline.report import to_markdown

from conftest import FIXTURES, ROOT, _gpu_available

RECORDED = FIXTURES / "rerun" / "rerun_h200" / "profile_roofline.json"
STAGE_B = FIXTURES / "rerun" / "profile" / "round_1" / "profile_roofline.json"
# issue 14: every level 1-10 and cuBLAS in one H200 run (the dispatch table is built from it alone)
BENCHES = [ROOT / "fixtures" / "ladder" / "i14_run3" / s / "bench_all.json" for s in ("start4_final", "start6_final")]


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
    assert rerun.shape_class(512, 5632, 1024) == "prefill"
    assert rerun.shape_class(1000, 3000, 2000) == "ragged"


def test_dispatch_table_is_built_from_the_measured_benches():
    bench = rerun.merge_benches([json.loads(p.read_text()) for p in BENCHES])
    table = rerun.build_dispatch_table(bench)
    assert table == rerun.default_dispatch_table()          # the shipped table is these benches'
    # the latest run wins where two runs measured the same (level, shape)
    assert len(bench["rows"]) == len({(r["level"], r["m"], r["n"], r["k"]) for r in bench["rows"]})
    best_prefill = table["classes"]["prefill"][0]
    rows = [r["pct_cublas"] for r in bench["rows"] if r["level"] == best_prefill["level"]
            and r.get("check_ok") and rerun.shape_class(r["m"], r["n"], r["k"]) == "prefill"]
    assert best_prefill["median_pct_cublas"] == pytest.approx(statistics.median(rows))
    # single-tile levels win the one-tile bench row but cannot run a 64x4096 decode shape
    lvl, why = rerun.choose_level(table, 64, 4096, 4096, "bf16")
    from roofline.ladder.registry import get_level

    assert get_level(lvl).supports(64, 4096, 4096) and "decode-skinny" in why
    assert rerun.choose_level(table, 128, 128, 64, "bf16")[0] == table["classes"]["decode-skinny"][0]["level"]
    lvl, why = rerun.choose_level(table, 1000, 3000, 2000, "bf16")
    assert why.startswith("ragged: level") and lvl == table["classes"]["ragged"][0]["level"]
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
    assert rerun.guard_verdict(speedup, predicted) == (verdict, contra)


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
        # confidence is raised only by the stage-C merge of measured bytes (rerun.restage), never here
        assert e["confidence"] == conf_before
    assert base["stage"] == "C"
    md = to_markdown(base)
    assert "## Predicted vs measured (stage C isolated re-runs)" in md and md.count("no real gain") >= 4


def test_playbook_append_read_and_summarize(tmp_path, recorded):
    for e in recorded["entries"]:
        if e.get("measured"):
            playbook.append_playbook(tmp_path, playbook.playbook_record(recorded, e))
    recs = playbook.read_playbook(tmp_path)
    assert len(recs) == 4 and all(r["measured_e2e_delta_pct"] is None for r in recs)
    summ = playbook.summarize_playbook(recs)["gemm"]
    reached = sorted(min(1.0, r["roofline_pct"] * r["measured_isolated_speedup"]) for r in recs)
    ratios = sorted(r["measured_isolated_speedup"] / r["predicted_attainable_speedup"] for r in recs)
    assert summ["n"] == 4
    assert summ["proposed_target_eff"] == reached[2] and summ["median_measured_over_predicted"] == ratios[2]
    md = (tmp_path / "backend_playbook.md").read_text()
    assert md.count("\n| 20") == 4
    res = CliRunner().invoke(main, ["playbook", str(tmp_path)])
    assert res.exit_code == 0 and "gemm" in res.stdout and "proposals only" in res.stdout


def test_recorded_playbook_matches_the_recorded_artifact(recorded):
    recs = playbook.read_playbook(FIXTURES / "rerun" / "rerun_h200" / "backend_playbook.jsonl")
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
    from roofline import rerun_measure

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
