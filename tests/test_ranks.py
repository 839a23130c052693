"""`roofline topn RANK0 RANK1 ...` on real per-rank traces (fixtures/traces_tp: a hand-split TP=2
and TP=4 Llama-shaped decode on one H200, gloo all-reduce; made by tools/device/make_tp_traces.py).

Every figure is checked against an independent count: each rank's figures against that trace read
alone by `roofline topn TRACE`, the merged ones against a mean / median computed here, kernel
launch counts against the profiler's own totals, and the waiting at the collectives against the
clocks the profiling script itself read around every all-reduce call (meta_rank<r>.json)."""
from __future__ import annotations

import gzip
import json
import shutil
import statistics
from pathlib import Path

import pytest
from click.testing import CliRunner

from roofline.cli import main

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "traces_tp"


def _topn(tmp, *sources, extra=()):
    out = tmp / "profile_topN.json"
    r = CliRunner().invoke(main, ["topn", *map(str, sources), "-o", str(out), "--no-env-report", *extra])
    return r, (json.loads(out.read_text()) if r.exit_code == 0 else None)


def _meta(run, r):
    return json.loads((FIX / run / f"meta_rank{r}.json").read_text())


@pytest.fixture(scope="module")
def merged(tmp_path_factory):
    out = {}
    for run, n in (("tp2", 2), ("tp4", 4)):
        tmp = tmp_path_factory.mktemp(run)
        r, doc = _topn(tmp, FIX / run)
        assert r.exit_code == 0, r.output
        alone = []
        for k in range(n):
            d = tmp_path_factory.mktemp(f"{run}_r{k}")
            ra, da = _topn(d, FIX / run / f"rank{k}.json.gz")
            assert ra.exit_code == 0, ra.output
            alone.append(da)
        out[run] = (doc, alone, r.output)
    return out


@pytest.mark.parametrize("run", ["tp2", "tp4"])
def test_each_ranks_figures_are_that_trace_read_alone(merged, run):
    doc, alone, _ = merged[run]
    assert doc["ranks"]["ranks"] == list(range(len(alone)))
    assert doc["ranks"]["rank_from"] == ["distributedInfo"] * len(alone)
    assert doc["ranks"]["backend"] == "gloo" and doc["ranks"]["world_size"] == len(alone)
    checked = 0
    for e in doc["entries"]:
        rb = e["ranks"]
        for k, da in enumerate(alone):
            a = next((x for x in da["entries"] if x["name"] == e["name"]), None)
            assert a is not None, (run, k, e["name"])      # every kernel runs on every rank here
            assert rb["pct_gpu_time"][k] == a["pct_gpu_time"]
            assert rb["total_ms"][k] == a["total_ms"] and rb["launches"][k] == a["launches"]
            for g, reg in a["regimes"].items():
                assert rb["base_latency_ms"][g][k] == reg["base_latency_ms"]
                assert rb["launches_per_step"][g][k] == reg["launches_per_step"]
            checked += 1
    assert checked == len(doc["entries"]) * len(alone) > 0
    assert doc["ranks"]["total_gpu_time_ms"] == [da["total_gpu_time_ms"] for da in alone]


@pytest.mark.parametrize("run", ["tp2", "tp4"])
def test_merged_figures_are_the_mean_share_and_the_median_times(merged, run):
    doc, alone, out = merged[run]
    for e in doc["entries"]:
        per = [next(x for x in da["entries"] if x["name"] == e["name"]) for da in alone]
        assert e["pct_gpu_time"] == pytest.approx(statistics.mean(p["pct_gpu_time"] for p in per), abs=1e-6)
        for g, reg in e["regimes"].items():
            assert reg["base_latency_ms"] == statistics.median(p["regimes"][g]["base_latency_ms"] for p in per)
        assert e["total_ms"] == statistics.median(p["total_ms"] for p in per)
        tot = [p["total_ms"] for p in per]
        slow = max(range(len(per)), key=lambda i: tot[i])
        assert e["ranks"]["slowest_rank"] == slow
        assert e["ranks"]["spread_rel"] == pytest.approx((max(tot) - min(tot)) / statistics.median(tot))
    assert doc["total_gpu_time_ms"] == pytest.approx(statistics.mean(da["total_gpu_time_ms"] for da in alone))
    assert sum(e["pct_gpu_time"] for e in doc["entries"]) <= 100.0 + 1e-5   # each rounded to 1e-6
    assert "MEAN over the ranks" in out and "MEDIAN over the ranks" in out


def test_launch_counts_match_the_profilers_own_totals(merged):
    """Per rank, a kernel's launches equal what the profiler itself counted (kineto events), for the
    kernels no split-K reduce is folded into (those are counted the same; their time includes the reduce)."""
    doc, _, _ = merged["tp2"]
    n = 0
    for k in (0, 1):
        raw = _meta("tp2", k)["kineto_kernel_totals"]
        for e in doc["entries"]:
            hits = [v for name, v in raw.items() if name == e["name"]]
            if len(hits) != 1:
                continue
            assert e["ranks"]["launches"][k] == hits[0]["count"], e["name"]
            if not e.get("folded_kernels"):
                assert e["ranks"]["total_ms"][k] == pytest.approx(hits[0]["duration_ns"] / 1e6, rel=1e-6)
            n += 1
    assert n >= 10


def _script_waits(run, n):
    """Per all-reduce call and rank, the waiting the script's own clocks say: the last rank's call
    time minus this rank's (at most its call's duration)."""
    metas = [_meta(run, k)["allreduce_calls"] for k in range(n)]
    rows = []
    for i in range(len(metas[0])):
        calls = [m[i]["mono_call_ns"] / 1000.0 for m in metas]
        rets = [m[i]["mono_return_ns"] / 1000.0 for m in metas]
        last = max(calls)
        rows.append(([min(last - c, r - c) for c, r in zip(calls, rets)], calls.index(last)))
    return rows


@pytest.mark.parametrize("run,n", [("tp2", 2), ("tp4", 4)])
def test_waiting_at_the_collectives_matches_the_scripts_clocks(run, n):
    """The trace's arrivals (gloo's host-side collective starts) against the monotonic clock the
    script read just before each dist.all_reduce: per collective and rank within 0.35 ms (the
    enqueue between the call and the collective's start), and the same last rank wherever the ranks
    arrived more than 1 ms apart."""
    from roofline.ingest import skew
    from roofline.ingest.collectives import scan_collectives

    evs = {k: scan_collectives(str(FIX / run / f"rank{k}.json.gz"), n) for k in range(n)}
    streams, _, _ = skew.align(evs)
    (st,) = streams
    assert (st.kind, st.coll, st.instances) == ("host", "all_reduce", len(_meta(run, 0)["allreduce_calls"]))
    script = _script_waits(run, n)
    clear = 0
    for i, ((sw, s_last), tw) in enumerate(zip(script, st.waits_us)):
        for k in range(n):
            assert tw[k] == pytest.approx(sw[k], abs=350.0), (i, k, tw, sw)
        if sorted(sw)[1] > 1000.0:      # the last rank arrived over 1 ms after the second-to-last
            assert st.last_rank[i] == s_last, i
            clear += 1
    assert clear >= (2 if run == "tp4" else 5)
    # the message: the script's tensor (batch x hidden) in bf16
    m = _meta(run, 0)["allreduce_calls"][0]
    assert st.message_elems == m["nelems"] == 64 * 4096


@pytest.mark.parametrize("run,n", [("tp2", 2), ("tp4", 4)])
def test_the_straggler_is_the_rank_the_others_waited_for(merged, run, n):
    """Charged from the script's own clocks: each all-reduce's waiting goes to the rank that called
    last; the straggler is the rank charged the most, over the whole window and without the one
    call that waited the most (the ranks' profilers started at different times)."""
    doc, _, out = merged[run]
    script = _script_waits(run, n)
    waited_for = [0.0] * n
    for ws, last in script:
        waited_for[last] += sum(ws)
    big_w, big_last = max((sum(ws), last) for ws, last in script)
    rest = list(waited_for)
    rest[big_last] -= big_w
    st = doc["ranks"]["straggler"]
    assert st["rank"] == max(range(n), key=lambda k: waited_for[k])
    assert st["waited_for_ms"] == pytest.approx(waited_for[st["rank"]] / 1000.0, rel=0.02)
    wl = st["without_largest_wait"]
    assert wl["rank"] == max(range(n), key=lambda k: rest[k])
    assert wl["waited_for_ms"] == pytest.approx(rest[wl["rank"]] / 1000.0, rel=0.05)
    if run == "tp2":
        assert st["rank"] == wl["rank"] == 1          # the rank that slept before its all-reduces
    c = doc["ranks"]["collectives"][0]
    assert c["clock_check"] == "ok" and c["end_spread_us_median"] < 200.0
    assert c["largest_wait"]["number"] == 1          # the first all-reduce: a profiler started late
    assert "holds 85% of the waiting" in out or run == "tp4"
    assert f"straggler: rank {st['rank']}" in out


def test_rank_from_the_file_name_when_the_header_has_none(tmp_path):
    for k, name in ((0, "trace_rk0.json.gz"), (1, "run.rank-1.pt.trace.json.gz")):
        text = gzip.open(FIX / "tp2" / f"rank{k}.json.gz", "rt").read()
        start = text.index('"distributedInfo"')
        text = text[:start] + text[text.index("\n", start) + 1:]
        with gzip.open(tmp_path / name, "wt") as f:
            f.write(text)
    r, doc = _topn(tmp_path, tmp_path / "run.rank-1.pt.trace.json.gz", tmp_path / "trace_rk0.json.gz")
    assert r.exit_code == 0, r.output
    assert doc["ranks"]["ranks"] == [0, 1] and doc["ranks"]["rank_from"] == ["file name", "file name"]
    assert doc["ranks"]["world_size"] == 2 and doc["ranks"]["backend"] is None


def test_refusals_are_one_line_and_exit_2(tmp_path):
    # the same rank twice
    r, _ = _topn(tmp_path, FIX / "tp2" / "rank0.json.gz", FIX / "tp2" / "rank0.json.gz")
    assert r.exit_code == 2 and "rank 0 (from its distributedInfo) is also" in r.output
    assert len(r.output.strip().splitlines()) == 1
    # two runs of different world sizes
    r, _ = _topn(tmp_path, FIX / "tp2" / "rank0.json.gz", FIX / "tp4" / "rank1.json.gz")
    assert r.exit_code == 2 and "different runs" in r.output and len(r.output.strip().splitlines()) == 1
    # no rank anywhere
    text = gzip.open(FIX / "tp2" / "rank1.json.gz", "rt").read()
    s = text.index('"distributedInfo"')
    with gzip.open(tmp_path / "trace.json.gz", "wt") as f:
        f.write(text[:s] + text[text.index("\n", s) + 1:])
    r, _ = _topn(tmp_path, FIX / "tp2" / "rank0.json.gz", tmp_path / "trace.json.gz")
    assert r.exit_code == 2 and "cannot tell which rank wrote it" in r.output
    # a file that is no trace, and an empty folder
    r, _ = _topn(tmp_path, FIX / "tp2" / "rank0.json.gz", FIX / "tp2" / "meta_rank1.json")
    assert r.exit_code == 2 and "meta_rank1.json" in r.output and "not a PyTorch profiler trace" in r.output
    (tmp_path / "empty").mkdir()
    r, _ = _topn(tmp_path, tmp_path / "empty")
    assert r.exit_code == 2 and "holds no PyTorch profiler trace" in r.output


def test_missing_ranks_are_said_and_a_folder_skips_what_is_no_trace(tmp_path):
    shutil.copy(FIX / "tp4" / "rank0.json.gz", tmp_path / "rank0.json.gz")
    shutil.copy(FIX / "tp4" / "rank2.json.gz", tmp_path / "rank2.json.gz")
    shutil.copy(FIX / "tp4" / "meta_rank0.json", tmp_path / "meta_rank0.json")
    r, doc = _topn(tmp_path, tmp_path)
    assert r.exit_code == 0, r.output
    assert doc["ranks"]["ranks"] == [0, 2] and doc["ranks"]["world_size"] == 4
    assert "the Top-N covers these ranks only" in r.output and "1 JSON file(s) that are no trace skipped" in r.output


def test_top_and_min_pct_apply_to_the_merged_shares(tmp_path):
    r, doc = _topn(tmp_path, FIX / "tp2", extra=("--top", "3"))
    assert r.exit_code == 0
    assert len(doc["entries"]) == 3 and "3 of 11 kernel names listed" in r.output
    r, full = _topn(tmp_path, FIX / "tp2")
    assert [e["name"] for e in doc["entries"]] == [e["name"] for e in full["entries"][:3]]
