"""What the host does while a host-bound step's GPU idles (roofline/ingest/hostcause.py), on real H200
traces: every expected number is counted here from the trace's raw events (json), not typed in."""
from __future__ import annotations

import bisect
import gzip
import json
import re
import shutil
from collections import Counter

import pytest
from click.testing import CliRunner

from conftest import FIXTURES
from roofline.cli import main
from roofline.ingest import walltime
from roofline.ingest.hostcause import SYNC_SLACK_US, add_host_causes
from roofline.ingest.topn import StepPlan, step_ranges
from roofline.ingest.torch_trace import parse_trace

CORPUS = FIXTURES / "corpus"
BAMBA = CORPUS / "bamba_mamba2.json.gz"
SYNCS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")


def _wall(path):
    pt = parse_trace(str(path), range_regex=["decode", "prefill"])
    gr = step_ranges(pt, StepPlan())[1]
    wall = walltime.wall_time(pt, gr)
    notes: list[str] = []
    add_host_causes(str(path), pt, gr, wall, notes)
    return wall, notes


class Raw:
    """The trace's raw events, and the step windows / idle gaps / launching thread counted from them."""

    def __init__(self, path):
        self.ev = [e for e in json.loads(gzip.open(path).read())["traceEvents"] if e.get("ph") == "X"]
        hull: dict = {}
        for e in self.ev:
            if e.get("cat") == "gpu_user_annotation" and re.search("decode|prefill", e["name"]):
                x, a, b = e["args"]["External id"], e["ts"], e["ts"] + e["dur"]
                lo, hi, _ = hull.get(x, (a, b, e["name"]))
                hull[x] = (min(lo, a), max(hi, b), e["name"])
        st = sorted(hull.values())
        self.wins = [(a, st[i + 1][0] if i + 1 < len(st) else b, nm) for i, (a, b, nm) in enumerate(st)]
        busy = sorted((e["ts"], e["ts"] + e["dur"]) for e in self.ev
                      if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
        self.busy: list[list[float]] = []
        for a, b in busy:
            if self.busy and a <= self.busy[-1][1]:
                self.busy[-1][1] = max(self.busy[-1][1], b)
            else:
                self.busy.append([a, b])
        launches = Counter(e["tid"] for e in self.ev if e.get("cat") in ("cuda_runtime", "cuda_driver")
                           and "aunch" in e["name"])
        self.tid = launches.most_common(1)[0][0]

    def steps(self, regime: str):
        return [(a, b) for a, b, nm in self.wins if regime in nm]

    def gaps(self, a, b):
        out, t = [], a
        for x, y in self.busy:
            if y <= a or x >= b:
                continue
            if x > t:
                out.append((t, x))
            t = max(t, y)
        return out + ([(t, b)] if t < b else [])

    def idle_overlap(self, ivs, a, b) -> float:
        """The length of the union of ``ivs`` inside the idle gaps of [a, b)."""
        merged: list[list[float]] = []
        for x, y in sorted(ivs):
            if merged and x <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], y)
            else:
                merged.append([x, y])
        return sum(max(0.0, min(y, g1) - max(x, g0)) for g0, g1 in self.gaps(a, b) for x, y in merged)

    def thread(self, cats=("cpu_op", "cuda_runtime", "cuda_driver")):
        return [e for e in self.ev if e.get("tid") == self.tid and e.get("cat") in cats]


def _own_idle(raw: Raw, op: dict, a, b) -> float:
    """The idle time inside [a, b) that `op` itself covers: its interval less its descendants that are
    cpu_ops or launch/sync/memcpy calls (hostcause rule 3: other runtime calls count for the op)."""
    lo, hi = op["ts"], op["ts"] + op["dur"]
    kids = [(e["ts"], e["ts"] + e["dur"]) for e in raw.thread() if e is not op and lo <= e["ts"] < hi
            and (e["cat"] == "cpu_op" or any(k in e["name"] for k in ("aunch", "ynchronize", "emcpy")))]
    return raw.idle_overlap([(lo, hi)], a, b) - raw.idle_overlap(kids, a, b)


@pytest.fixture(scope="module")
def bamba():
    return _wall(BAMBA)[0], Raw(BAMBA)


def test_bamba_decode_names_cudnn_sdpa_planning_per_new_length(bamba):
    wall, raw = bamba
    host = wall["decode"]["host"]
    c = host["causes"][0]
    assert c["cause"] == "per_shape_host_work" and c["ops"] == ["aten::_cudnn_attention_forward"]
    # its ms per step, counted here: the idle time each SDPA call covers itself, step by step
    ops = [e for e in raw.thread(("cpu_op",)) if e["name"] == "aten::_cudnn_attention_forward"]
    per_step = [sum(_own_idle(raw, op, a, b) for op in ops) / 1e3 for a, b in raw.steps("decode")]
    assert c["per_step_ms"] == pytest.approx(per_step, abs=1e-3)
    assert c["ms_per_step"] == pytest.approx(sum(per_step) / len(per_step), rel=1e-6)
    idle = sum(g1 - g0 for a, b in raw.steps("decode") for g0, g1 in raw.gaps(a, b)) / 1e3
    assert c["pct_of_idle"] == pytest.approx(100 * sum(per_step) / idle, rel=1e-6)
    assert c["pct_of_idle"] > 50 and c["steps"] == sum(1 for x in per_step if x >= 1.0) == 3
    # the evidence: each slow call had a new K length, read from the slow calls' Input Dims
    slow = [op for op in ops if op["dur"] >= 1000 and any(a <= op["ts"] < b for a, b in raw.steps("decode"))]
    lengths = [op["args"]["Input Dims"][1][2] for op in slow]
    assert len(set(lengths)) == len(lengths) == 3
    assert f"input 1 dim 2: {', '.join(map(str, lengths))}" in c["evidence"] and "cuDNN" in c["evidence"]
    assert host["summary"].startswith(f"cuDNN re-planning for each new shape in aten::_cudnn_attention_forward "
                                      f"{sum(per_step) / len(per_step):.1f} ms/step")


def test_bamba_decode_counts_the_launches_of_the_steps(bamba):
    wall, raw = bamba
    host = wall["decode"]["host"]
    wins = raw.steps("decode")
    n = sum(1 for e in raw.thread(("cuda_runtime", "cuda_driver")) if "aunch" in e["name"]
            and any(a <= e["ts"] < b for a, b in wins))
    assert host["launches_per_step"] == pytest.approx(n / len(wins))
    assert host["idle_gaps_per_step"] == pytest.approx(sum(len(raw.gaps(a, b)) for a, b in wins) / len(wins))
    lb = [c for c in host["causes"] if c["cause"] == "launch_bound"]
    assert lb and 10 < lb[0]["pct_of_idle"] < 50 and "cudaLaunchKernel" in lb[0]["ops"]


def test_a_gpu_bound_step_names_nothing(bamba, monkeypatch):
    wall, _ = bamba
    assert wall["prefill"]["idle_pct"] < 50 and "host" not in wall["prefill"]
    # a trace with no host-bound step is not read again at all
    from roofline.ingest import host_scan

    def refuse(*a, **k):
        raise AssertionError("the host pass ran for a GPU-bound trace")

    monkeypatch.setattr(host_scan, "scan_host_events", refuse)
    wall2, notes = _wall(FIXTURES / "traces_real" / "prefill_llama.json.gz")
    assert wall2["prefill"]["idle_pct"] < 50 and "host" not in wall2["prefill"] and not notes


def test_a_sync_wait_is_named_with_the_op_that_syncs():
    """qwen3moe eager: every MoE routing step reads a count on the host (.item(), nonzero): the GPU
    runs dry at each sync and idles until the host launches again."""
    path = CORPUS / "qwen3moe_eager.json.gz"
    wall, _ = _wall(path)
    raw = Raw(path)
    (a, b), = raw.steps("prefill")
    syncs = sorted(((e["ts"], e["ts"] + e["dur"], e) for e in raw.thread(("cuda_runtime", "cuda_driver"))
                    if e["name"] in SYNCS and e["ts"] < b and e["ts"] + e["dur"] > a), key=lambda x: x[0])
    ops = sorted((e for e in raw.thread(("cpu_op",)) if e["ts"] < b and e["ts"] + e["dur"] > a), key=lambda e: e["ts"])
    op_ts = [o["ts"] for o in ops]

    def where(e):     # the innermost cpu_op around the call: the latest-starting one that holds it
        i = bisect.bisect_right(op_ts, e["ts"]) - 1
        while not ops[i]["ts"] + ops[i]["dur"] > e["ts"]:
            i -= 1
        return f"{e['name']} in {ops[i]['name']}"

    charged: Counter = Counter()
    s_ts = [s for s, _, _ in syncs]
    for g0, g1 in raw.gaps(a, b):
        j = bisect.bisect_right(s_ts, g0)
        hit = [e for s, t, e in syncs[max(0, j - 3):j] if g0 <= t + SYNC_SLACK_US]
        if hit:       # the gap opened while the host waited: all of it
            charged[where(hit[-1])] += g1 - g0
        else:         # else a sync entered during the gap covers its own part of it
            for s, t, e in syncs[max(0, j - 3):bisect.bisect_left(s_ts, g1)]:
                if s < g1 and t > g0:
                    charged[where(e)] += min(t, g1) - max(s, g0)
    host = wall["prefill"]["host"]
    c, = [c for c in host["causes"] if c["cause"] == "sync_wait"]
    assert c["ms_per_step"] == pytest.approx(sum(charged.values()) / 1e3, rel=1e-9)
    assert c["ops"][0] == charged.most_common(1)[0][0] == "cudaStreamSynchronize in aten::_local_scalar_dense"
    assert c["pct_of_idle"] > 30 and "waited in a synchronising call" in c["evidence"]
    assert "synchronising calls (cudaStreamSynchronize in aten::_local_scalar_dense)" in host["summary"]


def test_a_launch_bound_step_says_launch_bound():
    wall, _ = _wall(CORPUS / "gemma3_swa_eager.json.gz")
    host = wall["decode"]["host"]
    assert host["causes"][0]["cause"] == "launch_bound" and host["causes"][0]["pct_of_idle"] > 90
    assert host["summary"].startswith("launch-bound")


def test_host_time_in_no_op_is_said_to_be_unexplained():
    """tp4 rank 1: the decode steps' idle is mostly time inside the step range but in no op, seconds at
    a time: the trace does not say what the host did, and the cause says so."""
    wall, _ = _wall(FIXTURES / "traces_tp" / "tp4" / "rank1.json.gz")
    c = wall["decode"]["host"]["causes"][0]
    assert c["cause"] == "host_code_no_op" and c["pct_of_idle"] > 50 and "does not say" in c["evidence"]


def test_any_layout_gives_the_same_causes(tmp_path):
    """A trace written compact (not Kineto's pretty-printed layout) is read with ijson: same events, same causes."""
    from roofline.ingest.host_scan import scan_host_events

    doc = json.loads(gzip.open(BAMBA).read())
    flat = tmp_path / "flat.json"
    flat.write_text(json.dumps(doc, separators=(",", ":")))
    a, b = scan_host_events(str(BAMBA), 0, float("inf")), scan_host_events(str(flat), 0, float("inf"))
    assert a.engine.startswith("in place") and b.engine == "ijson"
    assert list(a.ts) == list(b.ts) and list(a.tid) == list(b.tid) and a.dims == b.dims and a.corr == b.corr
    assert [a.names[i] for i in a.name] == [b.names[i] for i in b.name]
    assert _wall(flat)[0]["decode"]["host"] == _wall(BAMBA)[0]["decode"]["host"]


def test_the_report_says_why_the_host_bounds_the_step(tmp_path):
    shutil.copy(BAMBA, tmp_path / BAMBA.name)
    r = CliRunner().invoke(main, ["analyze", str(tmp_path / BAMBA.name), "--config",
                                  str(CORPUS / "configs" / "bamba_mamba2.json")])
    assert r.exit_code == 0, r.output
    d = tmp_path / "bamba_mamba2_roofline"
    host = json.loads((d / "profile_topN.json").read_text())["wall_time"]["decode"]["host"]
    art = json.loads((d / "profile_roofline.json").read_text())
    assert art["wall_time"]["decode"]["host"]["causes"] == host["causes"]
    c = host["causes"][0]
    line, = [ln for ln in r.output.splitlines() if ln.startswith("decode step:")]
    assert line.endswith(f"bounds this step: cuDNN re-planning for each new shape in aten::_cudnn_attention_forward "
                         f"{c['ms_per_step']:.1f} ms/step ({c['pct_of_idle']:.0f}% of the idle); 1 more cause in "
                         "profile_roofline.md ('What the host does')")
    md = (d / "profile_roofline.md").read_text()
    assert "## What the host does while the GPU idles" in md and f"`per_shape_host_work` {c['ms_per_step']:.2f}" in md


def test_a_hand_edited_host_block_is_checked():
    from roofline.core.wall import read_wall_time

    base = {"steps": 2, "wall_ms": 4.0, "step_wall_ms": 2.0, "gpu_busy_pct": 10.0, "memcpy_pct": 0.0, "idle_pct": 90.0}
    good = {"summary": "s", "causes": [{"cause": "sync_wait", "ms_per_step": 1.0, "pct_of_idle": 50.0},
                                       {"cause": "x", "ms_per_step": "1", "pct_of_idle": 5.0}, "junk"], "ops": [1]}
    out = read_wall_time({"decode": base | {"host": good}, "prefill": base | {"host": {"causes": []}}})
    assert out["decode"]["host"]["causes"] == [good["causes"][0]] and out["decode"]["host"]["ops"] == []
    assert "host" not in out["prefill"]


def test_a_long_trace_reads_its_first_steps_only(monkeypatch):
    """The pass is bounded: with room for 2 steps, the figures are those of the first 2 of Bamba's 4."""
    from roofline.ingest import hostcause

    full = _wall(BAMBA)[0]["decode"]["host"]
    monkeypatch.setattr(hostcause, "MAX_HOST_STEPS", 2)
    two = _wall(BAMBA)[0]["decode"]["host"]
    assert two["steps_read"] == 2 and "steps_read" not in full
    lb = {c["cause"]: c for c in full["causes"]}["launch_bound"]
    lb2 = {c["cause"]: c for c in two["causes"]}["launch_bound"]
    assert lb2["per_step_ms"] == pytest.approx(lb["per_step_ms"][:2], abs=2e-3)
