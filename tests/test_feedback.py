"""Issue 12, the feedback loop of seed 002 section 8: two noise bands, the contradiction check
for any measurement (`roofline feedback`), round over round (`roofline compare`), and the
playbook's proposed target_eff with its evidence count. Predictions come from the worked example
(seed section 9); the measurements are the seed's own (MoE 1.047x isolated, -0.064% e2e;
attention 1.56x isolated)."""
import json
import shutil

import pytest
from click.testing import CliRunner

import seed_reader
from roofline import feedback
from roofline.cli import main
from roofline.feedback import NoiseBands

from conftest import EXAMPLE


@pytest.fixture
def run(tmp_path):
    """The worked example as a pipeline run root, analysed (round 1)."""
    d = tmp_path / "run"
    shutil.copytree(EXAMPLE, d)
    r = CliRunner().invoke(main, ["analyze", str(d / "profile" / "round_1" / "profile_topN.json")])
    assert r.exit_code == 0, r.output
    return d


def art_of(d, rnd=1):
    return json.loads((d / "profile" / f"round_{rnd}" / "profile_roofline.json").read_text())


def entry_of(art, name):
    return next(e for e in art["entries"] if e["name"] == name)


def test_two_noise_bands_each_where_it_belongs_and_configurable():
    # seed section 9: MoE predicted 1.023x, measured 1.047x isolated: calibrated, not contradicted
    j = feedback.judge_isolated(1.047, 1.023)
    assert j["real"] and not j["model_contradicted"]
    assert feedback.judge_isolated(1.56, 1.7)["model_contradicted"] is False     # attention: calibrated
    assert feedback.judge_isolated(3.2, 2.8)["model_contradicted"] is True
    assert feedback.judge_isolated(1.02, 2.0)["real"] is False                   # < 3.4%: not real
    assert feedback.judge_isolated(1.02, 2.0, NoiseBands(isolated=0.01))["real"] is True
    # e2e: -0.064% is inside the 0.5% serving band, never judged against the isolated band
    assert feedback.judge_e2e(-0.064, 0.59)["real"] is False
    assert feedback.judge_e2e(-0.064, 0.59)["error_pct"] == pytest.approx(-0.654)
    assert feedback.judge_e2e(-0.064, 0.59, NoiseBands(e2e_pct=0.05))["real"] is True
    assert feedback.judge_e2e(2.0, None)["real"] is True       # 2% would be "real" on either band
    with pytest.raises(feedback.FeedbackError, match="noise band isolated"):
        NoiseBands(isolated=-0.1)


def test_cli_feedback_flags_a_contradiction_prefers_the_measurement_and_writes_the_playbook(run):
    att0 = entry_of(art_of(run), "kernel_paged_attention_2d")
    x = round(att0["attainable_speedup"] * 1.2, 3)        # a kernel team beats the prediction by 20%
    r = CliRunner().invoke(main, ["feedback", str(run / "profile" / "round_1"), "--kernel", "paged_attention_2d",
                                  "--isolated-speedup", str(x)])
    assert r.exit_code == 0, r.output
    assert "model_contradicted: true" in r.stdout
    a = art_of(run)
    att = entry_of(a, "kernel_paged_attention_2d")
    assert att["model_contradicted"] is True and att["measured_attainable_speedup"] == x
    assert att["feedback"][0]["predicted_attainable_speedup"] == att0["attainable_speedup"]
    assert att["attainable_speedup"] == att0["attainable_speedup"]      # the prediction is kept beside it
    assert "the model was wrong, the measurement wins" in att["notes"]
    assert seed_reader.check(a) == []
    rec = feedback.read_records(run / "knowledge")[-1]
    assert rec["kernel"] == "kernel_paged_attention_2d" and rec["measured_isolated_speedup"] == x
    assert rec["predicted_attainable_speedup"] == att0["attainable_speedup"] and rec["model_contradicted"] is True
    md = (run / "knowledge" / "backend_playbook.md").read_text()
    assert f"| {att0['attainable_speedup']:.3f} |" in md and f"| {x:.3f} |" in md


def test_feedback_within_the_prediction_with_an_e2e_delta(run):
    res = feedback.record_feedback(run / "profile" / "round_1" / "profile_roofline.json", "fused_moe_kernel",
                                   1.047, -0.064)
    fb = res["feedback"]
    assert fb["model_contradicted"] is False and fb["isolated_real"] is True and fb["e2e_real"] is False
    moe = entry_of(art_of(run), "fused_moe_kernel")
    assert moe["model_contradicted"] is False
    assert fb["e2e_error_pct"] == pytest.approx(-0.064 - moe["expected_e2e_gain_pct"])
    rec = feedback.read_records(run / "knowledge")[-1]
    assert rec["measured_e2e_delta_pct"] == -0.064 and rec["op_class"] == "moe"


@pytest.mark.parametrize("args,msg", [
    (["--kernel", "nope", "--isolated-speedup", "1.1"], "no entry named 'nope'"),
    (["--kernel", "fused_moe", "--isolated-speedup", "-1"], "expected a positive number"),
    (["--kernel", "fused_moe", "--isolated-speedup", "1.1", "--isolated-band", "-2"], "noise band"),
])
def test_cli_feedback_rejects_bad_input_with_one_line(run, args, msg):
    before = (run / "profile" / "round_1" / "profile_roofline.json").read_bytes()
    r = CliRunner().invoke(main, ["feedback", str(run / "profile" / "round_1"), *args])
    assert r.exit_code == 2 and msg in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert (run / "profile" / "round_1" / "profile_roofline.json").read_bytes() == before


def test_cli_feedback_on_a_non_artifact(tmp_path):
    p = tmp_path / "x.json"
    p.write_text('{"entries": []}')
    r = CliRunner().invoke(main, ["feedback", str(p), "--kernel", "k", "--isolated-speedup", "1.1"])
    assert r.exit_code == 2 and "not a profile_roofline.json" in r.stderr


def _round_2(run, att_factor=1.56, drop=None, total_a=None, total_b=None):
    t = json.loads((run / "profile" / "round_1" / "profile_topN.json").read_text())
    if total_a is not None:
        t1 = dict(t, total_gpu_time_ms=total_a)
        (run / "profile" / "round_1" / "profile_topN.json").write_text(json.dumps(t1))
    t["round"] = 2
    t["entries"][1]["regimes"]["decode"]["base_latency_ms"] /= att_factor
    if drop:
        t["entries"] = [e for e in t["entries"] if e["name"] != drop]
    if total_b is not None:
        t["total_gpu_time_ms"] = total_b
    d = run / "profile" / "round_2"
    d.mkdir()
    (d / "profile_topN.json").write_text(json.dumps(t))
    return d


def test_compare_measures_the_change_against_round_a_and_fills_the_playbook(run):
    feedback.record_feedback(run / "profile" / "round_1", "kernel_paged_attention_2d", 1.56)   # no e2e yet
    assert feedback.read_records(run / "knowledge")[0]["measured_e2e_delta_pct"] is None
    b = _round_2(run)
    r = CliRunner().invoke(main, ["compare", str(run / "profile" / "round_1"), str(b), "--e2e-delta-pct", "3.1"])
    assert r.exit_code == 0, r.output
    res = feedback.compare(run / "profile" / "round_1", b, e2e_delta_pct=3.1, playbook_dir=False)
    rows = {x["kernel"]: x for x in res["kernels"]}
    att, moe = rows["kernel_paged_attention_2d"], rows["fused_moe_kernel"]
    assert att["measured_inrun_speedup"] == pytest.approx(1.56)
    assert att["measured_kernel_e2e_gain_pct"] == pytest.approx(8.86 * (1 - 1 / 1.56))
    assert att["time_change_real"] and not att["model_contradicted"]
    assert att["predicted_attainable_speedup"] == entry_of(art_of(run), "kernel_paged_attention_2d")["attainable_speedup"]
    assert moe["measured_inrun_speedup"] == pytest.approx(1.0) and moe["time_change_real"] is False
    assert res["e2e_real"] is True and res["e2e_source"] == "serving measurement (given)"
    recs = feedback.read_records(run / "knowledge")
    # the earlier feedback record got its e2e delta; one compare record for the changed kernel only
    assert [r_["measured_e2e_delta_pct"] for r_ in recs] == [3.1, 3.1]
    assert recs[1]["kernel"] == "kernel_paged_attention_2d" and recs[1]["measured_inrun_speedup"] == pytest.approx(1.56)
    md = (run / "knowledge" / "backend_playbook.md").read_text()
    assert md.count("| +3.10 |") == 2
    assert "1 record(s) appended, 1 earlier record(s) given measured_e2e_delta_pct" in r.stdout


def test_compare_e2e_from_gpu_time_per_step_and_a_kernel_fused_away(run):
    steps = 2033 + 24
    b = _round_2(run, drop="fused_moe_kernel", total_a=10000.0, total_b=7000.0)
    res = feedback.compare(run / "profile" / "round_1", b, playbook_dir=False)
    assert res["e2e_delta_pct"] == pytest.approx((10000 / steps - 7000 / steps) / (10000 / steps) * 100)
    moe = next(x for x in res["kernels"] if x["kernel"] == "fused_moe_kernel")
    # a kernel in one round only is no measured saving (issue 42, finding 7): its work may run in another kernel
    assert moe["status"].startswith("gone in B") and moe["measured_kernel_e2e_gain_pct"] is None
    assert moe["time_change_real"] is None and "not a measured saving" in moe["verdict"]
    res = feedback.compare(run / "profile" / "round_1", b, playbook_dir=run / "kb", kernels=("fused_moe_kernel",))
    assert not any(r_["kernel"] == "fused_moe_kernel" for r_ in feedback.read_records(run / "kb"))


def test_compare_rejects_a_missing_round(run):
    r = CliRunner().invoke(main, ["compare", str(run / "profile" / "round_1"), str(run / "nowhere")])
    assert r.exit_code == 2 and "no such file or folder" in r.stderr and "profile_topN.json" in r.stderr


def test_playbook_proposes_target_eff_per_class_with_the_evidence_count(run):
    a = art_of(run)
    att = entry_of(a, "kernel_paged_attention_2d")
    moe = entry_of(a, "fused_moe_kernel")
    for k, x in (("kernel_paged_attention_2d", 1.56), ("kernel_paged_attention_2d", 3.5),
                 ("kernel_paged_attention_2d", 2.0), ("fused_moe_kernel", 1.047),
                 ("fused_moe_kernel", 1.01)):   # the last is inside the 3.4% band: not evidence
        feedback.record_feedback(run / "profile" / "round_1", k, x)
    r = CliRunner().invoke(main, ["playbook", str(run / "knowledge")])
    assert r.exit_code == 0, r.output
    # attention: 3 real gains (records #1-#3), enough for a proposal: the median of what they reached
    p_att = sorted(min(1.0, att["roofline_pct"] * x) for x in (1.56, 3.5, 2.0))
    assert f"proposed target_eff[attn_decode] = {p_att[1]:.2f} (prior 0.50; evidence: 3 record(s), " \
           "1 contradicted the model; rests on records #1, #2, #3 of backend_playbook.jsonl)" in r.stdout
    # the MoE: one real gain (#4; #5 is inside the band): no proposal, and the line says why
    assert "proposed target_eff[moe]" not in r.stdout
    assert "no proposal for target_eff[moe]: 1 record(s) with a real gain, 3 needed (records #4)" in r.stdout
    assert "proposals only" in r.stdout
    from roofline.core import routing

    assert routing.TARGET_EFF["attn_decode"] == 0.50        # never applied silently


def test_hook_feedback_never_raises_and_records(run):
    from roofline import hook

    bad = hook.feedback(run / "profile" / "round_1", "nope", 1.2)
    assert bad["error"].startswith("FeedbackError") and "no entry named 'nope'" in bad["error"]
    ok = hook.feedback(run / "profile" / "round_1", "fused_moe_kernel", 1.047, -0.064, e2e_band=0.05)
    assert ok["error"] is None and ok["feedback"]["e2e_real"] is True       # the band is the caller's
    assert feedback.read_records(run / "knowledge")[-1]["measured_e2e_delta_pct"] == -0.064
