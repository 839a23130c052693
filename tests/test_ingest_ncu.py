"""Top-N from a real Nsight Compute report (ncu 2025.3.1 on the H200; tools/device/make_trace_fixtures.py
--ncu-small: linear -> layer_norm -> SiLU, twice, `-c 6 --set basic`), read two independent ways:
the binary .ncu-rep through ncu_report, and the CLI's raw-page CSV export of the same report."""
import csv
import json
import os

import pytest
from click.testing import CliRunner

from roofline.core.classify import short_name
from roofline.commands.topn import topn
from roofline.ingest.ncu import read_ncu

FIX = os.path.join(os.path.dirname(__file__), "..", "fixtures", "ncu_topn")
REP = os.path.join(FIX, "small.ncu-rep.gz")
CSV = os.path.join(FIX, "small_raw.csv")


def _csv_by_hand():
    """Independent count: sum gpu__time_duration.sum per Kernel Name straight from the CSV text."""
    rows = list(csv.reader(open(CSV)))
    h = rows[0]
    i, j = h.index("Kernel Name"), h.index("gpu__time_duration.sum")
    assert rows[1][j] == "ns"
    tot = {}
    for r in rows[2:]:
        t = tot.setdefault(r[i], [0.0, 0])
        t[0] += float(r[j].replace(",", "")) / 1000.0
        t[1] += 1
    return tot


def test_csv_reader_matches_hand_count():
    aggs, bad = read_ncu(CSV, "decode")
    assert bad == 0
    ref = _csv_by_hand()
    got = {a.name: [a.all_us, a.all_count] for a in aggs}
    assert got.keys() == ref.keys() and len(got) == 3
    for n in ref:
        assert got[n][0] == pytest.approx(ref[n][0], rel=1e-9) and got[n][1] == ref[n][1] == 2


def test_report_and_csv_agree():
    """The .ncu-rep (through ncu_report) and its CSV export: same kernels, durations, launch dims."""
    rep, _ = read_ncu(REP, "decode")
    cs, _ = read_ncu(CSV, "decode")
    key = lambda a: short_name(a.name)  # the two demangle templates differently
    r = {key(a): a for a in rep}
    c = {key(a): a for a in cs}
    assert r.keys() == c.keys() == {"nvjet_sm90_tst_64x32_64x16_1x2_h_bz_TNT", "vectorized_layer_norm_kernel",
                                    "vectorized_elementwise_kernel[silu_kernel]"}
    for k in r:
        assert r[k].all_us == pytest.approx(c[k].all_us, rel=1e-9)
        assert r[k].all_count == c[k].all_count == 2
        assert dict(r[k].launch_dims) == dict(c[k].launch_dims)


@pytest.mark.parametrize("src", [REP, CSV])
def test_topn_from_ncu(src, tmp_path):
    o = tmp_path / "t.json"
    res = CliRunner().invoke(topn, [src, "-o", str(o), "--decode-steps", "2"])
    assert res.exit_code == 0, res.output
    doc = json.load(open(o))
    ref = _csv_by_hand()
    assert doc["total_gpu_time_ms"] == pytest.approx(sum(v[0] for v in ref.values()) / 1000, rel=1e-9)
    assert [e["classification"] for e in doc["entries"]] == ["gemm", "norm", "elementwise"]
    assert doc["serving"] == {"n_decode_steps": 2, "n_prefill_steps": 0}
    for e in doc["entries"]:
        assert e["regimes"]["decode"]["launches_per_step"] == 1.0
    assert any("PROFILED kernels" in n for n in doc["notes"])
    assert doc["entries"][0]["editable"] is False


def test_ncu_without_steps_says_assumed(tmp_path):
    o = tmp_path / "t.json"
    res = CliRunner().invoke(topn, [CSV, "-o", str(o)])
    assert res.exit_code == 0
    assert "ASSUMED" in res.output
    assert json.load(open(o))["serving"]["n_decode_steps"] == 1


def _bad(tmp_path, name, data):
    p = tmp_path / name
    p.write_bytes(data)
    res = CliRunner().invoke(topn, [str(p), "-o", str(tmp_path / "o.json")])
    assert res.exit_code == 2, res.output
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert len(lines) == 1 and name in lines[0] and "Traceback" not in res.output, res.output
    return lines[0]


def test_reject_unloadable_report(tmp_path):
    assert "no profiled kernels" in _bad(tmp_path, "junk.ncu-rep", b"this is not a report" * 100)
    raw = open(REP, "rb").read()
    _bad(tmp_path, "cut.ncu-rep.gz", raw[: len(raw) // 3])


def test_reject_bad_csv(tmp_path):
    assert "Kernel Name" in _bad(tmp_path, "x.csv", b"a,b\n1,2\n")
    assert "gpu__time_duration.sum" in _bad(tmp_path, "y.csv", b'"ID","Kernel Name"\n"0","k"\n')
    _bad(tmp_path, "z.csv", b"")
