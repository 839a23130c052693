"""CUDA-graph replays in a torch trace (roofline.ingest.graphs, `roofline topn`).

The synthetic traces are made from the real H200 decode trace (fixtures/traces/decode.json.gz):
the kernels of some decode steps are turned into one graph replay per step the way Kineto records
it (a cudaGraphLaunch runtime event; the step's kernels carry its correlation id; no cpu_op or
per-kernel launch event of that step is left in the window, since the ops ran at capture time).
A real graph-replayed trace, when present under fixtures/traces_new/, is checked as well.
"""
from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from roofline import api
from roofline.cli import main
from roofline.ingest import graphs
from roofline.ingest.torch_trace import parse_trace

FIX = Path(__file__).resolve().parent.parent / "fixtures"
DECODE = FIX / "traces" / "decode.json.gz"


def _graphify(dst: Path, replay_steps: set[int], driver: bool = False) -> dict:
    """Write a copy of the decode trace where the decode steps in ``replay_steps`` (0-based) are
    CUDA-graph replays. Returns the independent counts the tests compare with."""
    d = json.load(gzip.open(DECODE))
    ev = d["traceEvents"]
    steps = sorted((e for e in ev if e.get("cat") == "gpu_user_annotation" and e["name"] == "decode_step"),
                   key=lambda e: e["ts"])
    cpu_steps = sorted((e for e in ev if e.get("cat") == "user_annotation" and e["name"] == "decode_step"),
                       key=lambda e: e["ts"])
    kern = [e for e in ev if e.get("cat") == "kernel"]
    step_of = {}
    for i, s in enumerate(steps):
        for k in kern:
            if s["ts"] <= k["ts"] <= s["ts"] + s["dur"]:
                step_of[id(k)] = i
    drop_windows = [(cpu_steps[i]["ts"], cpu_steps[i]["ts"] + cpu_steps[i]["dur"]) for i in replay_steps]
    in_drop = lambda e: any(a <= e.get("ts", -1) <= b for a, b in drop_windows)  # noqa: E731
    out, launches = [], []
    n_rep, us_rep, names_rep = 0, 0.0, Counter()
    base_corr, base_ext = 10_000_000, 20_000_000
    for e in ev:
        cat = e.get("cat")
        if cat in ("cpu_op", "cuda_runtime", "cuda_driver", "ac2g") and in_drop(e):
            continue  # the ops of a replayed step ran at capture time, not in this window
        if cat == "kernel" and step_of.get(id(e)) in replay_steps:
            i = step_of[id(e)]
            e = json.loads(json.dumps(e))
            e["args"]["correlation"] = base_corr + i
            e["args"]["External id"] = base_ext + i
            n_rep += 1
            us_rep += e["dur"]
            names_rep[e["name"]] += 1
        out.append(e)
    for i in sorted(replay_steps):
        launches.append({"ph": "X", "cat": "cuda_driver" if driver else "cuda_runtime",
                         "name": "cuGraphLaunch" if driver else "cudaGraphLaunch", "pid": 1, "tid": 1,
                         "ts": cpu_steps[i]["ts"] + 1.0, "dur": 5.0,
                         "args": {"External id": base_ext + i, "cbid": 311, "correlation": base_corr + i}})
    d["traceEvents"] = out + launches
    with gzip.open(dst, "wt") as f:
        json.dump(d, f, indent=1)
    total_us = sum(e["dur"] for e in out if e.get("cat") == "kernel")
    return {"launches": len(replay_steps), "replayed": n_rep, "pct": 100.0 * us_rep / total_us,
            "names": set(names_rep)}


def test_scan_finds_every_graph_launch_and_its_kernels(tmp_path):
    p = tmp_path / "g.json.gz"
    want = _graphify(p, {1, 3, 5, 7})
    gl = graphs.scan_graph_launches(str(p))
    assert gl.count == want["launches"] == 4
    assert len(gl.corr) == 4
    pt = parse_trace(str(p), range_regex=["decode", "prefill"])
    s = graphs.graph_replay_summary(pt, gl)
    assert s["replayed_kernel_launches"] == want["replayed"]
    assert s["replayed_pct_gpu_time"] == pytest.approx(want["pct"], rel=1e-9)
    assert s["replayed_kernel_names"] == len(want["names"])
    # the eager steps ran the same kernels: every replayed name has eager shapes
    assert s["names_with_eager_shapes"] == len(want["names"]) and s["replayed_only"] == []


def test_driver_graph_launch_is_found_too(tmp_path):
    p = tmp_path / "g.json.gz"
    want = _graphify(p, {0, 1}, driver=True)
    gl = graphs.scan_graph_launches(str(p))
    assert gl.names == Counter({"cuGraphLaunch": 2}) and want["launches"] == 2


def test_no_graph_launch_in_the_real_eager_trace():
    assert graphs.scan_graph_launches(str(DECODE)).count == 0
    pt = parse_trace(str(DECODE), range_regex=["decode", "prefill"])
    assert not graphs.needs_scan(pt)  # every kernel is linked: topn never pays for the scan


def test_topn_on_a_fully_replayed_trace_says_why_there_are_no_shapes(tmp_path):
    p = tmp_path / "g.json.gz"
    want = _graphify(p, set(range(8)))
    out = tmp_path / "profile_topN.json"
    r = CliRunner().invoke(main, ["topn", str(p), "-o", str(out), "--no-env-report"])
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    notes = " ".join(doc["notes"])
    assert "no record_shapes data" not in notes and "record_shapes=True" not in notes
    assert "CUDA-graph replays: 8 graph launch(es)" in notes
    assert f"ran {want['replayed']} kernel launches" in notes
    assert "carry no shapes" in notes and "eager step" in notes and "--counters" in notes
    assert doc["source"]["cuda_graph"]["graph_launches"] == 8
    flagged = {e["name"] for e in doc["entries"] if e.get("cuda_graph_replayed")}
    assert flagged and flagged <= want["names"]
    assert all(not e.get("shapes") for e in doc["entries"])
    # analyze names the replay on each head entry without shapes
    (tmp_path / "env_report.json").write_text((FIX / "rerun" / "env_report.json").read_text())
    r = CliRunner().invoke(main, ["analyze", str(out), "--no-write"])
    assert r.exit_code == 0
    assert "replayed from a CUDA graph" in r.stderr


def test_topn_maps_eager_shapes_onto_replayed_kernel_names(tmp_path):
    p = tmp_path / "g.json.gz"
    _graphify(p, {1, 2, 3, 4, 5, 6, 7})           # step 0 eager, the other 7 replayed
    out = tmp_path / "profile_topN.json"
    r = CliRunner().invoke(main, ["topn", str(p), "-o", str(out), "--no-env-report"])
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    gemms = [e for e in doc["entries"] if e.get("classification") == "gemm"]
    assert gemms and all(e.get("shapes") for e in gemms)
    assert not any(e.get("cuda_graph_replayed") for e in doc["entries"])
    assert "every one of those kernel names also ran eagerly in the window" in " ".join(doc["notes"])


REAL_DIR = FIX / "traces_real"
META = json.loads((REAL_DIR / "fixtures_meta.json").read_text())["traces"]


def _independent_counts(trace: Path) -> dict:
    """Graph launches and the kernels they ran, counted here from the decoded JSON."""
    with gzip.open(trace) as f:
        d = json.load(f)
    launches = [e for e in d["traceEvents"] if e.get("cat") in ("cuda_runtime", "cuda_driver")
                and "GraphLaunch" in e.get("name", "")]
    corr = {e["args"]["correlation"] for e in launches}
    kern = [e for e in d["traceEvents"] if e.get("cat") == "kernel"]
    rep = [e for e in kern if e["args"].get("correlation") in corr]
    return {"launches": len(launches), "replayed": len(rep),
            "pct": 100.0 * sum(e["dur"] for e in rep) / sum(e["dur"] for e in kern),
            "names": {e["name"] for e in rep}, "record_shapes": d.get("record_shapes")}


@pytest.mark.parametrize("stem", ["graph_decode_replay_only", "graph_decode_mixed"])
def test_real_h200_graph_replayed_decode_trace(stem, tmp_path):
    """The real graph-replayed decode traces (H200, torch 2.11, record_shapes=True): 6 replays of a
    captured decode step; `_mixed` also has one eager step in the window."""
    trace = REAL_DIR / f"{stem}.json.gz"
    want = _independent_counts(trace)
    meta = META[stem]
    assert want["record_shapes"] == 1                    # shapes WERE recorded
    gl = graphs.scan_graph_launches(str(trace))
    assert gl.count == want["launches"] == meta["graph_replays"] == 6
    out = tmp_path / "profile_topN.json"
    r = CliRunner().invoke(main, ["topn", str(trace), "-o", str(out), "--isl", "1024", "--osl", "64",
                                  "--conc", str(meta["batch"])])
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    cg = doc["source"]["cuda_graph"]
    assert cg["graph_launches"] == 6 and cg["replayed_kernel_launches"] == want["replayed"]
    assert cg["replayed_pct_gpu_time"] == pytest.approx(want["pct"], rel=1e-9)
    assert cg["replayed_kernel_names"] == len(want["names"])
    notes = " ".join(doc["notes"])
    assert "no record_shapes data" not in notes and "record_shapes=True" not in notes
    gemms = [e for e in doc["entries"] if e.get("op_class") == "gemm"]
    assert gemms
    if meta["eager_steps"] == 0:
        assert cg["replayed_pct_gpu_time"] == pytest.approx(100.0)
        assert cg["names_with_eager_shapes"] == 0
        assert all(e.get("cuda_graph_replayed") and not e.get("shapes") for e in gemms)
        assert "they have no shapes" in notes and "eager step" in notes
        # analyze says why each GEMM head has no shapes (once), with what gives them
        # no captured dtypes: model_dtype is not in the starter; the run goes on, and since every
        # head degrades for want of shapes (not of model_dtype), nothing asks for it (issue 35)
        r = CliRunner().invoke(main, ["analyze", str(out), "--no-write", "--env", str(tmp_path / "env_report.json")])
        assert r.exit_code == 0 and "Traceback" not in r.output
        assert not [ln for ln in r.stderr.splitlines() if "not given: model_dtype" in ln]
        assert "degraded" in r.stderr and "eager step" in r.stderr
        r = CliRunner().invoke(main, ["topn", str(trace), "-o", str(out), "--isl", "1024", "--osl", "64",
                                      "--conc", str(meta["batch"]), "--model-dtype", "bf16", "--force", "-q"])
        assert r.exit_code == 0
        r = CliRunner().invoke(main, ["analyze", str(out), "--no-write"])
        assert r.exit_code == 0, r.output
        lines = [ln for ln in r.stderr.splitlines() if ln.startswith("roofline analyze: warning:")
                 and "replayed from a CUDA graph" in ln]
        assert len(lines) == 1 and "eager step" in lines[0] and "--counters" in lines[0]
        a = api.analyze(out)
        gemm_reasons = [d["reason"] for d in a["degraded"] if d["name"] in {e["name"] for e in gemms}]
        assert gemm_reasons and all("replayed from a CUDA graph" in x and "record_shapes" not in x
                                    for x in gemm_reasons)
    else:
        # the eager step's shapes land on every replayed kernel name
        assert cg["names_with_eager_shapes"] == cg["replayed_kernel_names"]
        assert all(e.get("shapes") for e in gemms) and not any(e.get("cuda_graph_replayed") for e in doc["entries"])
        assert "every one of those kernel names also ran eagerly" in notes
        # the captured GEMM shapes are the script's own (M = the batch)
        Ms = {s["M"] for e in gemms for s in e["shapes"] if "M" in s}
        assert meta["batch"] in Ms


def test_scan_is_exact_across_block_boundaries(monkeypatch):
    trace = str(REAL_DIR / "graph_decode_mixed.json.gz")
    whole = graphs.scan_graph_launches(trace)
    monkeypatch.setattr(graphs, "_BLOCK", 4096)       # ~300 blocks: launches straddle boundaries
    monkeypatch.setattr(graphs, "_OVERLAP", 1024)
    small = graphs.scan_graph_launches(trace)
    assert small.count == whole.count == _independent_counts(REAL_DIR / "graph_decode_mixed.json.gz")["launches"]
    assert small.corr == whole.corr
