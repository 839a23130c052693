"""Collectives as op class comm: the byte model on the interconnect roof, the message sizes read from
Kineto's collective record, the waiting / transfer split across ranks, and the artifact, report and
picture of a multi-rank run.

NCCL refuses two ranks on one GPU, so the real one-GPU TP=2 run (fixtures/traces_tp/tp2) used gloo
and holds no NCCL kernel; the NCCL path is tested on fixtures/traces_tp/nccl_layout, those traces
rewritten in the layout Kineto writes for NCCL (tools/make_nccl_layout_traces.py; the timings are
the real gloo ones). Numbers are checked against the script's own record of each all-reduce
(meta_rank<r>.json), the peak table read here with yaml, and the formulas written out here."""
from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

import seed_reader
from conftest import entry, h200_env, topn
from roofline import api
from roofline.cli import main

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures" / "traces_tp"
NCCL = FIX / "nccl_layout"
LINK = yaml.safe_load((ROOT / "peaks" / "h200.yaml").read_text())["interconnect_bw_bytes_s"]["datasheet"]


def _meta(r):
    return json.loads((FIX / "tp2" / f"meta_rank{r}.json").read_text())


# ------------------------------------------------------------------------------------ the model
@pytest.mark.parametrize("coll,factor", [("all_reduce", lambda n: 2 * (n - 1) / n),
                                         ("all_gather", lambda n: (n - 1) / n),
                                         ("reduce_scatter", lambda n: (n - 1) / n),
                                         ("all_to_all", lambda n: (n - 1) / n),
                                         ("broadcast", lambda n: 1.0), ("send", lambda n: 1.0)])
@pytest.mark.parametrize("n", [2, 4, 8])
def test_bytes_one_rank_sends_per_collective(coll, factor, n):
    from roofline.core.models.collective import model

    nelems = 64 * 4096
    r = model({"coll": coll, "nelems": nelems, "group_size": n}, {"act_bytes": 2})
    assert r.candidates[0].bytes_est == pytest.approx(factor(n) * nelems * 2)
    assert r.info["message_bytes"] == nelems * 2


def test_what_moves_nothing_degrades():
    a = api.analyze(topn(entry("ncclDevKernel_Barrier", 30, 0.05, shapes=[{"coll": "barrier", "nelems": 1,
                                                                            "group_size": 8}]),
                         entry("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 20, 0.05,
                               shapes=[{"coll": "all_reduce", "nelems": 4096, "group_size": 1}])), h200_env())
    why = {d["name"]: d["reason"] for d in a["degraded"]}
    assert "a barrier moves no data" in why["ncclDevKernel_Barrier"]
    assert "a group of 1 rank moves nothing" in why["ncclDevKernel_AllReduce_Sum_bf16_RING_LL"]


def test_the_link_roof_is_one_direction_of_the_datasheet_total_and_validated():
    from roofline.peaks import resolve
    from roofline.peaks.validate import validate_table

    assert LINK["value"] * 2 == LINK["total_bidirectional_bytes_s"] == 9.0e11
    assert "900 GB/s" in LINK["source"] and "ONE direction" in LINK["source"]
    pk = resolve("NVIDIA H200")
    assert pk.interconnect_bw_bytes_s == LINK["value"] and "datasheet" in pk.sources["interconnect_bw_bytes_s"]
    t = yaml.safe_load((ROOT / "peaks" / "h200.yaml").read_text())
    assert validate_table(t) == []
    bad = json.loads(json.dumps(t))
    bad["interconnect_bw_bytes_s"]["datasheet"]["value"] = 9.0e11        # the total taken as the roof
    assert any("not one direction" in x for x in validate_table(bad))
    del bad["interconnect_bw_bytes_s"]["datasheet"]["source"]
    assert any("interconnect_bw_bytes_s.datasheet.source: missing" in x for x in validate_table(bad))


def test_a_collective_with_a_known_split_is_judged_on_its_transfer():
    """t = 50 us per launch, of which 20 us transfer: the roofline on the transfer, the kernel's
    attainable speedup with the waiting kept, and the seed's e2e formula on the kernel."""
    n, nelems = 4, 1024 * 1024
    e = entry("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 12.0, 0.050,
              shapes=[{"coll": "all_reduce", "nelems": nelems, "group_size": n}], dtypes={"act": "bf16"},
              collective={"transfer_ms_per_launch": 0.020})
    t = topn(e)
    a = api.analyze(t, h200_env())
    c = a["entries"][0]
    bytes_ = 2 * (n - 1) / n * nelems * 2
    assert (c["op_class"], c["op_kind"]) == ("unknown", "comm") and c["memory_roof"] == "interconnect" and c["bytes_est"] == bytes_
    assert c["t_ms"] == 0.050 and c["t_transfer_ms"] == 0.020 and c["t_waiting_ms"] == pytest.approx(0.030)
    assert c["achieved_bw_bytes_s"] == pytest.approx(bytes_ / 20e-6)
    assert c["roofline_pct"] == pytest.approx(bytes_ / 20e-6 / LINK["value"])
    s_x = max(1.0, 0.80 / c["roofline_pct"])                     # the comm prior, 0.80
    assert c["attainable_speedup_transfer"] == pytest.approx(s_x)
    assert c["attainable_speedup"] == pytest.approx(0.050 / (0.030 + 0.020 / s_x))
    assert c["expected_e2e_gain_pct"] == pytest.approx(12.0 * (1 - 1 / c["attainable_speedup"]))
    assert any("waiting for the last rank" in lv for lv in c["other_levers"])
    assert a["peaks"]["interconnect_bw_bytes_s"] == LINK["value"]
    assert seed_reader.check(a, t) == []


def test_without_a_link_roof_a_collective_degrades_and_hbm_artifacts_do_not_list_it():
    e = entry("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 12.0, 0.05,
              shapes=[{"coll": "all_reduce", "nelems": 4096, "group_size": 2}])
    a = api.analyze(topn(e), h200_env(gfx="sm_80", gpu_name="NVIDIA A100-SXM4-80GB"))
    assert "no interconnect roof" in a["degraded"][0]["reason"]
    g = api.analyze(topn(entry("gemm_x", 30, 0.04, shapes=[{"M": 64, "N": 4096, "K": 4096}])), h200_env())
    assert "interconnect_bw_bytes_s" not in g["peaks"] and "interconnect_bw_bytes_s" not in g["peaks"]["sources"]


# ------------------------------------------------------------------- reading Kineto's record
def test_message_sizes_come_from_the_kernel_record_or_its_record_param_comms_op():
    from roofline.ingest.collectives import scan_collectives

    evs = scan_collectives(str(NCCL / "rank0.json.gz"))
    ar = [e for e in evs if e.name.startswith("ncclDevKernel_AllReduce")]
    ag = [e for e in evs if e.name.startswith("ncclDevKernel_AllGather")]
    calls = _meta(0)["allreduce_calls"]
    assert len(ar) + len(ag) == len(calls) == 32 and len(ar) == len(ag)
    assert {(e.coll, e.nelems, e.dtype, e.group_size, e.algo, e.pg, e.size_from) for e in ar} == \
        {("all_reduce", calls[0]["nelems"], "bf16", 2, "RING", "0", "kernel args")}
    # the all-gather's record is on its record_param_comms op only: max(In = N/2, Out = N)
    assert {(e.coll, e.nelems, e.group_size, e.size_from) for e in ag} == \
        {("all_gather", calls[1]["nelems"], 2, "record_param_comms")}
    # start and duration are the rewritten gloo collective's, to the microsecond
    raw = json.loads(gzip.open(FIX / "tp2" / "rank0.json.gz").read())
    gl = sorted((e["ts"], e["dur"]) for e in raw["traceEvents"] if e.get("name") == "gloo:all_reduce"
                and e.get("cat") == "user_annotation")
    assert [(e.ts_us, e.dur_us) for e in evs] == gl


def test_one_nccl_trace_gets_message_sizes_but_no_split(tmp_path):
    out = tmp_path / "profile_topN.json"
    r = CliRunner().invoke(main, ["topn", str(NCCL / "rank0.json.gz"), "-o", str(out), "--no-env-report"])
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    ar = next(e for e in doc["entries"] if e["name"].startswith("ncclDevKernel_AllReduce"))
    assert ar["shapes"] == [{"coll": "all_reduce", "nelems": 262144, "group_size": 2, "algo": "RING"}]
    assert ar["shape_launches"] == [16] and ar["editable"] is False and "shape_unknown" not in ar
    assert "collective" not in ar and "ranks" not in doc
    a = api.analyze(doc, h200_env())
    e = next(x for x in a["entries"] if x["name"] == ar["name"])
    assert e["modeled"] and e.get("t_transfer_ms") is None and "judged on its whole kernel time" in e["notes"]


# ------------------------------------------------------------------- several ranks, end to end
@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("nccl") / "profile" / "round_1"
    r = CliRunner().invoke(main, ["topn", str(NCCL), "-o", str(d / "profile_topN.json"), "--isl", "1024",
                                  "--osl", "16", "--conc", "64"])
    assert r.exit_code == 0, r.output
    r2 = CliRunner().invoke(main, ["analyze", str(d / "profile_topN.json")])
    assert r2.exit_code == 0, r2.output
    return (json.loads((d / "profile_topN.json").read_text()), json.loads((d / "profile_roofline.json").read_text()),
            (d / "profile_roofline.md").read_text(), r2.output, d)


def _by_rank_collectives():
    """Per rank: the NCCL kernels' (name, start, duration) straight from the JSON."""
    out = []
    for k in (0, 1):
        ev = json.loads(gzip.open(NCCL / f"rank{k}.json.gz").read())["traceEvents"]
        out.append(sorted((e["ts"], e["dur"], e["name"]) for e in ev if e.get("cat") == "kernel"
                          and e["name"].startswith("ncclDevKernel")))
    return out


def test_the_transfer_per_launch_is_what_is_left_after_waiting_for_the_last_rank(run):
    doc, art, _, _, _ = run
    per = _by_rank_collectives()
    for prefix in ("ncclDevKernel_AllReduce", "ncclDevKernel_AllGather"):
        rows = [[x for x in p if x[2].startswith(prefix)] for p in per]
        xfer = [0.0, 0.0]
        for a, b in zip(*rows):
            last = max(a[0], b[0])
            for k, x in enumerate((a, b)):
                xfer[k] += x[1] - min(last - x[0], x[1])
        want = statistics.median([xfer[k] / len(rows[k]) / 1000.0 for k in (0, 1)])
        te = next(e for e in doc["entries"] if e["name"].startswith(prefix))
        assert te["collective"]["transfer_ms_per_launch"] == pytest.approx(want, rel=1e-9)
        ae = next(e for e in art["entries"] if e["name"] == te["name"])
        assert ae["t_transfer_ms"] == pytest.approx(min(want, ae["t_ms"]))
        nbytes = (2 * 1 / 2 if "AllReduce" in prefix else 1 / 2) * 262144 * 2
        assert ae["bytes_est"] == nbytes
        assert ae["hbm_util"] == pytest.approx(nbytes / (ae["t_transfer_ms"] / 1e3) / LINK["value"])


def test_the_multi_rank_artifact_keeps_the_contract_and_the_ranks(run):
    from roofline.io.schema import validate_artifact

    doc, art, md, out, _ = run
    validate_artifact(art)
    assert seed_reader.check(art, doc) == []
    assert {(e["op_class"], e["op_kind"]) for e in art["entries"]} == {("unknown", "comm")}
    assert art["ranks"]["straggler"]["rank"] == 1 and art["ranks"]["backend"] == "nccl"
    for e in art["entries"]:
        te = next(x for x in doc["entries"] if x["name"] == e["name"])
        assert e["ranks"]["total_ms"] == te["ranks"]["total_ms"] and e["collective"] == te["collective"]
        assert e["route"] == "host_side"        # NCCL kernels are a library: host-side levers only
    # the report shows each rank's time per head, and the straggler
    assert "## Ranks" in md and "straggler: rank 1" in md and "straggler: rank 1" in out
    for e in art["entries"]:
        vals = [f"{t:.3f}" for t in e["ranks"]["total_ms"]]
        assert f"| {e['short_name'][:47]}" in md and " | ".join(vals) + f" | {e['ranks']['spread_rel']:.1%}" in md
        assert any(e["short_name"][:40] in ln and ln.split()[2:4] == vals for ln in out.splitlines())


def test_the_picture_draws_each_ranks_rate_and_the_link_roof(run, tmp_path):
    from roofline.report.plot import plot_artifact

    _, art, _, _, _ = run
    info = plot_artifact(art, tmp_path / "r.png")
    assert info["interconnect_bw_bytes_s"] == LINK["value"]
    (bar,) = info["rank_bars"]                         # the all-gather has no FLOPs: not placed
    e = next(x for x in art["entries"] if x["name"] == bar["name"])
    c = e["collective"]
    t_rank = [x / n for x, n in zip(c["transfer_ms"], c["aligned_launches"])]
    y = e["achieved_flops"]
    assert sorted(bar["per_rank_y"]) == pytest.approx(sorted(y * e["t_transfer_ms"] / t for t in t_rank))
    assert bar["slowest_rank"] == max(range(2), key=lambda k: t_rank[k])
    assert (tmp_path / "r.png").stat().st_size > 10_000


def test_hand_edited_rank_fields_of_the_wrong_type_never_break_the_artifact(tmp_path):
    """Extra fields are no input error; ones of the wrong type are dropped or read as null, and the
    report and the picture render them as '-'."""
    from roofline.report import artifact as report
    from roofline.report.plot import plot_artifact
    from roofline.io.schema import validate_artifact

    e = entry("nvjet_x", 30, 0.04, shapes=[{"M": 64, "N": 4096, "K": 4096}],
              ranks={"total_ms": ["a", 1e308, None], "spread_rel": "x", "slowest_rank": True,
                     "base_latency_ms": {"decode": [1, "b"]}},
              collective={"waiting_share": "x", "transfer_ms": [1, {}]})
    t = topn(e, ranks={"ranks": [0, "1"], "straggler": {"rank": "x", "waited_for_ms": "1"},
                       "collectives": [{"waiting_share": ["a"]}, 3]})
    a = api.analyze(t, h200_env())
    validate_artifact(a)
    assert a["entries"][0]["ranks"] == {"total_ms": [None, 1e308, None], "t_ms": [1, None]}
    assert a["entries"][0]["collective"] == {"transfer_ms": [1, None]}
    assert a["ranks"] == {"ranks": [0, None], "straggler": {}, "collectives": [{"waiting_share": [None]}]}
    assert "| 1 | nvjet_x | - | - | - | rank None |" in report.to_markdown(a)
    assert "straggler: rank None" in report.render_table(a)
    assert plot_artifact(a, tmp_path / "g.png")["rank_bars"] == []


def test_any_other_layout_is_read_by_the_general_parser_to_the_same_collectives(tmp_path):
    from roofline.ingest.collectives import scan_collectives

    doc = json.loads(gzip.open(NCCL / "rank1.json.gz").read())
    with gzip.open(tmp_path / "compact.json.gz", "wt") as f:
        json.dump(doc, f, separators=(",", ":"))       # one line: not Kineto's layout
    pretty = scan_collectives(str(NCCL / "rank1.json.gz"))
    compact = scan_collectives(str(tmp_path / "compact.json.gz"))
    assert compact == pretty and len(pretty) == 32
    (tmp_path / "broken.json").write_text('{"traceEvents": [{"cat": "kernel", "name": "ncclDevKernel_X"')
    with pytest.raises(ValueError):
        scan_collectives(str(tmp_path / "broken.json"))
