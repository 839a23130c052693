"""An Nsight Compute report on its own is a complete input, and ncu counters match a trace-built
Top-N of the same kernels: through the CLI, on the real H200 reports of fixtures/ncu*/ and the real
traces of fixtures/traces_real/. Every expected number is counted here from the report's raw CSV
(ncu's own CLI export of the same report), not taken from the code under test."""
from __future__ import annotations

import csv
import gzip
import json
import os
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import pytest
from click.testing import CliRunner

from roofline.cli import main

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures"
KNOWN, KNOWN_CSV = FIX / "ncu" / "known.ncu-rep.gz", FIX / "ncu" / "known_raw.csv"
COUNTS, COUNTS_CSV = FIX / "ncu_roofline" / "ncu_counts.ncu-rep.gz", FIX / "ncu_roofline" / "ncu_counts_raw.csv"
ROOFSET, ROOFSET_CSV = FIX / "ncu_roofline" / "ncu_roofline.ncu-rep.gz", FIX / "ncu_roofline" / "ncu_roofline_raw.csv"
REAL = FIX / "traces_real"


def _num(s: str) -> float:
    return float(s.replace(",", ""))


def csv_kernels(path: Path) -> dict[str, dict]:
    """Per kernel name of ncu's CSV (--print-units base): launches, total and mean duration (ns),
    mean DRAM bytes per launch (read + write; or rate x duration where the set stores the rate),
    mean bf16 tensor-pipe FLOPs where collected, and the device columns."""
    rows = list(csv.DictReader(open(path, newline="")))
    units, rows = rows[0], rows[1:]
    assert units["gpu__time_duration.sum"] == "ns"
    acc: dict[str, dict] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        k = acc[r["Kernel Name"]]
        ns = _num(r["gpu__time_duration.sum"])
        k["ns"].append(ns)
        if r.get("dram__bytes_read.sum"):
            assert units["dram__bytes_read.sum"] == units["dram__bytes_write.sum"] == "byte"
            k["bytes"].append(_num(r["dram__bytes_read.sum"]) + _num(r["dram__bytes_write.sum"]))
        else:
            assert units["dram__bytes.sum.per_second"] == "byte/s"
            k["bytes"].append(_num(r["dram__bytes.sum.per_second"]) * ns * 1e-9)
        if r.get("sm__ops_path_tensor_src_bf16_dst_fp32.sum"):
            k["bf16"].append(_num(r["sm__ops_path_tensor_src_bf16_dst_fp32.sum"]))
        k["device"] = [r["device__attribute_display_name"]]
        k["cc"] = [f"sm_{r['device__attribute_compute_capability_major']}{r['device__attribute_compute_capability_minor']}"]
    mean = lambda v: sum(v) / len(v)  # noqa: E731
    return {n: {"launches": len(k["ns"]), "total_ns": sum(k["ns"]), "ns": mean(k["ns"]), "bytes": mean(k["bytes"]),
                "bf16": mean(k["bf16"]) if k["bf16"] else None, "device": k["device"][0], "cc": k["cc"][0]}
            for n, k in acc.items()}


def _run(args):
    r = CliRunner().invoke(main, [str(a) for a in args])
    return r


def _topn(src: Path, out: Path, *extra):
    r = _run(["topn", src, "-o", out, "--isl", 128, "--osl", 128, "--conc", 8, *extra])
    assert r.exit_code == 0, r.output
    return json.loads(out.read_text()), r


def _analyze(topn: Path, *extra):
    r = _run(["analyze", topn, "--head-threshold", 0, "--head-cap", 50, "--format", "json", "--no-write", *extra])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout), r.stderr


def _by_total(entries, kernels):
    """Each Top-N entry's expected per-launch figures from the CSV, linked by total time (names
    differ between ncu_report and the ncu CLI; durations are the same measurements). A split-K
    GEMM entry folds its reduce kernel (`folded_kernels`): one logical op, times and bytes summed."""
    def one(total_ms):
        hit = [n for n, k in kernels.items() if abs(k["total_ns"] / 1e6 - total_ms) < 1e-9]
        assert len(hit) == 1, (total_ms, hit)
        return kernels[hit[0]]

    out = {}
    for e in entries:
        folded = [one(f["total_ms"]) for f in e.get("folded_kernels", [])]
        g = one(e["total_ms"] - sum(f["total_ms"] for f in e.get("folded_kernels", [])))
        per = [(f, f["launches"] / g["launches"]) for f in folded]
        out[e["name"]] = {"ns": g["ns"] + sum(f["ns"] * r for f, r in per),
                          "bytes": g["bytes"] + sum(f["bytes"] * r for f, r in per),
                          "bf16": None if g["bf16"] is None else g["bf16"] + sum((f["bf16"] or 0) * r for f, r in per),
                          "kernels": 1 + len(folded)}
    return out


@pytest.mark.parametrize("report, raw", [(KNOWN, KNOWN_CSV), (KNOWN_CSV, KNOWN_CSV), (COUNTS, COUNTS_CSV),
                                         (ROOFSET, ROOFSET_CSV), (ROOFSET_CSV, ROOFSET_CSV)],
                         ids=["known.rep", "known.csv", "counts.rep", "roofline-set.rep", "roofline-set.csv"])
def test_a_report_alone_gives_measured_verdicts_on_the_h200(tmp_path, report, raw):
    kernels = csv_kernels(raw)
    doc, r = _topn(report, tmp_path / "profile_topN.json")
    env = json.loads((tmp_path / "env_report.json").read_text())
    dev = {k["device"] for k in kernels.values()}
    assert {env["gpu_name"]} == dev == {"NVIDIA H200"} and env["gfx"] == next(iter(kernels.values()))["cc"]
    assert [d["name"] for d in doc["device_properties"]] == ["NVIDIA H200"]
    art, _ = _analyze(tmp_path / "profile_topN.json")
    assert art["stage"] == "C" and art["peaks"]["table_file"].endswith("h200.yaml")
    link = _by_total(doc["entries"], kernels)
    assert sum(k["kernels"] for k in link.values()) == len(kernels)   # every kernel, a split-K reduce folded
    degraded = {d["name"]: d["reason"] for d in art["degraded"]}
    for e in art["entries"]:
        k = link[e["name"]]
        if e["name"] in degraded:
            # only what no model may be put on: an op class no rule knows (cuDNN's lean reduction)
            assert "cannot be modelled" in degraded[e["name"]] and "no shapes" not in degraded[e["name"]]
            continue
        assert e["modeled"] and e["byte_model"] == "measured" and e["shape_source"] == "measured"
        assert e["t_ms"] == pytest.approx(k["ns"] / 1e6, rel=1e-12)
        assert e["bytes_est"] == e["bytes_measured"] == pytest.approx(k["bytes"], rel=1e-9)
        assert e["achieved_bw_bytes_s"] == pytest.approx(k["bytes"] / (k["ns"] * 1e-9), rel=1e-9)
        assert e["flops_useful"] is None and "useful FLOPs unknown" in e["notes"]
        if k["bf16"]:   # the compute axis: the issued tensor FLOPs the report counted
            assert e["compute_dtype"] == "bf16" and e["flops_est"] == pytest.approx(k["bf16"], rel=1e-9)
        assert e["confidence"] == ("high" if e["roof_axis"] == "memory" else "medium")
        assert e["headroom_class"] in ("underperforming", "moderate", "saturated", "unknown")
    assert sum(1 for e in art["entries"] if e["headroom_class"] != "unknown") >= len(kernels) - 3


@pytest.mark.parametrize("report, counters", [(KNOWN, KNOWN), (KNOWN, KNOWN_CSV), (COUNTS, COUNTS_CSV),
                                              (COUNTS_CSV, COUNTS)],
                         ids=["rep+same rep", "rep+its csv", "counts rep+csv", "counts csv+rep"])
def test_the_very_report_as_counters_matches_every_kernel(tmp_path, report, counters):
    kernels = csv_kernels(KNOWN_CSV if report == KNOWN else COUNTS_CSV)
    doc, _ = _topn(report, tmp_path / "profile_topN.json")
    art, err = _analyze(tmp_path / "profile_topN.json", "--counters", counters)
    assert art["unmatched_counters"] == [] and "matched no Top-N entry" not in err and "not applied" not in err
    link = _by_total(doc["entries"], kernels)
    degraded = {d["name"] for d in art["degraded"]}   # no model may be put on it (an unknown op class)
    assert len(degraded) <= 1
    for e in art["entries"]:
        if e["name"] not in degraded:
            assert e["counters"]["dram_bytes"] == pytest.approx(link[e["name"]]["bytes"], rel=1e-9), e["name"]


# the kernels the decode trace and the ncu_counts report share (fixtures/ncu_roofline/README.md: the
# same model's gather, fp32 copy, mean, decode GEMMs and KV-cache cat); the report's 4096^3 GEMM
# is a prefill shape (not in this decode trace) and its split-K reduce is folded into its GEMM's
# entry by `roofline topn`
SHARED = {"vectorized_gather_kernel", "unrolled_elementwise_kernel[direct_copy_kernel_cuda]", "reduce_kernel[MeanOps]",
          "nvjet_sm90_tst_64x32_64x16_1x2_h_bz_TNT", "nvjet_sm90_tst_96x64_64x10_2x1_v_bz_splitK_TNN",
          "CatArrayBatchedCopy_vectorized"}
NOT_IN_TRACE = {"nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT", "splitKreduce_kernel"}


@pytest.mark.parametrize("counters", [COUNTS, COUNTS_CSV], ids=["rep", "csv"])
def test_counters_of_a_report_match_the_trace_built_topn(tmp_path, counters):
    from roofline.core.classify import short_name

    kernels = csv_kernels(COUNTS_CSV)
    by_short = {short_name(n): k for n, k in kernels.items()}
    assert set(by_short) == SHARED | NOT_IN_TRACE
    doc, _ = _topn(REAL / "decode_b64_cat.json.gz", tmp_path / "profile_topN.json", "--top", 50)
    art, err = _analyze(tmp_path / "profile_topN.json", "--env", REAL / "env_decode.json",
                        "--config", REAL / "config.json", "--counters", counters)
    got = {e["short_name"]: e for e in art["entries"] if e.get("counters")}
    assert set(got) == SHARED
    for s, e in got.items():
        assert e["counters"]["dram_bytes"] == pytest.approx(by_short[s]["bytes"], rel=1e-9), s
        assert e["bytes_measured"] == pytest.approx(by_short[s]["bytes"] * e.get("launches_per_logical_op", 1))
    # the two that match no entry are named on stderr, not dropped
    assert sorted(short_name(n) for n in art["unmatched_counters"]) == sorted(NOT_IN_TRACE)
    line = next(ln for ln in err.splitlines() if "matched no Top-N entry" in ln)
    assert all(repr(s) in line for s in NOT_IN_TRACE) and line.count("'") == 2 * len(NOT_IN_TRACE)
    # the reduce is there, folded into every split-K GEMM of the trace: said, not shared out
    n_fold = sum(1 for e in doc["entries"] if any("splitKreduce" in f["name"] for f in e.get("folded_kernels", [])))
    assert n_fold == 2 and f"folded into {n_fold} GEMM entries as their split-K reduce" in line


def _mangled_names(report: Path) -> list[tuple[str, str]]:
    """(mangled, ncu_report-demangled) name of every launch of a real report."""
    import ncu_report

    with tempfile.NamedTemporaryFile(suffix=".ncu-rep", delete=False) as t:
        t.write(gzip.open(report).read())
    try:
        ctx = ncu_report.load_report(t.name)
        out = []
        for ri in range(ctx.num_ranges()):
            rng = ctx.range_by_idx(ri)
            for ai in range(rng.num_actions()):
                a = rng.action_by_idx(ai)
                out.append((a.name(ncu_report.IAction.NameBase_MANGLED), a.name(ncu_report.IAction.NameBase_DEMANGLED)))
        return out
    finally:
        os.unlink(t.name)


@pytest.mark.parametrize("report, raw", [(KNOWN, KNOWN_CSV), (COUNTS, COUNTS_CSV)], ids=["known", "counts"])
def test_one_spelling_for_the_three_names_of_every_real_kernel(report, raw):
    from roofline.counters import canonical_name

    cli = [r["Kernel Name"] for r in list(csv.DictReader(open(raw, newline="")))[1:]]
    names = _mangled_names(report)
    assert len(names) == len(cli)
    assert any(m.startswith("_Z") for m, _ in names)
    for (m, d), c in zip(names, cli):   # the same launch, in report order
        assert canonical_name(m) == canonical_name(d) == canonical_name(c), (m, d, c)


def _mangled_topn(tmp_path: Path, report: Path, raw: Path) -> Path:
    """A Top-N whose names are the report's MANGLED names (a profiler that does not demangle),
    one entry per kernel, times from the CSV."""
    kernels = csv_kernels(raw)
    total = sum(k["total_ns"] for k in kernels.values())
    cli = [r["Kernel Name"] for r in list(csv.DictReader(open(raw, newline="")))[1:]]
    mangled = dict(zip(cli, (m for m, _ in _mangled_names(report))))
    entries = [{"name": mangled[n], "pct_gpu_time": 100 * k["total_ns"] / total,
                "regimes": {"decode": {"base_latency_ms": k["ns"] / 1e6, "launches_per_step": k["launches"]}}}
               for n, k in kernels.items()]
    d = tmp_path / "run"
    d.mkdir()
    (d / "profile_topN.json").write_text(json.dumps({"schema_version": 1, "entries": entries,
                                                     "serving": {"n_decode_steps": 1, "n_prefill_steps": 0}}))
    (d / "env_report.json").write_text(json.dumps({"gfx": "sm_90", "gpu_name": "NVIDIA H200", "model_dtype": "bf16",
                                                   "model_arch_class": "dense",
                                                   "workload": {"isl": 128, "osl": 128, "conc": 8}}))
    return d / "profile_topN.json"


def test_mangled_trace_names_are_demangled_to_match(tmp_path):
    topn = _mangled_topn(tmp_path, COUNTS, COUNTS_CSV)
    kernels = csv_kernels(COUNTS_CSV)
    art, err = _analyze(topn, "--counters", COUNTS_CSV)
    assert art["unmatched_counters"] == [] and "matched no Top-N entry" not in err
    assert sum(1 for e in art["entries"] if e["name"].startswith("_Z")) >= 4
    degraded = {d["name"] for d in art["degraded"]}
    assert len(degraded) == 1   # the split-K reduce listed on its own: half of its GEMM's op, no model
    for e in art["entries"]:
        if e["name"] not in degraded:
            want = next(k for k in kernels.values() if abs(k["ns"] / 1e6 - e["t_ms"]) < 1e-12)
            assert e["counters"]["dram_bytes"] == pytest.approx(want["bytes"], rel=1e-9)
    # the readable name of a mangled entry is its demangled one
    gather = next(e for e in art["entries"] if "gather" in e["name"])
    assert gather["name"].startswith("_ZN2at6native24vectorized_gather_kernel")
    assert gather["short_name"] == "vectorized_gather_kernel"


def test_without_a_demangler_mangled_names_stay_and_are_warned(tmp_path, monkeypatch):
    import importlib

    m = importlib.import_module("roofline.counters.match")

    topn = _mangled_topn(tmp_path, COUNTS, COUNTS_CSV)
    monkeypatch.setitem(sys.modules, "cxxfilt", None)   # `import cxxfilt` raises ImportError
    m.demangle.cache_clear()
    m.canonical_name.cache_clear()
    try:
        assert m.demangle("_ZN2at6native24vectorized_gather_kernelILi16ElEEvPcS2_PT0_illllb").startswith("_ZN2at")
        art, err = _analyze(topn, "--counters", COUNTS_CSV)
    finally:
        m.demangle.cache_clear()
        m.canonical_name.cache_clear()
    mangled = [e["name"] for e in art["entries"] if e["name"].startswith("_Z")]
    assert mangled and not any(e.get("counters") for e in art["entries"] if e["name"] in mangled)
    assert len(art["unmatched_counters"]) == len(mangled)
    assert f"{len(mangled)} kernel(s) matched no Top-N entry" in err


def test_a_gpu_in_no_table_gets_roofs_from_the_reports_device_record(tmp_path):
    # the report's device__attribute_* columns (read here from its CSV twin) are the Top-N's
    # device_properties: for a GPU no table names, level L1 derives the memory roof from them
    row = list(csv.DictReader(open(FIX / "ncu_topn" / "small_raw.csv", newline="")))[1]
    _topn(FIX / "ncu_topn" / "small.ncu-rep.gz", tmp_path / "profile_topN.json", "--model-dtype", "bf16")
    env = json.loads((tmp_path / "env_report.json").read_text())
    env.update(gpu_name="Mystery GPU", gfx="sm_99")
    (tmp_path / "env_report.json").write_text(json.dumps(env))
    art, _ = _analyze(tmp_path / "profile_topN.json")
    # the env report names no known GPU, but the report's own device record does: the H200 table
    assert art["peaks"]["table_file"].endswith("h200.yaml")
    assert "identified by its device-properties record ('NVIDIA H200')" in " ".join(art["peaks"]["notes"])
    doc = json.loads((tmp_path / "profile_topN.json").read_text())
    doc["device_properties"][0]["name"] = "Mystery GPU"   # now a GPU that no table names
    (tmp_path / "profile_topN.json").write_text(json.dumps(doc))
    art, _ = _analyze(tmp_path / "profile_topN.json")
    want = 2 * _num(row["device__attribute_max_mem_frequency_khz"]) * 1e3 * _num(
        row["device__attribute_global_memory_bus_width"]) / 8
    assert art["peaks"]["hbm_bw_bytes_s"] == pytest.approx(want, rel=1e-12)
    assert art["peaks"]["confidence"] == "low" and art["peaks"]["origin"] == "device properties"
    # this --set basic report has no DRAM byte counter (issue 42): the bytes are derived from its DRAM
    # throughput % x the DRAM peak x duration, and each entry says so (no guess, no silent count)
    assert not [d for d in art["degraded"] if "they hold no DRAM bytes" in d["reason"]]
    used = [e for e in art["entries"] if e.get("modeled") and e.get("counters")]
    assert used and all("DRAM bytes DERIVED" in e["notes"] for e in used)


@pytest.mark.parametrize("bad, where", [({"dram_bytes": "176 MB"}, "entries[0].counters.dram_bytes"),
                                        ({"dram_bytes": -1}, "entries[0].counters.dram_bytes"),
                                        ({"tensor_flops_by_dtype": {"bf16": None}}, "counters.tensor_flops_by_dtype.bf16"),
                                        ({"launches": 0}, "entries[0].counters.launches"), ("x", "entries[0].counters")])
def test_malformed_embedded_counters_are_one_line_and_exit_2(tmp_path, bad, where):
    doc, _ = _topn(KNOWN, tmp_path / "profile_topN.json")
    first = max(doc["entries"], key=lambda e: e["pct_gpu_time"])
    doc["entries"] = [first] + [e for e in doc["entries"] if e is not first]
    doc["entries"][0]["counters"] = {**first["counters"], **bad} if isinstance(bad, dict) else bad
    (tmp_path / "profile_topN.json").write_text(json.dumps(doc))
    r = _run(["analyze", tmp_path / "profile_topN.json", "--no-write"])
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1, r.output
    assert str(tmp_path / "profile_topN.json") in r.stderr and where in r.stderr and "Traceback" not in r.output
