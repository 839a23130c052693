"""Round 7 of the GEMM ladder (notes/l13.md, notes/l15.md): the column scales staged in shared memory once per
unit (ws.cuh SSC = 1, WsBuild stage_scales; registry `l13_ssc`, `l15_pp_m128_ssc`). CPU only: what the build
promises, read from nvcc's PTX of the registry's own build (no GPU): the TMA-store staging reads the column
scales as 8-byte shared loads, a producer warp writes the slot, and far fewer global scale loads remain than
in the build it is a variant of."""
from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

import pytest

from roofline.ladder.build import level_source, nvcc_path
from roofline.ladder.registry import VARIANTS, get_level

needs_nvcc = pytest.mark.skipif(nvcc_path() is None, reason="nvcc not on PATH")
PAIRS = (("l13_ssc", "13"), ("l15_pp_m128_ssc", "l15_pp_m128"))


def _ptx(level) -> str:
    with tempfile.TemporaryDirectory() as td:
        src, out = Path(td) / "k.cu", Path(td) / "k.ptx"
        src.write_text(level_source(level))
        cmd = [nvcc_path(), "-arch=sm_90a", "-std=c++17", "-ptx", str(src), "-o", str(out)]
        cmd += [f"-D{d}" for d in level.defines]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        return out.read_text()


def _count(ptx: str, op: str) -> int:
    return len(re.findall(rf"^\s*{re.escape(op)}\s", ptx, flags=re.M))


def test_the_staged_scale_builds_are_variants_of_the_builds_they_are_timed_beside():
    for new, old in PAIRS:
        a, b = VARIANTS[new], get_level(old)
        assert (a.file, a.kernel, a.tile_mnk, a.cluster, a.dyn_smem_bytes, a.contract) == \
               (b.file, b.kernel, b.tile_mnk, b.cluster, b.dyn_smem_bytes, b.contract)
        # the slot: UN floats + 2 x 2 mbarriers of static shared memory (alignment aside) on top of the old build's
        assert a.smem_bytes - b.smem_bytes >= a.tile_mnk[1] * 4 + 32
        assert a.total_smem_bytes <= 227 * 1024


@pytest.mark.slow
@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize("new,old", PAIRS)
def test_the_staging_reads_the_column_scales_from_shared_memory(new, old):
    """The staged build's consumers read one float2 per column pair from the slot: UN / 8 distinct 8-byte shared
    loads per slab (the compiler merges the two rows of a pair), and at least UN / 4 fewer global non-coherent
    loads than the old build (whose staging loads both columns of every pair with __ldg). The old build has none."""
    a, b = VARIANTS[new], get_level(old)
    pa, pb = _ptx(a), _ptx(b)
    un = a.tile_mnk[1]
    assert _count(pb, "ld.shared.v2.f32") == 0
    assert _count(pa, "ld.shared.v2.f32") >= un // 8
    assert _count(pb, "ld.global.nc.f32") - _count(pa, "ld.global.nc.f32") >= un // 4
    assert _count(pa, "st.shared.f32") >= un // 32   # the producer warp's copy into the slot (UN / 32 per lane)


# ---------------------------------------------------------------- the H200 run (start11_round7/call1)
import csv  # noqa: E402
import gzip  # noqa: E402
import importlib.util  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402

from roofline.ladder import dispatch  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EV = ROOT / "fixtures" / "ladder" / "grouped_fp8_h200" / "start11_round7" / "call1"


def _ncu_where():
    spec = importlib.util.spec_from_file_location("ncu_where", ROOT / "tools" / "device" / "ncu_where.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _kernels() -> dict[str, dict]:
    """where_raw.csv.gz: each plan label -> its heaviest kernel's raw ncu row (the markers say which launch)."""
    labels = {int(ln.split()[1]): ln.split(" ", 2)[2].strip() for ln in (EV / "ncu.log").read_text().splitlines()
              if ln.startswith("WHERE_PLAN ")}
    rows = list(csv.DictReader(io.StringIO(gzip.open(EV / "where_raw.csv.gz", "rt").read())))
    out, cur = {}, None
    for r in rows:
        name = r["Kernel Name"] or ""
        if name.startswith("mark_"):
            cur = int(name[5:8])
        elif cur is not None and not name.startswith("(") and "prepare_grouped" not in name:
            out[labels[cur]] = {k: float(v.replace(",", "")) for k, v in r.items()
                                if k and k.startswith(("dram__bytes", "gpu__time_duration", "lts__t_bytes"))}
    return out


def _ratio(bench: dict, name: str) -> float:
    return next(r["ratio_vs_lib"] for r in bench["rows"] if r.get("name") == name and r.get("level"))


def test_l13_ssc_beats_level_13_in_the_same_process_but_inside_the_band():
    """bench_fp8_square-8192.json: l13_ssc 0.989x torch._scaled_mm, level 13 0.976x, l13_wepi 0.964x (medians of 100
    launches): the staged scales gain 1.3 %, inside dispatch.NOISE_BAND_ISOLATED, so level 13 stays the default
    (the stopping rule); and the >= 1.00x target is not met by any build on this start."""
    b = json.loads((EV / "bench_fp8_square-8192.json").read_text())
    r13, rw, rs = (_ratio(b, get_level(k).name) for k in ("13", "l13_wepi", "l13_ssc"))
    assert rw < r13 < rs < 1.0
    assert rs / r13 - 1 == pytest.approx(0.0133, abs=0.002)
    assert rs / r13 - 1 < dispatch.NOISE_BAND_ISOLATED
    assert [r["check_ok"] for r in b["rows"] if r.get("level")] == [True] * 3


def test_the_barrier_stall_is_the_idle_producer_warps_at_exit_not_the_epilogue():
    """Per-SASS warp-stall samples (where_src.csv.gz) of level 13 and l13_wepi at 8192^3: the exit cluster barrier
    (UCGABAR) holds a quarter of all samples (3 idle producer warps of 12), the consumers' named barriers
    (BAR.SYNC) almost none; l13_wepi has no BAR.SYNC sample at all and the same quarter. The epilogue share of the
    consumers' time: level 13 8.0 %, l13_wepi 9.3 %, l13_ssc 5.6 %; l15_pp_m128 at gate_up 34.6 %."""
    w = _ncu_where()
    blocks = [b for b in w._source_blocks(gzip.open(EV / "where_src.csv.gz", "rt").read()) if b[0].startswith("gemm_")]
    assert [n for n, _ in blocks] == ["gemm_l13"] * 3 + ["gemm_l15"] * 3   # the down case was cut by the export
    for _, ins in blocks[:2]:
        tot = sum(n for _, _, n in ins)
        assert sum(n for _, t, n in ins if "UCGABAR" in t) / tot == pytest.approx(0.25, abs=0.01)
        assert sum(n for _, t, n in ins if "BAR.SYNC" in t) / tot < 0.001
    shares = [w.regions(ins)["epilogue_share"] for _, ins in blocks]
    assert [round(s, 3) for s in shares] == [0.080, 0.093, 0.056, 0.346, 0.477, 0.341]


def test_dram_reads_torch_at_the_floor_ours_moving_with_timing():
    """gate_up at 4096 tokens: W (E N K = 128 x 1536 x 2048 B) + A (32768 rows x 2048 B) is the least any kernel
    reads; torch reads within 1 % of it, the three builds of one tile list 3-48 % more, and not the same amount;
    L2 traffic about twice torch's; l13_ssc is the fastest of the three level-13 builds in ncu too."""
    k = _kernels()
    floor = 128 * 1536 * 2048 + 32768 * 2048
    g = "qwen3moe-prefill4096-gate_up-fp8 "
    assert k[g + "library"]["dram__bytes_read.sum"] / floor == pytest.approx(1.0, abs=0.01)
    ours = [k[g + get_level(n).name]["dram__bytes_read.sum"] / floor for n in ("l15_pp_m128", "l15_pp_m128_wepi", "l15_pp_m128_ssc")]
    assert 1.02 < min(ours) and max(ours) > 1.4 and max(ours) - min(ours) > 0.3
    assert k[g + get_level("l15_pp_m128").name]["lts__t_bytes.sum"] / k[g + "library"]["lts__t_bytes.sum"] > 1.9
    sq = "fp8-8192x8192x8192 "
    t = {n: k[sq + get_level(n).name]["gpu__time_duration.sum"] for n in ("13", "l13_wepi", "l13_ssc")}
    assert t["l13_ssc"] < t["13"] < t["l13_wepi"]


def test_the_paired_unit_build_differs_from_l15_pp_m128_only_in_its_tile_order():
    """l15_pp_m128_pairs (ws_grouped.cuh GroupedPairs; built, not yet run on the device): the same file, entry point, unit
    tile, shared memory and contract as l15_pp_m128, one more define; PAIRS is a grouped-only, no-split switch
    (ws.cuh static_asserts it) and WsBuild's default tile policy is DenseTiles (every other build unchanged)."""
    a, b = VARIANTS["l15_pp_m128_pairs"], VARIANTS["l15_pp_m128"]
    assert (a.file, a.kernel, a.tile_mnk, a.cluster, a.smem_bytes, a.dyn_smem_bytes, a.contract, a.no_spills) == \
           (b.file, b.kernel, b.tile_mnk, b.cluster, b.smem_bytes, b.dyn_smem_bytes, b.contract, b.no_spills)
    assert set(a.defines) - set(b.defines) == {"L15_PAIRS"}
    ws = (Path(a.path).parent / "ws.cuh").read_text()
    assert "using tiles = DenseTiles;" in ws and "static constexpr int grouped = 0, pairs = 0" in ws
    assert 'static_assert(!PAIRS || (GROUPED && !SPLITK)' in ws
    assert "struct GroupedPairs : GroupedTiles" in (Path(a.path).parent / "ws_grouped.cuh").read_text()
