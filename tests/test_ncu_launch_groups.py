"""An Nsight Compute report on its own, whose launches of one kernel name differ in work (a grouped
GEMM's gate_up and down launches; cats of different sizes): a measured verdict on sum(bytes) /
sum(time) over the launches, and one row per group of like launches (issue 32).

The numbers are read here from the real H200 CSVs with the csv module, independently of roofline's
reader, and compared with what `roofline topn` + `roofline analyze` make of the same file."""
from __future__ import annotations

import csv
import gzip
import io
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from roofline.counters.aggregate import launch_groups
from roofline.counters.base import KernelCounters

ROOT = Path(__file__).resolve().parents[1]
QWEN_DECODE = ROOT / "fixtures" / "corpus" / "ncu" / "qwen3moe_grouped_mm__decode.csv.gz"
H200_HBM = 4.8e12


def _csv_launches(path: Path) -> dict[str, list[tuple[float, float]]]:
    """kernel name -> [(DRAM bytes read + written, duration ns)] per launch, straight from the CSV."""
    rows = list(csv.reader(io.StringIO(gzip.open(path, "rt").read())))
    h = rows[0]
    col = {c: h.index(c) for c in ("Kernel Name", "dram__bytes_read.sum", "dram__bytes_write.sum",
                                   "gpu__time_duration.sum")}
    units = rows[1]
    assert units[col["dram__bytes_read.sum"]] in ("byte", "") and units[col["gpu__time_duration.sum"]] in ("ns", "nsecond", "")
    out = defaultdict(list)
    for r in rows[2:]:
        def f(c):
            return float(r[col[c]].replace(",", ""))
        out[r[col["Kernel Name"]]].append((f("dram__bytes_read.sum") + f("dram__bytes_write.sum"),
                                           f("gpu__time_duration.sum")))
    return out


def _analyse(src: Path, tmp: Path, *topn_args: str) -> dict:
    d = tmp / "profile" / "round_1"
    d.mkdir(parents=True)
    for cmd in (["topn", str(src), "-o", str(d / "profile_topN.json"), "--force", *topn_args],
                ["analyze", str(d / "profile_topN.json"), "--format", "json"]):
        r = subprocess.run([sys.executable, "-m", "roofline.cli", *cmd], capture_output=True, text=True, cwd=ROOT)
        assert r.returncode == 0, r.stderr[-400:]
    return json.loads((d / "profile_roofline.json").read_text())


@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    return _analyse(QWEN_DECODE, tmp_path_factory.mktemp("q")), _csv_launches(QWEN_DECODE)


def test_differing_launches_get_a_measured_verdict_on_summed_bytes_over_summed_time(qwen):
    art, launches = qwen
    # the grouped GEMM (CUTLASS device_kernel, 44% of the step): 2 layers x gate_up + down
    e = next(x for x in art["entries"] if x["name"].startswith("void cutlass::device_kernel"))
    mine = next(v for k, v in launches.items() if k == e["name"] or k.replace(" ", "") == e["name"].replace(" ", ""))
    assert len(mine) == 4
    assert e["modeled"] and e["shape_source"] == "measured" and e["counters"]["unstable"] is True
    sum_b, sum_ns = sum(b for b, _ in mine), sum(t for _, t in mine)
    assert e["achieved_bw_bytes_s"] == pytest.approx(sum_b / (sum_ns * 1e-9), rel=1e-6)
    assert e["hbm_util"] == pytest.approx(sum_b / (sum_ns * 1e-9) / art["peaks"]["hbm_bw_bytes_s"], rel=1e-6)
    assert e["headroom_class"] != "unknown"
    # no stand-in refusal: workload.conc (what a model of its M would need) is not needed
    assert "cannot stand in" not in e["notes"] and "degraded" not in e["notes"]
    # the groups: gate_up (2x the bytes) and down, each sum(bytes)/sum(time) of its own launches
    g = e["measured_groups"]
    assert [x["launches"] for x in g] == [2, 2]
    by_size = sorted(mine)
    for rows, grp in ((by_size[2:], g[0]), (by_size[:2], g[1])):
        assert grp["dram_bytes"] == pytest.approx(sum(b for b, _ in rows) / 2, rel=1e-9)
        assert grp["achieved_bw_bytes_s"] == pytest.approx(sum(b for b, _ in rows) / (sum(t for _, t in rows) * 1e-9),
                                                           rel=1e-6)
        assert grp["headroom_class"] in ("saturated", "moderate", "underperforming")
    assert g[0]["dram_bytes"] / g[1]["dram_bytes"] == pytest.approx(2.0, rel=0.02)   # gate_up N = 2 x inter


def test_every_head_with_dram_and_duration_gets_a_verdict(qwen):
    art, _ = qwen
    for e in art["entries"]:
        assert e["modeled"], e["notes"]


def test_groups_split_at_the_band_and_keep_every_launch():
    ks = [KernelCounters("k", 1, "t", t_ms=t, dram_bytes=b) for b, t in
          ((100.0, 1.0), (101.0, 1.1), (210.0, 2.0), (205.0, 2.1), (100.5, 0.9))]
    g = launch_groups(ks)
    assert sorted(x["launches"] for x in g) == [2, 3]
    assert sum(x["launches"] * x["dram_bytes"] for x in g) == pytest.approx(sum(k.dram_bytes for k in ks))
    assert g[0]["dram_bytes"] == pytest.approx(207.5)                # largest total time first
    # one launch 25% above the group's smallest starts a group of its own (band 20%)
    g2 = launch_groups([KernelCounters("k", 1, "t", t_ms=1, dram_bytes=b) for b in (100.0, 125.0)])
    assert len(g2) == 2


def test_counters_of_other_launches_do_not_stand_in():
    from roofline.core.merge import measured_result

    ks = [KernelCounters("k", 1, "t", t_ms=t, dram_bytes=b) for b, t in ((100.0, 1.0), (200.0, 2.0))]
    from roofline.counters.aggregate import average

    kc = average("k", ks, "t")
    assert kc.unstable and kc.groups
    assert measured_result(kc, 1, "bf16", t_ms=1.5) is not None          # the same launches (mean 1.5 ms)
    assert measured_result(kc, 1, "bf16", t_ms=1.2) is None              # a trace whose mix differs
    assert measured_result(kc, 1, "bf16") is None


GPTOSS = ROOT / "fixtures" / "ncu_roofline" / "gptoss_decode_roofline_raw.csv.gz"


def _rate_launches(path: Path) -> dict[str, list[tuple[float, float]]]:
    """kernel name -> [(DRAM bytes, duration ns)] of an `ncu --set roofline` raw page, which holds DRAM
    traffic as a rate only: bytes = dram__bytes.sum.per_second x duration."""
    rows = list(csv.reader(io.StringIO(gzip.open(path, "rt").read())))
    h = rows[0]
    ci = {c: h.index(c) for c in ("Kernel Name", "dram__bytes.sum.per_second", "gpu__time_duration.sum")}
    assert rows[1][ci["dram__bytes.sum.per_second"]] == "byte/s" and rows[1][ci["gpu__time_duration.sum"]] == "ns"
    out = defaultdict(list)
    for r in rows[2:]:
        ns = float(r[ci["gpu__time_duration.sum"]].replace(",", ""))
        out[r[ci["Kernel Name"]]].append((float(r[ci["dram__bytes.sum.per_second"]].replace(",", "")) * ns * 1e-9, ns))
    return out


@pytest.fixture(scope="module")
def gptoss(tmp_path_factory):
    from roofline import api

    art = _analyse(GPTOSS, tmp_path_factory.mktemp("g"))
    every = _analyse(GPTOSS, tmp_path_factory.mktemp("g_all"), "--top", "400")   # every kernel of the report
    every = api.analyze(every["inputs"]["topn"], head_threshold_pct=0.0, head_cap=400)
    return art, every, _rate_launches(GPTOSS)


def test_a_roofline_report_on_its_own_gives_every_kernel_a_measured_verdict(gptoss):
    """One gpt-oss decode step under `ncu --set roofline` (issue 32): its biggest head, the grouped
    GEMM whose gate_up and down launches differ, and every other kernel of the report get a measured
    verdict (no workload.conc asked for)."""
    art, every, launches = gptoss
    assert art["entries"] and not art["degraded"]
    raw = json.loads(Path(every["inputs"]["topn"]).read_text())["entries"]
    folded = {f["name"] for e in raw for f in e.get("folded_kernels") or []}    # split-K reduces: half a GEMM
    assert {e["name"] for e in every["entries"]} | folded == set(launches)
    assert all(e["modeled"] for e in every["entries"])
    gmm = max(art["entries"], key=lambda e: e["pct_gpu_time"])
    assert gmm["op_kind"] == "moe" and gmm["pct_gpu_time"] > 40 and gmm["counters"]["unstable"] is True
    mine = launches[gmm["name"]]
    assert len(mine) == 2
    sb, st = sum(b for b, _ in mine), sum(t for _, t in mine)
    assert gmm["achieved_bw_bytes_s"] == pytest.approx(sb / (st * 1e-9), rel=1e-4)
    up, down = gmm["measured_groups"]
    assert up["launches"] == down["launches"] == 1
    assert {round(up["dram_bytes"]), round(down["dram_bytes"])} == {round(b) for b, _ in mine}
    assert up["dram_bytes"] / down["dram_bytes"] == pytest.approx(2.0, rel=0.02)   # gate_up: N = 2 x down's
    md = (Path(art["inputs"]["topn"]).parent / "profile_roofline.md").read_text()
    assert f"  - 1 launch(es) of {up['dram_bytes'] / 1e6:.3f} MB in {up['t_ms'] * 1e3:.2f} us: roofline" in md
    # the cats of different sizes: grouped too, each group's bytes the mean of its own launches
    cat = next(e for e in every["entries"] if e["short_name"].startswith("CatArrayBatchedCopy"))
    sizes = sorted(b for b, _ in launches[cat["name"]])
    got = sorted(g["dram_bytes"] * g["launches"] for g in cat["measured_groups"])
    assert sum(got) == pytest.approx(sum(sizes), rel=1e-6) and len(got) == 2
