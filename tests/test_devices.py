"""Issue 12: unknown devices (seed L1: datasheet catalogue, derivation from device properties,
no roof -> entries degrade, exit 0) and the pipeline's own peaks.md (seed section 1)."""
import gzip
import json
import shutil

import pytest
import yaml
from click.testing import CliRunner

from roofline import api, hook
from roofline.core import devices
from roofline.peaks import md as peaks_md
from roofline.cli import main
from roofline.peaks.validate import validate_table
from roofline.peaks import load_tables, resolve

from conftest import EXAMPLE, FIXTURES, entry, h200_env, topn

H200 = resolve("NVIDIA H200")


def gemm(name, pct, t_ms=0.05):
    return entry(name, pct, t_ms, classification="gemm", shapes=[{"M": 64, "N": 4096, "K": 4096}])


# ----------------------------------------------------------------- the datasheet catalogue
def test_catalogue_entries_are_valid_sourced_tables_the_measured_tables_do_not_cover():
    measured = {n.lower() for _, d in load_tables() for n in d.get("names", []) + [d["device"]]}
    cat = devices.catalogue()["devices"]
    assert len(cat) >= 12
    for d in cat:
        assert validate_table(d) == [], d["device"]
        assert not ({n.lower() for n in d["names"]} & measured), d["device"]
        f = d["flops"]
        if "bf16" in f and "fp16" in f:     # seed section 8: equal rates on these parts
            assert f["bf16"]["datasheet"]["value"] == f["fp16"]["datasheet"]["value"], d["device"]


@pytest.mark.parametrize("name,sms,boost_mhz,dtype", [
    # SM counts and boost clocks from the vendors' spec sheets: an independent count that the
    # per-SM tensor rates of the catalogue reproduce the catalogue's datasheet figures
    ("NVIDIA L40S", 142, 2520, "bf16"), ("NVIDIA L4", 58, 2040, "bf16"), ("NVIDIA A10", 72, 1695, "bf16"),
    ("NVIDIA A40", 84, 1740, "bf16"), ("NVIDIA H100 PCIe", 114, 1620, "bf16"),
    ("NVIDIA A100 80GB PCIe", 108, 1410, "bf16"), ("NVIDIA L40S", 142, 2520, "fp8"),
])
def test_per_sm_rates_and_datasheet_figures_agree(name, sms, boost_mhz, dtype):
    pk = devices.catalogue_lookup(name)
    cc = {"sm_89": "8.9", "sm_86": "8.6", "sm_90": "9.0", "sm_80": "8.0"}[pk.gfx]
    per = devices.catalogue()["per_sm_flops_per_clock"][cc][dtype]
    assert sms * boost_mhz * 1e6 * per == pytest.approx(pk.flops[dtype], rel=0.02)


@pytest.mark.parametrize("gpu,gfx,bw", [
    ("NVIDIA L40S", "sm_89", 864e9), ("NVIDIA H20", "sm_90", 4.0e12), ("NVIDIA GeForce RTX 4090", "sm_89", 1.008e12),
    ("AMD Instinct MI250X", "gfx90a", 3.2768e12), ("NVIDIA A10", "sm_86", 600e9), ("NVIDIA L4", "sm_89", 300e9),
])
def test_unknown_devices_resolve_from_the_catalogue_display_only(gpu, gfx, bw):
    a = api.analyze(topn(gemm("g", 30)), h200_env(gpu_name=gpu, gfx=gfx))
    pk = a["peaks"]
    assert (pk["source"], pk["confidence"], pk["origin"]) == ("derived", "low", "datasheet catalogue")
    assert pk["hbm_bw_bytes_s"] == bw
    g = a["entries"][0]
    assert g["modeled"] is True and g["confidence"] == "low" and g["headroom_class"] == "unknown"
    assert g["route"] == "pct_fallback"
    # the ratio is computed against the catalogue roof: bytes / t / bw
    assert g["hbm_util"] == pytest.approx(g["bytes_est"] / 0.05e-3 / bw)


def test_cli_on_an_l40s_exits_0(tmp_path):
    d = tmp_path / "r"
    d.mkdir()
    (d / "profile_topN.json").write_text(json.dumps(topn(gemm("g", 30))))
    (d / "env_report.json").write_text(json.dumps(h200_env(gpu_name="NVIDIA L40S", gfx="sm_89")))
    r = CliRunner().invoke(main, ["analyze", str(d / "profile_topN.json")])
    assert r.exit_code == 0, r.output
    assert json.loads((d / "profile_roofline.json").read_text())["peaks"]["device"] == "NVIDIA L40S"


# ----------------------------------------------------------------- derivation from properties
def _trace_props():
    with gzip.open(FIXTURES / "traces" / "mixed.json.gz", "rt") as fh:
        return json.load(fh)["deviceProperties"]


def test_derivation_from_cuda_device_properties_matches_the_formula_and_the_datasheet():
    rec = dict(_trace_props()[0], name="Some Hopper")   # a real record: 132 SMs, cc 9.0
    # the clocks a cudaDeviceProp carries (kHz) and the bus width: the H200's, as nvidia-smi reads them
    rec.update(clockRate=1980000, memoryClockRate=3201000, memoryBusWidth=6144)
    pk, missing = devices.derive_from_props(rec, "Some Hopper", "sm_90")
    assert missing == [] and pk.source == "derived" and pk.confidence == "low"
    assert pk.hbm_bw_bytes_s == 2 * 3201e6 * 6144 / 8
    assert pk.flops["bf16"] == 132 * 1980e6 * 4096
    # cross-check against the H200 datasheet figures of the measured table (within 10%)
    assert pk.hbm_bw_bytes_s == pytest.approx(H200.raw["hbm_bw_bytes_s"]["datasheet"]["value"], rel=0.03)
    assert pk.flops["bf16"] == pytest.approx(H200.raw["flops"]["bf16"]["datasheet"]["value"], rel=0.1)


def test_env_report_device_properties_are_used_for_an_unknown_gpu():
    props = dict(_trace_props()[0], name="Some Hopper", clockRate=1980000, memoryClockRate=3201000,
                 memoryBusWidth=6144)
    a = api.analyze(topn(gemm("g", 30)), h200_env(gpu_name="Some Hopper", gfx="sm_99", device_properties=props))
    assert a["peaks"]["origin"] == "device properties" and a["peaks"]["hbm_bw_bytes_s"] == 2 * 3201e6 * 6144 / 8
    assert a["entries"][0]["confidence"] == "low" and a["degraded"] == []


def test_a_trace_device_record_without_clocks_degrades_every_entry_with_the_reason():
    # PyTorch traces carry the SM count and compute capability but no clocks or bus width
    t = topn(gemm("g", 30), deviceProperties=[dict(r, name="Some Hopper") for r in _trace_props()])
    a = api.analyze(t, h200_env(gpu_name="Some Hopper", gfx="sm_99"))
    assert a["peaks"]["hbm_bw_bytes_s"] is None and a["peaks"]["flops"] == {}
    assert "lack memory clock and bus width; SM clock" in a["peaks"]["notes"][0]
    assert a["degraded"] == [{"name": "g", "reason": "no memory peak for Some Hopper"}]


def test_a_trace_device_record_naming_a_catalogue_gpu_uses_the_catalogue():
    t = topn(gemm("g", 30), deviceProperties=[dict(r, name="NVIDIA L40S") for r in _trace_props()])
    a = api.analyze(t, h200_env(gpu_name=None, gfx="sm_89"))
    assert a["peaks"]["origin"] == "datasheet catalogue" and a["peaks"]["device"] == "NVIDIA L40S"


def test_hook_on_an_unknown_device_writes_a_full_artifact_not_an_empty_one(tmp_path):
    rd = tmp_path / "profile" / "round_1"
    rd.mkdir(parents=True)
    (rd / "profile_topN.json").write_text(json.dumps(topn(gemm("g", 30))))
    (tmp_path / "env_report.json").write_text(json.dumps(h200_env(gpu_name="AMD Instinct MI250X", gfx="gfx90a")))
    s = hook.run(rd)
    assert s["skill_errors"] == [] and s["ranking_by_pct"] == ["g"]


# ----------------------------------------------------------------- the pipeline's peaks.md
SEED_PEAKS_MD = """# Hardware peaks (the pipeline's)

| gfx | GPU | HBM (TB/s) | FP8 (PFLOP/s) | BF16 (TFLOP/s) |
|---|---|---|---|---|
| gfx950 | AMD Instinct MI355X | 8.0 | 5.0 | 2500 |
| gfx942 | AMD Instinct MI300X | 5.3 | 2.6 | 1300 |
"""


def _example_run(tmp_path, peaks_text=None):
    d = tmp_path / "run"
    shutil.copytree(EXAMPLE, d)
    if peaks_text is not None:
        (d / "peaks.md").write_text(peaks_text)
    return d


def test_peaks_md_beside_the_env_report_is_used_and_the_worked_example_still_reproduces(tmp_path):
    d = _example_run(tmp_path, SEED_PEAKS_MD)
    a = api.analyze(d / "profile" / "round_1" / "profile_topN.json")
    pk = a["peaks"]
    assert (pk["source"], pk["origin"], pk["confidence"]) == ("table", "pipeline peaks.md", "high")
    assert pk["hbm_bw_bytes_s"] == 8.0e12 and pk["flops"] == {"fp8": 5.0e15, "bf16": 2.5e15}
    assert set(pk["sources"].values()) == {"pipeline peaks.md"}
    moe = next(e for e in a["entries"] if e["name"] == "fused_moe_kernel")
    assert round(moe["roofline_pct"], 2) == 0.88 and moe["headroom_class"] == "saturated"
    assert moe["ridge_point"] == pytest.approx(625.0)


def test_peaks_md_units_are_read_tolerantly():
    a = peaks_md.parse(SEED_PEAKS_MD)
    b = peaks_md.parse("| GPU | gfx | Memory bandwidth | fp8 | bf16 [TFLOPS] |\n|:--|:--|--:|--:|--:|\n"
                       "| AMD Instinct MI355X | gfx950 | 8,000 GB/s | ~5000 TFLOP/s | 2500 |\n"
                       "| AMD Instinct MI300X | gfx942 | 5300 GB/s | 2.6 PFLOP/s | 1.3 PFLOP/s |\n")
    assert a == b
    tib = peaks_md.parse("| gfx | HBM (TiB/s) |\n|---|---|\n| gfx950 | 1 |\n")
    assert tib[0]["hbm_bw_bytes_s"] == 2.0 ** 40


@pytest.mark.parametrize("text,why", [
    ("no table here\n", "no markdown table"),
    ("| a | b |\n|---|---|\n| 1 | 2 |\n", "no table with a key column"),
    ("| gfx | HBM |\n|---|---|\n| gfx950 | 8.0 |\n", "no unit in the header or the cell"),
    ("| gfx | HBM (TB/s) |\n|---|---|\n| gfx950 | fast |\n", "not a positive"),
])
def test_malformed_peaks_md_is_rejected_with_one_line(text, why):
    with pytest.raises(peaks_md.PeaksMdError, match=why) as ei:
        peaks_md.parse(text)
    assert "\n" not in str(ei.value)


def test_malformed_peaks_md_is_one_warning_line_not_a_failed_run(tmp_path):
    d = _example_run(tmp_path, "| gfx | HBM |\n|---|---|\n| gfx950 | 8.0 |\n")
    r = CliRunner().invoke(main, ["analyze", str(d / "profile" / "round_1" / "profile_topN.json")])
    assert r.exit_code == 0, r.output
    warn = [ln for ln in r.stderr.splitlines() if "warning" in ln]
    assert len(warn) == 1 and "peaks.md" in warn[0] and "no unit" in warn[0] and "built-in peak tables" in warn[0]
    art = json.loads((d / "profile" / "round_1" / "profile_roofline.json").read_text())
    assert art["peaks"]["origin"] == "built-in table"          # the YAML tables are the fallback
    assert [s["where"] for s in art["skill_errors"]] == ["peaks"]


def test_cli_peaks_flag_and_hook_peaks_argument_take_a_peaks_md(tmp_path):
    d = _example_run(tmp_path)
    pm = tmp_path / "pipeline_peaks.md"
    pm.write_text(SEED_PEAKS_MD.replace("| 8.0 |", "| 7.5 |"))
    topn_p = d / "profile" / "round_1" / "profile_topN.json"
    r = CliRunner().invoke(main, ["analyze", str(topn_p), "--peaks", str(pm), "--format", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["peaks"]["hbm_bw_bytes_s"] == 7.5e12
    s = hook.run(topn_p.parent, peaks=str(pm))
    art = json.loads(open(s["json"]).read())
    assert art["peaks"]["hbm_bw_bytes_s"] == 7.5e12 and art["peaks"]["origin"] == "pipeline peaks.md"


def test_peaks_md_without_a_row_for_the_device_falls_back_to_the_tables(tmp_path):
    d = _example_run(tmp_path, SEED_PEAKS_MD.replace("gfx950 | AMD Instinct MI355X", "gfx1100 | Radeon"))
    a = api.analyze(d / "profile" / "round_1" / "profile_topN.json")
    assert a["peaks"]["origin"] == "built-in table" and a["peaks"]["device"] == "AMD Instinct MI355X"
    assert "no row for AMD Instinct MI355X (gfx950)" in a["skill_errors"][0]["error"]


def test_the_pipeline_bf16_fp16_check_applies_to_peaks_md():
    text = "| gfx | HBM (TB/s) | BF16 (TFLOP/s) | FP16 (TFLOP/s) |\n|---|---|---|---|\n| gfx950 | 8 | 1250 | 2500 |\n"
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as td:
        p = Path(td) / "peaks.md"
        p.write_text(text)
        pk = peaks_md.lookup(p, None, "gfx950")
    assert pk.compute_unusable_dtypes == ["bf16", "fp16"] and pk.compute_confidence("bf16") == "low"


def test_catalogue_file_parses_as_yaml_with_float_values():
    data = yaml.safe_load(devices._catalogue_path().read_text())
    assert devices._catalogue_path().parent.parent.name == "peaks"   # with the peak tables, not among them
    for d in data["devices"]:
        assert isinstance(d["hbm_bw_bytes_s"]["datasheet"]["value"], float), d["device"]


def test_topn_from_a_real_trace_carries_device_properties_and_they_identify_the_gpu(tmp_path):
    from roofline.commands.topn import topn as topn_cmd

    o = tmp_path / "profile" / "round_1" / "profile_topN.json"
    # --no-env-report: this test writes its own env report at the run root
    r = CliRunner().invoke(topn_cmd, [str(FIXTURES / "traces" / "mixed.json.gz"), "-o", str(o), "--no-env-report"])
    assert r.exit_code == 0, r.output
    doc = json.loads(o.read_text())
    assert doc["device_properties"] == _trace_props()
    # an env report that names no GPU and an unknown device key: the trace's record names the H200
    a = api.analyze(o, h200_env(gpu_name=None, gfx="sm_99"))
    assert a["peaks"]["device"] == "NVIDIA H200" and a["peaks"]["origin"] == "built-in table"
    assert "identified by its device-properties record" in a["peaks"]["notes"][-1]
    # the same record under an unknown name, without clocks: no roof, every entry degrades, exit 0
    doc["device_properties"] = [dict(d, name="Some Hopper") for d in doc["device_properties"]]
    o.write_text(json.dumps(doc))
    (tmp_path / "env_report.json").write_text(json.dumps(h200_env(gpu_name=None, gfx="sm_99")))
    r = CliRunner().invoke(main, ["analyze", str(o)])
    assert r.exit_code == 0, r.output
    art = json.loads((o.parent / "profile_roofline.json").read_text())
    assert art["entries"] and all(not e["modeled"] for e in art["entries"])
    assert "no memory peak for Some Hopper" in {d["reason"] for d in art["degraded"]}
    assert "lack memory clock and bus width; SM clock" in art["peaks"]["notes"][0]


@pytest.mark.parametrize("props", [
    {"name": "Odd GPU", "numSms": "many", "computeMajor": "x", "clockRate": None, "memoryBusWidth": -5},
    {"name": 7, "numSms": 132, "compute_capability": "nine"},
    "not a record",
    [1, 2, 3],
])
def test_an_unusable_device_description_degrades_instead_of_failing(tmp_path, props):
    d = tmp_path / "r"
    d.mkdir()
    (d / "profile_topN.json").write_text(json.dumps(topn(gemm("g", 30))))
    (d / "env_report.json").write_text(json.dumps(h200_env(gpu_name="Odd GPU", gfx="gfx1234",
                                                           device_properties=props)))
    r = CliRunner().invoke(main, ["analyze", str(d / "profile_topN.json")])
    assert r.exit_code == 0, r.output
    art = json.loads((d / "profile_roofline.json").read_text())
    assert art["peaks"]["flops"] == {} and art["degraded"][0]["reason"] == "no memory peak for Odd GPU"
