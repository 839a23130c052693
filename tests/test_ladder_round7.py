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
