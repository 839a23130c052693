"""`roofline peaks list | show | validate | measure` and the measured H200 table."""
import subprocess
import sys

import pytest
import yaml
from click.testing import CliRunner

from roofline.cli import main
from roofline.commands import peaks_measure
from roofline.peaks import measure as pm, render
from roofline.peaks.validate import validate_table
from roofline.peaks import from_table, peaks_dir

from conftest import ROOT

H200 = peaks_dir() / "h200.yaml"


def cli(*args):
    return CliRunner().invoke(main, ["peaks", *args])


def test_list_one_line_per_table():
    r = cli("list")
    assert r.exit_code == 0, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == len(list(peaks_dir().glob("*.yaml")))
    h = next(ln for ln in lines if ln.startswith("h200 "))
    assert "NVIDIA H200" in h and "sm_90" in h and "4.80 TB/s (datasheet)" in h
    fl = yaml.safe_load(H200.read_text())["flops"]
    assert f"bf16 {fl['bf16']['measured']['value'] / 1e12:.0f} TFLOP/s (measured)" in h
    assert f"fp8 {fl['fp8']['measured']['value'] / 1e12:.0f} TFLOP/s (measured)" in h
    assert "fp8 5000 TFLOP/s (validated)" in next(ln for ln in lines if ln.startswith("mi355x"))


@pytest.mark.parametrize("key", ["h200", "NVIDIA H200", "h200 sxm", "H200"])
def test_show_by_stem_name_or_alias(key):
    r = cli("show", key)
    assert r.exit_code == 0, r.output
    assert r.output == H200.read_text()
    assert yaml.safe_load(r.output)["device"] == "NVIDIA H200"


def test_show_unknown_device_exits_2_with_one_line():
    r = cli("show", "TPU v9")
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "no peak table for 'TPU v9'" in lines[0] and "h200" in lines[0]


def test_validate_bundled_tables_ok():
    r = cli("validate")
    assert r.exit_code == 0, r.output
    assert r.output.count(": ok") == len(list(peaks_dir().glob("*.yaml")))


def _bad_tables(tmp_path):
    good = yaml.safe_load(H200.read_text())
    bad = yaml.safe_load(H200.read_text())
    bad["flops"]["fp16"]["measured"]["value"] = bad["flops"]["bf16"]["measured"]["value"] * 0.85
    bad["flops"]["fp16"]["measured"]["spread"] = {"p20": 1e14, "p80": 1e15}
    bad["flops"]["fp8"]["datasheet"]["value"] = -1
    del bad["flops"]["tf32"]["datasheet"]["source"]
    del bad["gfx"]
    (tmp_path / "good.yaml").write_text(yaml.safe_dump(good))
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(bad))
    return good, bad


def test_validate_flags_a_bad_table_and_exits_nonzero(tmp_path):
    _bad_tables(tmp_path)
    r = cli("validate", "--dir", str(tmp_path))
    assert r.exit_code == 1
    out = r.output
    assert "good.yaml: ok" in out
    assert "bad.yaml: missing key 'gfx'" in out
    assert "flops.fp8.datasheet.value: expected a positive number, got -1" in out
    assert "flops.tf32.datasheet.source: missing" in out
    assert "measured bf16" in out and "differ by 15.0% > 5%" in out
    assert "1 of 2 table(s) bad" in r.stderr


def test_validate_files_and_a_measured_value_outside_its_spread(tmp_path):
    t = yaml.safe_load(H200.read_text())
    v = t["hbm_bw_bytes_s"]["measured"]["value"]
    t["hbm_bw_bytes_s"]["measured"]["spread"] = {"p20": v * 1.02, "p80": v * 1.04}
    assert validate_table(t) == [f"hbm_bw_bytes_s.measured: value {v} outside its spread [{v * 1.02}, {v * 1.04}]"]
    (tmp_path / "x.yaml").write_text("device: [unclosed")
    r = cli("validate", str(tmp_path / "x.yaml"))
    assert r.exit_code == 1
    assert "x.yaml: not valid YAML (ParserError" in r.output or "x.yaml: not valid YAML (ScannerError" in r.output


def test_h200_table_carries_the_device_measurement_with_spread():
    t = yaml.safe_load(H200.read_text())
    assert validate_table(t) == []
    for where, fig in [("hbm", t["hbm_bw_bytes_s"])] + list(t["flops"].items()):
        if where == "fp64":
            assert "measured" not in fig  # no fp64 microbench
            continue
        m = fig["measured"]
        assert m["source"].startswith("microbench") and m["date"] in {r["date"] for r in m["runs"]}
        assert m["spread"]["p20"] <= m["value"] <= m["spread"]["p80"]
        assert fig["datasheet"]["value"] > m["value"]  # the datasheet figures are kept beside
    pk = from_table(t)
    assert pk.hbm_bw_bytes_s == 4.8e12 and pk.hbm_bw_kind == "datasheet"  # the pin rate stays the roof
    ok = dict((line.split()[0], good) for good, line in render.checks(t))
    assert ok["trivial"] and ok["bf16"] == (pk.compute_unusable_dtypes == [])


def test_measure_without_gpu_exits_2_with_one_line(monkeypatch):
    monkeypatch.setattr(pm, "gpu_unavailable_reason", lambda: "no GPU: torch.cuda.is_available() is False")
    r = cli("measure", "-o", "never.yaml")
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert lines == ["roofline peaks measure: no GPU: torch.cuda.is_available() is False"]
    assert r.stdout == ""


def test_measure_module_path_without_gpu(monkeypatch, capsys):
    monkeypatch.setattr(pm, "gpu_unavailable_reason", lambda: "no GPU: test")
    assert peaks_measure.main(["--out", "never.yaml"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["roofline peaks measure: no GPU: test"]


def test_measuring_code_imports_without_torch():
    code = ("import sys; import roofline.commands.peaks_measure, roofline.commands.peaks, roofline.peaks.measure; "
            "print('torch' in sys.modules)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "False"


def test_envelope_table_text_round_trips():
    from roofline.peaks import envelope as pe

    raws = [ROOT / "fixtures" / "peaks" / f for f in ("h200_measure_2026-11-29.raw.json",
                                                      "h200_measure_multishape_2026-11-29.raw.json",
                                                      "runs/h200_run1.raw.json")]
    t = pe.envelope_table(yaml.safe_load(H200.read_text()), pe.load_raw_runs(raws))
    back = yaml.safe_load(render.envelope_text(t))
    assert back == t
    assert back["flops"]["fp64"] == yaml.safe_load(H200.read_text())["flops"]["fp64"]  # no fp64 run: kept


def test_clock_samples_go_to_the_block_that_ran():
    windows = [(0.0, 0.02, "bf16"), (0.03, 0.05, "fp8"), (0.06, 1.0, "fp32")]
    stamped = [(0.01, 1980.0), (0.055, 1970.0), (0.5, 1500.0), (1.5, 345.0)]
    # 0.055 lies between fp8 and fp32: nearest end (both 0.005 away) goes to the first found
    assert pm.assign_samples(stamped, windows) == [("bf16", 1980.0), ("fp8", 1970.0), ("fp32", 1500.0)]
