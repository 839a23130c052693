"""Stage C's numbers from today's code, against independent counts (no GPU).

1. The recorded H200 re-runs (fixtures/rerun_real/: `roofline rerun --counters`, 2026-12-01) are
   replayed on the CPU: the stage-B artifact and the Top-N it came from go through
   `rerun_artifact` with the device's timing and counter runs replaced by what the H200 recorded
   for exactly those problems. The stage-C figures are then checked against counts made here, not
   by the code under test: bytes from the recorded per-problem DRAM counters weighted by the
   Top-N's launches per shape, time from the trace (the Top-N's base latency), FLOPs from the
   shapes (2MNK), the roof axis from the peak table's ridge. The same replay with
   launches_per_logical_op = 2 checks the per-launch / per-logical-op scaling.
2. `analyze --counters` with the real Nsight Compute CSV (fixtures/ncu/known_raw.csv) read here with
   the csv module: each matched entry's counters, measured bytes and utilisations.
"""
from __future__ import annotations

import copy
import csv
import json
import shutil
from pathlib import Path

import pytest

from roofline import api, rerun as rerun_top
from roofline.report import artifact as report
from roofline.stagec import playbook, profiler, timing

from conftest import FIXTURES

RR = FIXTURES / "rerun_real"
TIMES = ("problems", "ladder_level", "ladder_t_ms", "ladder_t_ms_p20", "ladder_t_ms_p80", "cublas_t_ms",
         "cublas_t_ms_p20", "cublas_t_ms_p80", "check_ok", "device", "time_utc")


def _recorded(run: str) -> dict:
    art = json.loads((RR / run / "profile" / "round_1" / "profile_roofline.json").read_text())
    return {e["name"]: e for e in art["entries"]}


def _key(probs) -> tuple:
    return tuple((p["M"], p["N"], p["K"]) if isinstance(p, dict) else (p.M, p.N, p.K) for p in probs)


def _install_replay(monkeypatch, recorded: dict) -> None:
    """The device's timing and counter runs replaced by the H200's recordings of the same problems."""
    by = {_key(e["measured"]["problems"]): e["measured"] for e in recorded.values() if e.get("measured")}

    def measure(probs, lvl, seed=0, l2="cold"):
        return {k: copy.deepcopy(by[_key(probs)][k]) for k in TIMES} | {"l2_mode": l2}

    def mix(probs, lvl, target="cublas", l2="cold", ncu=None, contract="gemm-bf16", routings=None):
        m = by[_key(probs)]
        assert target == m["counters"]["target"] and l2 == m["counters"]["l2_mode"]   # the same run, replayed
        assert (contract, routings) == ("gemm-bf16", None)      # dense bf16 heads: no routing
        return copy.deepcopy(m["counters"])

    monkeypatch.setattr(timing, "device_arch", lambda: "sm_90a")
    monkeypatch.setattr(timing, "measure_problems", measure)
    monkeypatch.setattr(profiler, "collect_mix_counters", mix)


def _stage_b_copy(tmp_path: Path, run: str, n_l: int | None = None) -> Path:
    """The run folder with the stage-B artifact in place; with n_l, the GEMM heads' Top-N entries
    say launches_per_logical_op = n_l and the stage-B artifact is analysed afresh from it."""
    d = tmp_path / run
    shutil.copytree(RR / run, d)
    shutil.rmtree(d / "knowledge")
    rd = d / "profile" / "round_1"
    (rd / "profile_roofline.md").unlink()
    shutil.move(rd / "stage_b_roofline.json", rd / "profile_roofline.json")
    if n_l is not None:
        topn = json.loads((rd / "profile_topN.json").read_text())
        for t in topn["entries"]:
            if t["name"] in _recorded(run) and _recorded(run)[t["name"]].get("measured"):
                t["launches_per_logical_op"] = n_l
        (rd / "profile_topN.json").write_text(json.dumps(topn))
        report.write_artifact(api.analyze(rd / "profile_topN.json"), rd)
    return rd / "profile_roofline.json"


def _independent(t: dict, m: dict, peaks: dict) -> dict:
    """One head's stage-C figures counted here: weights from the Top-N's launches per shape, bytes
    from the recorded DRAM counters, time from the trace, FLOPs from the shapes, axis from the ridge."""
    shapes = t["shapes"]
    launches = t.get("shape_launches") or [1] * len(shapes)
    w = [x / sum(launches) for x in launches]
    per = {(p["M"], p["N"], p["K"]): p for p in m["counters"]["per_problem"]}
    rows = [per[(s["M"], s["N"], s["K"])] for s in shapes]
    n_l = t.get("launches_per_logical_op", 1)
    (reg,) = t["regimes"].values()
    t_s = reg["base_latency_ms"] * n_l / 1e3
    nbytes = sum(wi * r["dram_bytes"] for wi, r in zip(w, rows))
    useful = sum(wi * 2 * s["M"] * s["N"] * s["K"] for wi, s in zip(w, shapes))
    issued = sum(wi * r["flops_issued"] for wi, r in zip(w, rows))
    bw, pf = peaks["hbm_bw_bytes_s"], peaks["flops"]["bf16"]
    hbm, comp = nbytes / t_s / bw, useful / t_s / pf
    axis = "compute" if useful / nbytes > pf / bw else "memory"
    return {"bytes": nbytes, "useful": useful, "issued": issued, "hbm_util": hbm, "compute_util": comp,
            "axis": axis, "pct_raw": comp if axis == "compute" else hbm, "t_s": t_s}


@pytest.mark.parametrize("n_l", [None, 2])
@pytest.mark.parametrize("run", ["prefill", "decode"])
def test_replayed_rerun_matches_independent_counts(tmp_path, monkeypatch, run, n_l):
    recorded = _recorded(run)
    _install_replay(monkeypatch, recorded)
    path = _stage_b_copy(tmp_path, run, n_l)
    res = rerun_top.rerun_artifact(path, counters=True, playbook_dir=tmp_path / "knowledge")
    heads = sorted(n for n, e in recorded.items() if e.get("measured"))
    assert sorted(res["rerun"]) == heads and res["skipped"] == {}
    art = json.loads(path.read_text())
    topn = {t["name"]: t for t in json.loads((path.parent / "profile_topN.json").read_text())["entries"]}
    recs = {r["kernel"]: r for r in playbook.read_records(tmp_path / "knowledge")}
    assert art["stage"] == "C" and sorted(recs) == heads
    for e in (x for x in art["entries"] if x["name"] in heads):
        m, t = recorded[e["name"]]["measured"], topn[e["name"]]
        ind = _independent(t, m, art["peaks"])
        assert e["launches_per_logical_op"] == (n_l or 1)
        assert e["bytes_measured"] == pytest.approx(ind["bytes"], rel=1e-12)
        assert e["bytes_est"] == pytest.approx(ind["bytes"], rel=1e-12)          # the memory axis is measured
        assert e["flops_useful"] == pytest.approx(ind["useful"], rel=1e-12)
        assert e["flops_issued"] == pytest.approx(ind["issued"], rel=1e-12)
        assert e["hbm_util"] == pytest.approx(ind["hbm_util"], rel=1e-12)
        assert e["compute_util"] == pytest.approx(ind["compute_util"], rel=1e-12)
        assert e["roof_axis"] == ind["axis"] and e["roofline_pct_raw"] == pytest.approx(ind["pct_raw"], rel=1e-12)
        assert e["confidence"] == "high"
        # the re-run's timing survived the re-analysis, once, and judges against the entry's own prediction
        like = m["cublas_t_ms"] / m["ladder_t_ms"]
        assert e["measured"]["ladder_t_ms"] == m["ladder_t_ms"] and e["measured"]["cublas_t_ms"] == m["cublas_t_ms"]
        assert e["measured_attainable_speedup"] == pytest.approx(like, rel=1e-12)
        assert e["measured"]["current_t_ms"] == pytest.approx(ind["t_s"] * 1e3, rel=1e-12)
        assert e["measured"]["projected_in_run_t_ms"] == pytest.approx(ind["t_s"] * 1e3 / like, rel=1e-12)
        assert e["measured"]["predicted_attainable_speedup"] == e["attainable_speedup"]
        assert e["measured"]["counters"]["dram_bytes"] == m["counters"]["dram_bytes"]
        assert e["notes"].count("stage C re-run") == 1 and e["notes"].count("MEASURED DRAM bytes") == 1
        r = recs[e["name"]]
        assert r["measured_isolated_speedup"] == e["measured_attainable_speedup"]
        assert r["predicted_attainable_speedup"] == e["attainable_speedup"] and r["roofline_pct"] == e["roofline_pct"]


@pytest.mark.parametrize("run", ["prefill", "decode"])
def test_replay_reproduces_the_recorded_stage_c_artifact(tmp_path, monkeypatch, run):
    """Behaviour unchanged: the replay's figures are the ones the H200 run wrote (every entry). Only
    the figures the compute roof does not move are compared: the bf16 envelope has gained runs
    since (fixtures/rerun_real/README.md), which moves roofline_pct and what follows on the compute axis."""
    recorded = _recorded(run)
    _install_replay(monkeypatch, recorded)
    path = _stage_b_copy(tmp_path, run)
    rerun_top.rerun_artifact(path, counters=True, playbook_dir=False)
    for e in json.loads(path.read_text())["entries"]:
        o = recorded[e["name"]]
        assert art_peaks_bw(path) == o_peaks_bw(run)
        for k in ("bytes_est", "bytes_measured", "hbm_util", "achieved_flops", "flops_issued",
                  "measured_attainable_speedup"):
            if o.get(k) is None:     # (pytest >= 9.1 refuses approx(None))
                assert e.get(k) is None, (e["name"], k)
            else:
                assert e.get(k) == pytest.approx(o.get(k), rel=1e-9), (e["name"], k)
        assert (e["confidence"], e["regime"], e["roof_axis"]) == (o["confidence"], o["regime"], o["roof_axis"])


def art_peaks_bw(path: Path) -> float:
    return json.loads(path.read_text())["peaks"]["hbm_bw_bytes_s"]


def o_peaks_bw(run: str) -> float:
    return json.loads((RR / run / "profile" / "round_1" / "profile_roofline.json").read_text())["peaks"]["hbm_bw_bytes_s"]


# ------------------------------------------------------------------ analyze --counters, the ncu CSV
def _csv_per_launch(path: Path) -> dict[str, dict]:
    """Per kernel name: mean per launch of DRAM bytes (read + write), tensor bf16 FLOPs, and time,
    from the raw page (base units; thousands separators; row 2 holds the units)."""
    rows = list(csv.DictReader(open(path, newline="")))[1:]
    num = lambda s: float(s.replace(",", "")) if s not in ("", "n/a") else None  # noqa: E731
    out: dict[str, dict] = {}
    for r in rows:
        k = out.setdefault(r["Kernel Name"], {"dram": [], "bf16": [], "t_ms": []})
        k["dram"].append(num(r["dram__bytes_read.sum"]) + num(r["dram__bytes_write.sum"]))
        k["bf16"].append(num(r.get("sm__ops_path_tensor_src_bf16_dst_fp32.sum", "") or ""))
        k["t_ms"].append(num(r["gpu__time_duration.sum"]) / 1e6)
    return {n: {"dram": sum(v["dram"]) / len(v["dram"]), "launches": len(v["dram"]),
                "bf16": sum(v["bf16"]) / len(v["bf16"]) if all(x is not None for x in v["bf16"]) else None,
                "t_ms": sum(v["t_ms"]) / len(v["t_ms"])} for n, v in out.items()}


@pytest.mark.parametrize("n_l", [1, 3])
def test_analyze_counters_against_the_csv(tmp_path, n_l):
    csv_path = FIXTURES / "ncu" / "known_raw.csv"
    topn = json.loads((FIXTURES / "hook" / "round_b_topN.json").read_text())
    for t in topn["entries"]:
        t["launches_per_logical_op"] = n_l
    art = api.analyze(topn, FIXTURES / "hook" / "env_report.json", None, counters=csv_path)
    from roofline.core.classify import short_name   # only to pair a CSV kernel with its entry (the names are spelt apart)

    kc = {short_name(n): v for n, v in _csv_per_launch(csv_path).items()}
    bw = art["peaks"]["hbm_bw_bytes_s"]
    by_t = {t["name"]: t for t in topn["entries"]}
    merged = [e for e in art["entries"] if e.get("bytes_measured")]
    assert len(merged) >= 3 and art["stage"] == "C"
    for e in merged:
        k = kc[short_name(e["name"])]
        (reg,) = by_t[e["name"]]["regimes"].values()
        t_s = reg["base_latency_ms"] * n_l / 1e3           # the trace's time of one logical op
        assert e["counters"]["launches"] == k["launches"]
        assert e["counters"]["dram_bytes"] == pytest.approx(k["dram"], rel=1e-12)
        assert e["bytes_measured"] == pytest.approx(k["dram"] * n_l, rel=1e-12)
        assert e["hbm_util"] == pytest.approx(k["dram"] * n_l / t_s / bw, rel=1e-12)
        assert e["bytes_measured_over_model"] == pytest.approx(k["dram"] * n_l / e["bytes_model"], rel=1e-12)
        if k["bf16"]:
            assert e["flops_issued"] == pytest.approx(k["bf16"] * n_l, rel=1e-12)
        shp = by_t[e["name"]].get("shapes") or [{}]
        if "M" in shp[0]:
            s = shp[0]
            assert e["flops_useful"] == pytest.approx(2 * s["M"] * s["N"] * s["K"], rel=1e-12)
        assert e["confidence"] in ("high", "medium")


def test_an_earlier_rerun_of_a_head_not_rerun_now_is_kept(tmp_path, monkeypatch):
    """Two re-runs of one head each (replayed): the second keeps what the first measured on the
    other head, because both records stay in the counters file the analysis merges
    (rerun_counters.json); and `analyze --counters` of that file is the re-run's artifact."""
    from roofline.counters import load

    recorded = _recorded("prefill")
    _install_replay(monkeypatch, recorded)
    path = _stage_b_copy(tmp_path, "prefill")
    first, second = sorted(n for n, e in recorded.items() if e.get("measured"))[:2]
    rerun_top.rerun_artifact(path, entries=(first,), counters=True, playbook_dir=False)
    after_one = {e["name"]: e for e in json.loads(path.read_text())["entries"]}
    assert "measured" in after_one[first] and "measured" not in after_one[second]
    res = rerun_top.rerun_artifact(path, entries=(second,), counters=True, playbook_dir=False)
    assert res["rerun"] == [second]
    art = json.loads(path.read_text())
    by = {e["name"]: e for e in art["entries"]}
    for k in ("measured", "measured_attainable_speedup", "bytes_measured", "roofline_pct", "notes"):
        assert by[first][k] == after_one[first][k], k           # the first head as its own re-run left it
    assert by[second]["measured"]["ladder_t_ms"] == recorded[second]["measured"]["ladder_t_ms"]
    counters_file = path.parent / "rerun_counters.json"
    assert sorted(r.name for r in load(counters_file)) == sorted([first, second])
    # the same artifact from the analysis alone: `analyze --counters rerun_counters.json`
    again = api.analyze(path.parent / "profile_topN.json", stage="C", counters=counters_file)
    assert again["entries"] == art["entries"]
