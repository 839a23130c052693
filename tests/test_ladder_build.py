"""CPU-only: every ladder level compiles for sm_90a with nvcc, and ptxas's resource report keeps
the registry's promises (registers, static shared memory, no spills; for dynamic shared memory
the build passes the registry's size and the kernel static_asserts it equals its DYN_SMEM)."""
import pytest

from roofline.ladder.build import nvcc_path, parse_ptxas, ptxas_report
from roofline.ladder.registry import LEVELS, VARIANTS, WRONG

needs_nvcc = pytest.mark.skipif(nvcc_path() is None, reason="nvcc not on PATH")

ALL = list(LEVELS) + list(WRONG.values()) + list(VARIANTS.values())


@pytest.mark.slow   # 2-3 s per level (nvcc + ptxas), over a minute together: `-m "not slow"` leaves it out
@pytest.mark.nvcc
@needs_nvcc
@pytest.mark.parametrize("level", ALL, ids=lambda lv: lv.name)
def test_ptxas_report_matches_registry(level):
    rep = ptxas_report(level)
    assert rep.registers <= level.regs_max, rep.raw
    assert rep.smem_bytes == level.smem_bytes, rep.raw
    if level.no_spills:
        assert rep.spill_store_bytes == 0 and rep.spill_load_bytes == 0, rep.raw
        assert rep.stack_frame_bytes == 0, rep.raw


def test_shared_memory_fits_and_dynamic_is_declared():
    for lv in ALL:
        assert lv.total_smem_bytes <= 227 * 1024, lv.name
        if lv.kind != "sync":  # TMA levels: 1024-aligned swizzled tiles
            assert lv.dyn_smem_bytes == 0 or lv.dyn_smem_bytes % 1024 == 0
    # the registry's dynamic size is the kernels' DYN_SMEM: 4 x 48 KiB stages + 1 KiB slack
    from roofline.ladder.registry import get_level
    assert get_level(5).dyn_smem_bytes == get_level(6).dyn_smem_bytes == 4 * 49152 + 1024
    assert VARIANTS["l05_depth1"].dyn_smem_bytes == 65536 + 1024  # epilogue staging needs 64 KiB


def test_parse_ptxas_sample():
    text = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'gemm_l03' for 'sm_90a'
ptxas info    : Function properties for gemm_l03
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 125 registers, used 1 barriers, 32768 bytes smem
"""
    rep = parse_ptxas(text)["gemm_l03"]
    assert (rep.registers, rep.smem_bytes, rep.stack_frame_bytes) == (125, 32768, 8)
    assert (rep.spill_store_bytes, rep.spill_load_bytes) == (4, 12)


def test_parse_ptxas_rejects_garbage():
    from roofline.ladder.build import BuildError
    with pytest.raises(BuildError):
        parse_ptxas("ptxas info    : Compiling entry function 'k' for 'sm_90a'\nnothing else\n")
