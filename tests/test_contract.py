"""Issue 12, the artifact contract of seed 002 section 2: each item as a test a reader written to
the seed would pass, and the strict reader (tests/seed_reader.py) shown to reject what it must.

The autouse fixture in conftest.py runs the strict reader and the project's schema over every
artifact the suite produces; the tests here make sure the artifact kinds it must cover exist
(degraded, suspect, dispatch-bound, stage A, unknown device) and are written to disk."""
import copy
import json

import pytest

import seed_reader
from roofline import api, hook
from roofline.report import artifact as report
from roofline.peaks import resolve

from conftest import EXAMPLE, FIXTURES, entry, h200_env, topn

PBW = 4.8e12
TOPN = EXAMPLE / "profile" / "round_1" / "profile_topN.json"


def gemm(name, pct, bw_frac, M=64, N=4096, K=4096, **kw):
    nbytes = 2 * (M * K + K * N + M * N)
    return entry(name, pct, nbytes / (bw_frac * PBW) * 1e3, shapes=[{"M": M, "N": N, "K": K}],
                 classification="gemm", **kw)


def E(art, name):
    return next(e for e in art["entries"] if e["name"] == name)


@pytest.fixture(scope="module")
def example():
    return api.analyze(TOPN)


# ----------------------------------------------------------------- the strict reader can fail
def test_the_strict_reader_accepts_the_worked_example_and_rejects_each_broken_promise(example):
    t = json.loads(TOPN.read_text())
    good = json.loads(report.to_json(example))
    assert seed_reader.check(good, t) == []

    def broken(mut):
        a = copy.deepcopy(good)
        mut(a)
        return seed_reader.check(a, t)

    assert any("op_class 'norm'" in p for p in broken(lambda a: a["entries"][0].update(op_class="norm")))
    assert any("missing notes" in p for p in broken(lambda a: a["entries"][1].pop("notes")))
    assert any("byte_reduction_levers on a underperforming head" in p
               for p in broken(lambda a: a["entries"][1].update(byte_reduction_levers=["x"])))
    assert any("not the Top-N's verbatim value" in p
               for p in broken(lambda a: a["entries"][0].update(pct_gpu_time=26.450001)))
    assert any("launches_per_step 80.0" in p for p in broken(lambda a: a["entries"][0].update(launches_per_step=80.0)))
    assert any("suspect entry has a verdict" in p for p in broken(lambda a: a["entries"][0].update(suspect=True)))
    assert any("attainable_speedup 9.0 outside" in p
               for p in broken(lambda a: a["entries"][1].update(attainable_speedup=9.0)))
    assert any("expected_e2e_gain_pct != regime_pct_gpu_time" in p
               for p in broken(lambda a: a["entries"][1].update(expected_e2e_gain_pct=1.0)))
    assert any("regime_pct_gpu_time 9.0 outside" in p
               for p in broken(lambda a: a["entries"][1].update(regime_pct_gpu_time=9.0)))
    assert any("one regime, but regime_pct_gpu_time 20.0" in p
               for p in broken(lambda a: a["entries"][0].update(regime_pct_gpu_time=20.0)))
    assert any("ranking_by_expected_gain buries" in p
               for p in broken(lambda a: a.update(ranking_by_expected_gain=a["ranking_by_expected_gain"][::-1])))
    assert any("peaks.source 'file'" in p for p in broken(lambda a: a["peaks"].update(source="file")))
    assert any("bound_type latency but the utilizations say memory" in p
               for p in broken(lambda a: a["entries"][0].update(bound_type="latency")))


@pytest.mark.broken_artifact("writes an artifact with op_class 'norm' to show the checker reports it")
def test_the_conftest_hook_checks_written_files(tmp_path, monkeypatch):
    # what the autouse fixture runs over a file: the same reader; a broken file is reported
    import conftest

    art = api.analyze(TOPN)
    art["entries"][0]["op_class"] = "norm"
    # write_artifact refuses a schema-breaking artifact (it validates first): write the file raw
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "profile_roofline.json").write_text(report.to_json(art))
    with pytest.raises(Exception):
        report.write_artifact(art, tmp_path / "y")
    assert not (tmp_path / "y" / "profile_roofline.json").exists()
    problems = conftest._contract_problems(json.loads((tmp_path / "x" / "profile_roofline.json").read_text()),
                                           json.loads(TOPN.read_text()))
    assert any("closed set" in p for p in problems) and any(p.startswith("schema:") for p in problems)


def test_the_project_schema_rejects_the_same_broken_promises(example):
    import jsonschema

    from roofline.io.schema import validate_artifact

    good = json.loads(report.to_json(example))
    validate_artifact(good)
    for mut in (lambda a: a["entries"][0].update(op_class="norm"), lambda a: a["entries"][1].pop("hbm_util"),
                lambda a: a["entries"][1].update(byte_reduction_levers=["x"]),
                lambda a: a["peaks"].update(source="file"),
                lambda a: a["entries"][0].update(suspect=True, bytes_upper_bound=None)):
        a = copy.deepcopy(good)
        mut(a)
        with pytest.raises(jsonschema.ValidationError):
            validate_artifact(a)


# ----------------------------------------------------------------- item 1: closed op_class
def test_norm_and_quant_are_elementwise_with_their_kind_kept_and_comm_is_its_own_kind():
    a = api.analyze(topn(entry("rms_norm_kernel", 30, 0.02, shapes=[{"elems_in": 64 * 4096}]),
                         entry("per_token_quant_fp8", 20, 0.02, shapes=[{"elems_in": 64 * 4096}]),
                         entry("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 10, 1.0)), h200_env())
    n, q, c = E(a, "rms_norm_kernel"), E(a, "per_token_quant_fp8"), E(a, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL")
    assert (n["op_class"], n["op_kind"]) == ("elementwise", "norm")
    assert (q["op_class"], q["op_kind"]) == ("elementwise", "quant")
    # a collective is op kind comm, op_class unknown: the seed's closed set has no collective (issue 34);
    # its model is on the interconnect roof; without its message
    # size it degrades, and the reason says where the size comes from
    assert (c["op_class"], c["op_kind"]) == ("unknown", "comm") and c["modeled"] is False
    assert "In msg nelems" in {d["name"]: d["reason"] for d in a["degraded"]}[c["name"]]
    # the finer kind still picks the prior: a norm at 0.85
    assert n["target_eff"] == 0.85


# ----------------------------------------------------------------- item 2: every field, null
def test_degraded_and_no_verdict_entries_carry_every_seed_field_as_null():
    a = api.analyze(topn(entry("mystery_kernel_xyz", 30, 1.0), gemm("tiny", 20, 0.5, M=1, N=64, K=64)), h200_env())
    for e in a["entries"]:
        assert set(seed_reader.ENTRY) <= set(e)
    m = E(a, "mystery_kernel_xyz")
    for k in ("bytes_est", "flops_est", "achieved_bw_bytes_s", "hbm_util", "roofline_pct", "target_eff",
              "attainable_speedup", "expected_e2e_gain_pct", "roofline_pct_raw", "bytes_upper_bound"):
        assert m[k] is None, k
    assert m["byte_reduction_levers"] == [] and m["other_levers"] == []


# ----------------------------------------------------------------- item 3: levers
def test_byte_reduction_levers_only_on_saturated_heads_latency_levers_elsewhere():
    # config.json's hidden_size 4096 makes B [4096, 4096] a weight: the lower-precision lever's evidence
    a = api.analyze(topn(gemm("sat", 30, 0.85), gemm("lat", 20, 0.3)), h200_env(), {"hidden_size": 4096})
    sat, lat = E(a, "sat"), E(a, "lat")
    assert sat["headroom_class"] == "saturated" and sat["byte_reduction_levers"]
    assert lat["headroom_class"] == "underperforming" and lat["bound_type"] == "latency"
    assert lat["byte_reduction_levers"] == []
    assert any(x.startswith("split-K") for x in lat["other_levers"])
    assert any(x.startswith("occupancy") for x in lat["other_levers"])


def test_an_unsaturated_moe_keeps_the_stop_reading_lever_out_of_byte_reduction_levers(example_topn, example_env,
                                                                                       example_config):
    moe = example_topn["entries"][0]
    moe["shapes"][0]["M"] = 8          # 64 pairs touch ~56 of 256 experts: all-expert bytes ~4.5x
    a0 = api.analyze(example_topn, example_env, example_config)
    hit = next(x for x in E(a0, "fused_moe_kernel")["alternatives"] if x["model"] == "experts_hit")
    moe["regimes"]["decode"]["base_latency_ms"] *= hit["roofline_pct_raw"] / 0.4   # experts_hit at 40%
    a = api.analyze(example_topn, example_env, example_config)
    m = E(a, "fused_moe_kernel")
    assert not next(x for x in m["alternatives"] if x["model"] == "all_experts")["feasible"]
    assert m["headroom_class"] == "underperforming" and m["byte_reduction_levers"] == []
    assert any(x.startswith("stop reading unrouted experts") for x in m["other_levers"])


# ----------------------------------------------------------------- item 4: attention context
def test_attention_point_estimate_is_the_mean_context_and_max_is_only_the_range_top(example):
    att = E(example, "kernel_paged_attention_2d")
    alts = {x["model"]: x for x in att["alternatives"]}
    # the point estimate's bytes ARE the mean-context model's (isl + osl/2 = 1536), not the max's
    assert att["bytes_est"] == alts["mean_context"]["bytes_est"]
    assert att["bytes_est"] == 64 * 1536 * 2 * 256 * 2 * 2
    assert att["roofline_pct"] == pytest.approx(alts["mean_context"]["roofline_pct_raw"])
    assert att["roofline_pct_range"] == [pytest.approx(alts["mean_context"]["roofline_pct_raw"]),
                                         pytest.approx(alts["max_context"]["roofline_pct_raw"])]
    assert "point estimate at the mean context (seq_len=1536" in att["notes"]
    assert "max context seq_len=2048 (isl + osl) is only the upper end of the displayed range" in att["notes"]


# ----------------------------------------------------------------- item 5: ranking
def test_gain_ranking_puts_verdicts_first_then_the_rest_by_pct_gpu_time():
    # issue 35 item 3 (docs/artifact.md): a user reads #gain 1 as the best bet, so an entry the tool
    # gives no verdict ("kernel tuning cannot help", or low confidence) is never #gain 1 over one with
    # "big": stage A (no captured shape) -> no verdict; "sat": a +0.00% saturated GEMM
    big = entry("big_gemm", 40, 0.05, classification="gemm", est_shape={"M": 64, "N": 4096, "K": 4096})
    a = api.analyze(topn(gemm("sat", 45, 0.95), big, gemm("und", 8, 0.2)), h200_env())
    assert E(a, "sat")["expected_e2e_gain_pct"] == 0.0
    # stage A: low confidence, no verdict; its provisional gain is display only, not a rank key
    assert E(a, "big_gemm")["headroom_class"] == "unknown" and E(a, "big_gemm")["confidence"] == "low"
    und_gain = E(a, "und")["expected_e2e_gain_pct"]
    assert 0 < und_gain < 40
    assert a["ranking_by_expected_gain"] == ["und", "sat", "big_gemm"]
    assert "come after those with one in `#gain`, by their % GPU" in report.to_markdown(a)
    # the no-verdict entries among themselves: by pct_gpu_time (seed section 7)
    small = entry("small_gemm", 20, 0.05, classification="gemm", est_shape={"M": 64, "N": 4096, "K": 4096})
    b = api.analyze(topn(gemm("sat", 30, 0.95), small, big), h200_env())
    assert b["ranking_by_expected_gain"] == ["sat", "big_gemm", "small_gemm"]


# ----------------------------------------------------------------- item 6: verbatim
def test_pct_gpu_time_is_copied_verbatim_and_counts_stay_integers(tmp_path):
    t = topn(gemm("g", 40, 0.5, lps=32), entry("mystery_k", 7, 1.0, lps=3))
    d = tmp_path / "profile" / "round_1"
    d.mkdir(parents=True)
    (d / "profile_topN.json").write_text(json.dumps(t))
    (tmp_path / "env_report.json").write_text(json.dumps(h200_env()))
    s = hook.run(d)
    text = (d / "profile_roofline.json").read_text()
    art = json.loads(text)
    g, m = E(art, "g"), E(art, "mystery_k")
    assert type(g["pct_gpu_time"]) is int and g["pct_gpu_time"] == 40
    assert type(m["pct_gpu_time"]) is int and type(m["launches_per_step"]) is int
    assert type(g["launches_per_step"]) is int and g["launches_per_step"] == 32
    assert '"pct_gpu_time": 40,' in text and '"pct_gpu_time": 40.0' not in text
    assert s["degraded"] == 1


# ----------------------------------------------------------------- every artifact kind on disk
def test_every_artifact_kind_is_written_and_read_by_the_strict_reader(tmp_path):
    """Degraded, suspect, dispatch-bound, stage A, stage C and unknown-device artifacts, written by
    the hook; the autouse fixture reads each file back with the strict reader after this test."""
    kinds = {}

    def run(name, entries, env=None, **kw):
        d = tmp_path / name / "profile" / "round_1"
        d.mkdir(parents=True)
        (d / "profile_topN.json").write_text(json.dumps(topn(*entries)))
        (tmp_path / name / "env_report.json").write_text(json.dumps(env or h200_env()))
        s = hook.run(d, **kw)
        kinds[name] = json.loads((d / "profile_roofline.json").read_text())
        return s

    run("degraded", [entry("mystery_kernel_xyz", 30, 1.0), gemm("g", 20, 0.5)])
    run("suspect", [gemm("too_fast", 30, 1.7)])
    run("dispatch", [entry("tiny_copy", 30, 0.002, classification="elementwise", shapes=[{"elems_in": 1024}])])
    run("stage_a", [entry("g_est", 30, 0.05, classification="gemm", est_shape={"M": 64, "N": 4096, "K": 4096})])
    run("unknown_device", [gemm("g", 30, 0.5)], env=h200_env(gpu_name="NVIDIA L40S", gfx="sm_89"))
    run("no_roof", [gemm("g", 30, 0.5)], env=h200_env(gpu_name="Mystery GPU", gfx="gfx1100"))
    assert kinds["degraded"]["degraded"][0]["name"] == "mystery_kernel_xyz"
    assert E(kinds["suspect"], "too_fast")["suspect"] is True
    assert E(kinds["dispatch"], "tiny_copy")["bound_type"] == "latency"
    assert E(kinds["dispatch"], "tiny_copy")["headroom_class"] == "unknown"
    assert kinds["stage_a"]["stage"] == "A"
    assert kinds["unknown_device"]["peaks"]["origin"] == "datasheet catalogue"
    assert kinds["unknown_device"]["peaks"]["hbm_bw_bytes_s"] == 864e9
    assert E(kinds["unknown_device"], "g")["confidence"] == "low"
    assert kinds["no_roof"]["degraded"][0]["reason"] == "no memory peak for Mystery GPU"
    for k, a in kinds.items():
        assert seed_reader.check(a) == [], k


def test_stage_c_artifact_passes_the_strict_reader():
    art = api.analyze(FIXTURES / "hook" / "round_b_topN.json", FIXTURES / "hook" / "env_report.json", None,
                      counters=FIXTURES / "ncu" / "known_raw.csv")
    assert art["stage"] == "C"
    assert seed_reader.check(json.loads(report.to_json(art)),
                             json.loads((FIXTURES / "hook" / "round_b_topN.json").read_text())) == []


def test_peaks_block_source_is_the_seeds_closed_set_for_a_yaml_peaks_file(tmp_path):
    import shutil

    from roofline.peaks import peaks_dir

    f = tmp_path / "h200.yaml"
    shutil.copy(peaks_dir() / "h200.yaml", f)
    a = api.analyze(topn(gemm("g", 30, 0.5)), h200_env(), peaks_file=f)
    assert a["peaks"]["source"] == "table" and a["peaks"]["origin"] == "peaks file"
    assert a["peaks"]["hbm_bw_bytes_s"] == resolve("NVIDIA H200").hbm_bw_bytes_s
