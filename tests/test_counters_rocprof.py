"""rocprofv3 counter-collection CSV reader. The fixtures are NOT real runs: see
fixtures/rocprof/README.md (the documentation's own sample, and a file synthesized in its format).
"""
from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from roofline.counters import load, match

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "rocprof"
SYNTH = FIX / "gemm_synthesized.csv"
SAMPLE = FIX / "counter_collection_sample.csv"
BF16 = "Cijk_Alik_Bljk_BBS_BH_MT256x256x64_MI16x16x16x1_SN_K1_MIWT4_4"
FP8 = "Cijk_Alik_Bljk_F8BS_BH_MT256x256x128_MI16x16x32x1_SN_K1_MIWT4_4"
FILL = "__amd_rocclr_fillBufferAligned"
TWO_MNK = 2 * 4096**3


def by_name(recs):
    return {k.name: k for k in recs}


def test_kib_to_bytes_and_per_dispatch_average():
    g = by_name(load(SYNTH))[BF16]
    assert g.source == "rocprofv3-csv" and g.launches == 2
    fetch_kib = (98304.0 + 100270.08) / 2
    assert g.dram_read_bytes == pytest.approx(fetch_kib * 1024, rel=1e-12)
    assert g.dram_write_bytes == 32768.0 * 1024 == 4096 * 4096 * 2     # the bf16 output, in bytes
    assert g.dram_bytes == pytest.approx(g.dram_read_bytes + g.dram_write_bytes, rel=1e-12)
    assert g.extra["FETCH_SIZE_KiB"] == pytest.approx(fetch_kib)
    assert g.t_ms == pytest.approx((190000 + 194000) / 2 / 1e6)         # End - Start, ns
    assert not g.unstable                                               # 2% apart, band 20%


def test_mfma_flops_per_dtype_and_no_double_count():
    g = by_name(load(SYNTH))[BF16]
    assert g.tensor_flops_by_dtype == {"bf16": float(TWO_MNK)}
    assert g.flops_issued == TWO_MNK                # MfmaFlops (the total) is not added again
    assert g.extra["MfmaFlops"] == TWO_MNK
    for c in ("MemUnitStalled", "MfmaUtil", "OccupancyPercent"):
        assert c in g.extra


def test_fp8_from_mops_times_instruction_factor():
    f = by_name(load(SYNTH))[FP8]
    assert f.tensor_flops_by_dtype == {"fp8": float(TWO_MNK)}          # 268435456 MOPS x 512
    assert f.extra["mops_f8_flops_per_unit"] == 512
    f2 = by_name(load(SYNTH, mops_f8_factor=256))[FP8]
    assert f2.tensor_flops_by_dtype["fp8"] == TWO_MNK / 2


def test_documented_sample():
    recs = load(SAMPLE)
    assert [k.name.split("(")[0].split()[-1] for k in recs] == [
        "addition_kernel<float>", "subtract_kernel", "multiply_kernel", "divide_kernel"]
    add = recs[0]
    assert add.extra == {"SQ_WAVES": 16384.0}
    assert add.t_ms == pytest.approx((3200098838483232 - 3200098838431081) / 1e6)
    assert add.dram_bytes is None and add.tensor_flops_by_dtype == {}  # not measured: None, not 0


def test_columns_found_by_name_not_position(tmp_path):
    rows = list(csv.reader(io.StringIO(SYNTH.read_text())))
    order = list(reversed(range(len(rows[0]))))
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_MINIMAL).writerows([[r[i] for i in order] for r in rows])
    p = tmp_path / "shuffled.csv"
    p.write_text(out.getvalue())
    a, b = by_name(load(SYNTH)), by_name(load(p))
    assert a.keys() == b.keys()
    for n in a:
        assert a[n] == b[n]


def test_unmatched_dispatch_is_reported():
    recs = load(SYNTH)
    entries = [{"name": BF16}, {"name": FP8 + "(void*, int)"}]
    got, unmatched = match(entries, recs)
    assert got[BF16].name == BF16
    assert got[FP8 + "(void*, int)"].name == FP8      # canonical: the argument list dropped
    assert unmatched == [FILL]
