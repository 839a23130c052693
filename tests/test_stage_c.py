"""Stage C merge: real Nsight Compute readings (fixtures/ncu, H200) sharpen a stage-A estimate."""
import json

import pytest
from click.testing import CliRunner

from roofline import api
from roofline.cli import main
from roofline.counters import load
from roofline.io.schema import validate_artifact

from conftest import FIXTURES, entry, h200_env, topn

NCU = FIXTURES / "ncu"
GEMM = "nvjet_sm90_tst_64x64_64x13_2x1_v_bz_NNT"   # bf16 64x8192x8192, measured on the H200


@pytest.fixture(scope="module")
def kcs():
    return load(NCU / "known_raw.csv")


def _kc(kcs, name):
    return next(k for k in kcs if k.name == name)


def test_stage_a_suspect_becomes_a_verdict_at_stage_c(kcs):
    kc = _kc(kcs, GEMM)
    # Stage A: the profiler knows the shape but not the dtype; env says fp32 -> the model counts
    # 4-byte operands, twice the real bytes, and the ratio comes out above the roof.
    e = entry(GEMM, 20.0, kc.t_ms, classification="gemm", est_shape={"M": 64, "N": 8192, "K": 8192})
    env = h200_env(model_dtype="fp32")
    a = api.analyze(topn(e), env)
    g = a["entries"][0]
    assert a["stage"] == "A" and g["suspect"] and g["headroom_class"] == "unknown"
    # fp32 operands put it right of the fp32 ridge: 8.6 GFLOP in 36 us is 4.6x the fp32 roof
    assert g["roof_axis"] == "compute"
    assert g["roofline_pct_raw"] == pytest.approx(2 * 64 * 8192 * 8192 / (kc.t_ms / 1e3) / a["peaks"]["flops"]["fp32"])
    assert g["hbm_util"] == pytest.approx(4 * (64 * 8192 + 8192 * 8192 + 64 * 8192) / (kc.t_ms / 1e3) / 4.8e12)
    # Stage C with the real counters: measured bytes, the bf16 roof the tensor cores really ran.
    c = api.analyze(topn(e), env, counters=kcs)
    validate_artifact(c)
    g = c["entries"][0]
    assert c["stage"] == "C" and not g["suspect"] and g["confidence"] == "high"
    assert g["bytes_measured"] == kc.dram_bytes
    assert g["hbm_util"] == pytest.approx(kc.dram_bytes / (kc.t_ms / 1e3) / 4.8e12)
    assert g["headroom_class"] in ("saturated", "moderate", "underperforming")
    assert g["compute_dtype"] == "bf16" and "tensor cores ran bf16" in g["notes"]
    # useful vs issued side by side; this cuBLAS kernel issued exactly 2MNK
    assert g["flops_issued"] == pytest.approx(2 * 64 * 8192 * 8192)
    assert g["padding_waste_ratio"] == pytest.approx(1.0)
    assert "MEASURED DRAM bytes" in g["notes"]


def test_unmatched_counter_rows_are_reported(kcs):
    e = entry(GEMM, 20.0, 0.04, classification="gemm", shapes=[{"M": 64, "N": 8192, "K": 8192}])
    a = api.analyze(topn(e), h200_env(), counters=kcs)
    assert len(a["unmatched_counters"]) == len(kcs) - 1


def test_l4_missing_bytes_keeps_stage_b_confidence(kcs):
    import copy

    kc = copy.copy(_kc(kcs, GEMM))
    kc.dram_bytes = None
    e = entry(GEMM, 20.0, kc.t_ms, classification="gemm", shapes=[{"M": 64, "N": 8192, "K": 8192}])
    a = api.analyze(topn(e), h200_env(), counters=[kc])
    g = a["entries"][0]
    assert g["confidence"] == "medium" and "L4" in g["notes"] and "bytes_measured" not in g


def test_cli_counters_end_to_end_and_bad_report(tmp_path, kcs):
    kc = _kc(kcs, GEMM)
    d = tmp_path / "r"
    d.mkdir()
    (d / "env_report.json").write_text(json.dumps(h200_env()))
    (d / "profile_topN.json").write_text(json.dumps(topn(entry(GEMM, 20.0, kc.t_ms, classification="gemm",
                                                                shapes=[{"M": 64, "N": 8192, "K": 8192}]))))
    res = CliRunner().invoke(main, ["analyze", str(d / "profile_topN.json"), "--counters", str(NCU / "known_raw.csv"),
                                    "--format", "json"])
    assert res.exit_code == 0, res.output
    art = json.loads(res.stdout)
    assert art["stage"] == "C" and art["entries"][0]["confidence"] == "high"
    bad = tmp_path / "bad.csv"
    bad.write_text("not,a,counter,file\n1,2,3,4\n")
    res = CliRunner().invoke(main, ["analyze", str(d / "profile_topN.json"), "--counters", str(bad)])
    assert res.exit_code == 2 and "bad.csv" in res.stderr and "\n" not in res.stderr.strip()


def test_unknown_device_takes_its_peaks_from_the_report(kcs):
    kc = _kc(kcs, GEMM)
    e = entry(GEMM, 20.0, kc.t_ms, classification="gemm", shapes=[{"M": 64, "N": 8192, "K": 8192}])
    a = api.analyze(topn(e), h200_env(gpu_name="Some GPU", gfx="sm_99"), counters=kcs)
    pk = a["peaks"]
    assert pk["source"] == "derived" and pk["confidence"] == "low"
    assert pk["hbm_bw_bytes_s"] == pytest.approx(4.8e12, rel=0.01)          # 1504 B/cycle x 3.2 GHz
    assert pk["flops"]["bf16"] == pytest.approx(540672 * 1.98e9)             # 132 SMs x 4096 x 1.98 GHz
    g = a["entries"][0]
    assert g["confidence"] == "low" and g["headroom_class"] == "unknown"     # L1: display only


def test_the_rerun_counters_file_is_a_counter_file(tmp_path):
    """roofline/counters/records.py: what a re-run writes, `counters.load` reads back (any field,
    the timing too); a file of another version or with an unknown field is refused in one line."""
    import json

    from roofline.counters import CounterReadError, KernelCounters, load
    from roofline.counters.records import records_text

    recs = [KernelCounters(name="nvjet_a", launches=1, source="rerun ncu-cli: cuBLAS isolated, L2 cold",
                           t_ms=0.5, dram_bytes=1.5e8, tensor_flops_by_dtype={"bf16": 2e12}, rerun={"ladder_t_ms": 0.4}),
            KernelCounters(name="gemm_b", launches=1, source="rerun: isolated timing, no counters", rerun={"x": 1})]
    p = tmp_path / "rerun_counters.json"
    p.write_text(records_text(recs))
    got = load(p)
    assert got == recs and got[1].read_nothing and not got[0].read_nothing
    doc = json.loads(p.read_text())
    for bad, why in ((dict(doc, version=2), "version"), (dict(doc, records=[{"name": "a", "launches": 1, "junk": 0}]),
                                                            "unknown field")):
        p.write_text(json.dumps(bad))
        with pytest.raises(CounterReadError, match=why):
            load(p)


def test_a_matched_record_becomes_one_measurement(kcs):
    """roofline/counters/measurement.py: a real ncu record is a reading with no isolated timing; a
    re-run's timing-only record has no reading and carries its timing; a re-run with counters both."""
    from roofline.counters import KernelCounters
    from roofline.counters.measurement import isolated_timings, measurements

    ncu = _kc(kcs, GEMM)
    timing_only = KernelCounters(name="gemm_b", launches=1, source="rerun: isolated timing, no counters",
                                 rerun={"ladder_t_ms": 0.4})
    both = KernelCounters(name="gemm_c", launches=1, source="rerun ncu-cli", t_ms=0.5, dram_bytes=1.5e8,
                          rerun={"ladder_t_ms": 0.3})
    m = measurements({"a": ncu, "b": timing_only, "c": both})
    assert m["a"].reading is ncu and m["a"].isolated is None and m["a"].dram_bytes == ncu.dram_bytes
    assert m["b"].reading is None and m["b"].isolated == {"ladder_t_ms": 0.4} and m["b"].t_ms is None
    assert m["c"].reading is both and m["c"].dram_bytes == 1.5e8 and m["c"].source == "rerun ncu-cli"
    assert isolated_timings(m) == {"b": {"ladder_t_ms": 0.4}, "c": {"ladder_t_ms": 0.3}}
