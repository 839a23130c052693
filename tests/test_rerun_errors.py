"""Stage C's failures are raised inside and recorded at the edge (issue 15, knot 4): a failed ncu run
raises CounterCollectError in roofline.stagec.profiler; the re-run of an artifact
(roofline.stagec.rerun, the hook's and the CLI's) records it as the L4 `measured.counters.error` line
and keeps the isolated timing, which is replayed here from the H200 recording
(fixtures/rerun/rerun_h200)."""
import json
import shutil
import subprocess
import types

import pytest

from roofline.stagec import profiler as rerun_counters, timing as rerun_measure
from roofline import rerun as rerun_top
from roofline.io.errors import CounterCollectError, RerunError, RooflineError
from roofline.core.opclasses import Problem

from conftest import FIXTURES

RECORDED = FIXTURES / "rerun" / "rerun_h200" / "profile_roofline.json"
STAGE_B = FIXTURES / "rerun" / "profile" / "round_1"


def test_a_failed_ncu_run_raises_its_last_line(monkeypatch):
    said = "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters"
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: types.SimpleNamespace(returncode=1, stdout="",
                                                                                  stderr="==PROF== x\n" + said + "\n"))
    with pytest.raises(CounterCollectError) as ei:
        rerun_counters.collect_mix_counters([Problem("dense", 64, 128, 256, "bf16", 1.0)], 3, ncu="/usr/bin/ncu")
    assert str(ei.value) == said
    assert isinstance(ei.value, RooflineError) and isinstance(ei.value, RerunError)


def test_no_ncu_is_not_a_failure(monkeypatch):
    monkeypatch.setattr(rerun_counters.shutil, "which", lambda name: None)
    assert rerun_counters.collect_mix_counters([Problem("dense", 64, 128, 256, "bf16", 1.0)], 3) is None
    assert rerun_counters.collect_counters(Problem("dense", 64, 128, 256, "bf16", 1.0), 3) is None


def test_the_rerun_records_a_counter_failure_as_l4(tmp_path, monkeypatch):
    recorded = {e["name"]: e["measured"] for e in json.loads(RECORDED.read_text())["entries"] if e.get("measured")}
    for f in ("profile_topN.json", "profile_roofline.json"):
        shutil.copy(STAGE_B / f, tmp_path / f)
    art_path = tmp_path / "profile_roofline.json"
    art = json.loads(art_path.read_text())
    by_key = {}
    for e in art["entries"]:
        if e["name"] in recorded:
            m = recorded[e["name"]]
            by_key[tuple((p["M"], p["N"], p["K"]) for p in m["problems"])] = m

    def replay(probs, lvl, seed=0, l2="cold"):   # the H200's measurement of these problems
        m = by_key[tuple((p.M, p.N, p.K) for p in probs)]
        return {k: m[k] for k in ("problems", "ladder_level", "ladder_t_ms", "ladder_t_ms_p20", "ladder_t_ms_p80",
                                  "cublas_t_ms", "cublas_t_ms_p20", "cublas_t_ms_p80", "check_ok", "device",
                                  "time_utc")} | {"l2_mode": l2}

    def fail(*a, **k):
        raise CounterCollectError("ncu failed: no permission to read the counters")

    monkeypatch.setattr(rerun_measure, "device_arch", lambda: "sm_90a")
    monkeypatch.setattr(rerun_measure, "measure_problems", replay)
    monkeypatch.setattr(rerun_counters, "collect_mix_counters", fail)
    res = rerun_top.rerun_artifact(art_path, counters=True, playbook_dir=tmp_path / "knowledge")
    assert sorted(res["rerun"]) == sorted(recorded)
    out = json.loads(art_path.read_text())
    for e in out["entries"]:
        if e["name"] in recorded:
            assert e["measured"]["counters"] == {"error": "ncu failed: no permission to read the counters"}
            assert e["measured"]["ladder_t_ms"] == recorded[e["name"]]["ladder_t_ms"]
            assert e["confidence"] != "high"          # no measured bytes were merged
    assert out["stage"] == "C"


def test_no_gpu_is_a_typed_error(tmp_path, monkeypatch):
    shutil.copy(STAGE_B / "profile_roofline.json", tmp_path / "profile_roofline.json")
    monkeypatch.setattr(rerun_measure, "device_arch", lambda: None)
    with pytest.raises(RerunError, match="CuPy is not installed|no GPU: CuPy is installed"):
        rerun_top.rerun_artifact(tmp_path / "profile_roofline.json")
