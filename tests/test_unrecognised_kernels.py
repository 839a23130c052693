"""A kernel no op-class rule recognises (issue 32: Triton / cub kernels with no aten shape): with
Nsight Compute counters it gets a measured verdict; without them its degraded reason says exactly
what would give one, and names the op its launches ran inside. Real data: the gpt-oss decode step
under `ncu --set roofline` (cub's DeviceScanKernel of a cumsum) and the Qwen3-Next trace."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import hybrid_corpus as hc
from roofline import api
from roofline.core import classify

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "fixtures" / "ncu_roofline" / "gptoss_decode_roofline_raw.csv.gz"
SCAN = "DeviceScanKernel"


@pytest.fixture(scope="module")
def report_topn(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("scan") / "profile" / "round_1" / "profile_topN.json"
    r = subprocess.run([sys.executable, "-m", "roofline.cli", "topn", str(REPORT), "-o", str(out), "--force", "--top",
                        "400"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-400:]
    return out


def _only(topn: Path, key: str, drop: tuple = ()) -> dict:
    doc = json.loads(topn.read_text())
    doc["entries"] = [{k: v for k, v in e.items() if k not in drop} for e in doc["entries"] if key in e["name"]]
    assert len(doc["entries"]) == 1
    dst = topn.with_name(f"only_{len(drop)}.json")
    dst.write_text(json.dumps(doc))
    return next(e for e in api.analyze(str(dst), head_threshold_pct=0.0)["entries"])


def test_with_counters_an_unrecognised_kernel_gets_a_measured_verdict(report_topn):
    e = _only(report_topn, SCAN)
    assert classify.classify(e["name"]) == "unknown" and e["op_kind"] == "unknown"
    assert e["modeled"] and e["shape_source"] == "measured" and e["bytes_measured"] > 0
    assert e["target_eff"] is None and e["headroom_class"] == "unknown"    # no prior for what is not recognised


def test_without_counters_the_reason_says_what_would_give_a_verdict(report_topn):
    e = _only(report_topn, SCAN, drop=("counters",))
    assert not e["modeled"]
    why = e["notes"]
    for needed in ("`classification` in its Top-N entry", "recurrent", "scatter_add", "`shapes` or `est_shape`",
                   "dram__bytes.sum", "gpu__time_duration.sum", "--counters"):
        assert needed in why, needed


def test_the_reason_names_the_op_it_ran_inside():
    """The same cub kernel in a trace, its classification taken away: the op the profiler recorded
    around its launches is named."""
    src = Path(hc.topn_path("qwen3next_fla"))
    e = _only(src, "DeviceScanKernel", drop=("classification", "op_class", "shapes", "shape_launches",
                                             "shape_base_latency_ms", "shape_regimes", "dtypes"))
    assert not e["modeled"] and "its launches ran inside aten::cumsum" in e["notes"]
