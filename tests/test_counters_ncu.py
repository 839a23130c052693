"""Stage-C Nsight Compute readers, checked against kernels whose work is known.

Fixtures: fixtures/ncu/ (made on the H200 by tools/device/make_ncu_fixtures.py; see its README).
known.json names each op's shapes, useful FLOPs, fewest bytes and the kernel names the PyTorch
profiler saw for it; those names are matched to the ncu records with `match`, as the Top-N
entries will be.
"""
from __future__ import annotations

import dataclasses
import gzip
import json
import shutil
from pathlib import Path

import pytest

from roofline.counters import KernelCounters, canonical_name, load, match

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "ncu"
REP_GZ = FIX / "known.ncu-rep.gz"
CSV_BASE = FIX / "known_raw.csv"          # --print-units base
CSV_AUTO = FIX / "known_raw_autounits.csv"  # default units (Mbyte, us, Ghz), thousands separators
KNOWN = json.loads((FIX / "known.json").read_text())
OPS = {o["key"]: o for o in KNOWN["ops"]}


def _cdiv_up(x, t):
    return -(-x // t) * t


@pytest.fixture(scope="module")
def rep_path(tmp_path_factory):
    p = tmp_path_factory.mktemp("ncu") / "known.ncu-rep"
    with gzip.open(REP_GZ, "rb") as src, open(p, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return p


@pytest.fixture(scope="module")
def rep(rep_path):
    return load(rep_path)


@pytest.fixture(scope="module")
def csv_base():
    return load(CSV_BASE)


@pytest.fixture(scope="module", params=["rep", "csv"])
def records(request, rep, csv_base):
    return rep if request.param == "rep" else csv_base


def op_kernels(records, key) -> list[KernelCounters]:
    """The records of one op's kernels, found by the profiler's names through `match`."""
    names = list(dict.fromkeys(OPS[key]["kernels"]))
    got, _ = match([{"name": n} for n in names], records)
    assert set(got) == set(names), f"{key}: unmatched {set(names) - set(got)}"
    return [got[n] for n in names]


def op_sum(kcs, attr):
    vals = [getattr(k, attr) for k in kcs]
    assert all(v is not None for v in vals)
    return sum(vals)


# ----------------------------------------------------------------------------- FLOPs
GEMM_PADDING = {
    # key: (dtype, tile along M, along N, along K) of the cuBLAS kernel that ran, or None = exact
    "gemm_bf16_4096x4096x4096": ("bf16", None),    # nvjet 256x128 tiles divide 4096: exact
    "gemm_bf16_64x8192x8192": ("bf16", None),      # nvjet 64x64 tiles: exact
    # nvjet_sm90_tst_192x128_64x5: cuBLAS is column-major, its m is torch's N. 1000 -> 1024
    # (128-row tiles), 3000 -> 3072 (192-wide tiles), K 2000 -> 2048 (64-deep k-steps): +7.4%
    "gemm_bf16_1000x3000x2000": ("bf16", (128, 192, 64)),
    "gemm_fp8_4096x4096x4096": ("fp8", None),
}


@pytest.mark.parametrize("key", sorted(GEMM_PADDING))
def test_gemm_tensor_flops_are_2mnk_within_tile_padding(records, key):
    dtype, tiles = GEMM_PADDING[key]
    k = OPS[key]["known"]
    M, N, K = k["M"], k["N"], k["K"]
    (kc,) = op_kernels(records, key)
    issued = kc.tensor_flops_by_dtype[dtype]
    useful = 2 * M * N * K
    assert useful == k["useful_flops"]
    if tiles is None:
        assert issued == useful
    else:
        tm, tn, tk = tiles
        assert issued == 2 * _cdiv_up(M, tm) * _cdiv_up(N, tn) * _cdiv_up(K, tk)
        assert 1.0 < issued / useful < 1.08
    # no other tensor dtype fired
    assert all(v == 0 for d, v in kc.tensor_flops_by_dtype.items() if d != dtype)
    assert kc.flops_issued >= issued


def test_decode_attention_issues_4x_its_useful_flops(records):
    kcs = op_kernels(records, "sdpa_decode_b8_hq32_hkv8_s2048_d128")
    k = OPS["sdpa_decode_b8_hq32_hkv8_s2048_d128"]["known"]
    issued = sum(kc.tensor_flops_by_dtype.get("bf16", 0.0) for kc in kcs)
    # cuDNN packs the hq/hkv = 4 query heads sharing a KV head into the rows of a 16-row MMA
    # tile: 16/4 = 4x the useful 2*2*b*hq*s*d (H200.md saw the same 4x at b=64)
    group = k["n_q_heads"] // k["n_kv_heads"]
    assert issued == k["useful_flops"] * (16 // group) == 4 * k["useful_flops"]


def test_elementwise_cuda_core_flops(records):
    (mul,) = op_kernels(records, "mul_fp32_16Mi")
    n = OPS["mul_fp32_16Mi"]["known"]["elems"]
    assert mul.cuda_core_flops == n                      # one FMUL per element
    assert mul.extra["cuda_core_flops_single"] == n
    (add,) = op_kernels(records, "add_bf16_64Mi")
    n = OPS["add_bf16_64Mi"]["known"]["elems"]
    # PyTorch computes a + alpha*b in fp32: one FFMA (= 2 FLOPs) per element for 1 useful add
    assert add.cuda_core_flops == 2 * n
    for kc in (mul, add):
        assert all(v == 0 for v in kc.tensor_flops_by_dtype.values())


# ----------------------------------------------------------------------------- bytes
def _io_bytes(k):
    if k["kind"] == "gemm":
        a = 1 if k["dtype"].startswith("fp8") else 2
        return (k["M"] * k["K"] + k["K"] * k["N"]) * a, k["M"] * k["N"] * 2
    if k["kind"] == "elementwise":
        e = 2 if k["dtype"] == "bf16" else 4
        return 2 * k["elems"] * e, k["elems"] * e
    if k["kind"] == "attention_decode":
        q = k["batch"] * k["n_q_heads"] * k["head_dim"] * 2
        kv = 2 * k["batch"] * k["n_kv_heads"] * k["seq_len"] * k["head_dim"] * 2
        return kv + q, q
    raise AssertionError(k)


# Bands (H200, cold caches: ncu's --cache-control all flushes L2 before each pass)
READ_BAND = (0.99, 2.5)    # DRAM reads / fewest input bytes: >= inputs; up to 2.2x (4096^3 bf16 re-reads A/B)
TOTAL_BAND = (0.70, 2.0)   # DRAM read+write / fewest bytes: can sit BELOW 1 because
                           # dram__bytes_write undercounts outputs still in L2 at kernel end
                           # (the 1000x3000x2000 GEMM wrote 0.09 MB of its 6 MB output: 0.73x)
# Writes are not banded against the output: the M=64 decode GEMM wrote 2.3x its 1 MB output
# and the split-KV SDPA 36x its 64 KB output (fp32 partials its reduction kernel reads back),
# while the 1000x3000x2000 GEMM wrote 1.5% of its output (the rest still in L2 at kernel end).


@pytest.mark.parametrize("key", sorted(OPS))
def test_dram_bytes_within_band_of_fewest_bytes(records, key):
    k = OPS[key]["known"]
    kcs = op_kernels(records, key)
    inp, out = _io_bytes(k)
    assert inp + out == k["fewest_bytes"]
    rd, wr, tot = (op_sum(kcs, a) for a in ("dram_read_bytes", "dram_write_bytes", "dram_bytes"))
    assert tot == rd + wr
    assert READ_BAND[0] <= rd / inp <= READ_BAND[1], rd / inp
    assert TOTAL_BAND[0] <= tot / k["fewest_bytes"] <= TOTAL_BAND[1], tot / k["fewest_bytes"]


def test_dram_write_undercount_of_an_output_left_in_l2(records):
    (g,) = op_kernels(records, "gemm_bf16_1000x3000x2000")
    out = 1000 * 3000 * 2
    assert g.dram_write_bytes < 0.05 * out            # H200.md: dram__bytes_write undercounts
    assert g.dram_bytes < OPS["gemm_bf16_1000x3000x2000"]["known"]["fewest_bytes"]


def test_hierarchy_bytes_present(records):
    for kc in records:
        assert kc.l2_bytes is not None and kc.l1_bytes is not None
    (g,) = op_kernels(records, "gemm_bf16_4096x4096x4096")
    assert g.l2_bytes > g.dram_bytes          # L2 traffic exceeds HBM traffic on a reused GEMM


# ----------------------------------------------------------------------------- peaks, launches
def test_peaks_and_device_from_report(records):
    for kc in records:
        assert kc.device_name == "NVIDIA H200"
        # dram__bytes.sum.peak_sustained 1504 B/cycle x ~3.2e9 cycles/s ~ 4.8 TB/s (pin rate)
        assert 4.7e12 < kc.report_peak_hbm_bw_bytes_s < 4.85e12
        assert kc.report_sm_clock_hz == 1.98e9          # device__attribute_max_gpu_frequency_khz
        assert kc.extra["peak_tensor_ops_per_cycle_dense.bf16"] == 540672   # 132 SMs x 4096
        assert kc.extra["peak_tensor_ops_per_cycle_dense.fp8"] == 1081344
        assert 0.5e9 < kc.extra["sm_clock_hz_measured"] <= 1.99e9


def test_per_launch_average_over_two_launches(records):
    (g,) = op_kernels(records, "gemm_bf16_4096x4096x4096")
    assert g.launches == 2 and not g.unstable
    assert g.t_ms == pytest.approx((177888 + 177376) / 2 / 1e6, rel=1e-12)
    assert g.extra["launch_spread.t_ms"] < 0.01
    assert g.extra["launch_spread.flops_issued"] == 0.0
    assert sum(kc.launches for kc in records) == 10      # 10 launches in the report, 8 names


def _csv_rows(path):
    lines = path.read_text().splitlines()
    return lines[:2], lines[2:]


def test_unstable_when_launches_of_one_name_disagree(tmp_path):
    head, rows = _csv_rows(CSV_BASE)
    # launch 0 of the 4096^3 GEMM again, with its duration doubled (as if another shape)
    row = rows[0].replace('"177,888"', '"355,776"')
    assert row != rows[0]
    p = tmp_path / "unstable.csv"
    p.write_text("\n".join(head + rows + [row]) + "\n")
    (g,) = [k for k in load(p) if k.name.startswith("nvjet_sm90_tst_256x128")]
    assert g.launches == 3 and g.unstable
    assert g.extra["launch_spread.t_ms"] > 0.2


# ----------------------------------------------------------------------------- path equality
_EXACT = ("launches", "t_ms", "dram_bytes", "dram_read_bytes", "dram_write_bytes", "cuda_core_flops",
          "l2_bytes", "l1_bytes", "report_sm_clock_hz", "device_name", "unstable")


def assert_same_counters(a: KernelCounters, b: KernelCounters, rel_rate=1e-9, abs_pct=0.01, rel_counter=0.0):
    assert canonical_name(a.name) == canonical_name(b.name)
    for f in _EXACT:
        va, vb = getattr(a, f), getattr(b, f)
        if rel_counter and isinstance(va, float):
            assert vb == pytest.approx(va, rel=rel_counter), f
        else:
            assert va == vb, (a.name, f, va, vb)
    assert a.tensor_flops_by_dtype.keys() == b.tensor_flops_by_dtype.keys()
    for d in a.tensor_flops_by_dtype:
        assert b.tensor_flops_by_dtype[d] == pytest.approx(a.tensor_flops_by_dtype[d], rel=rel_counter, abs=0)
    assert b.report_peak_hbm_bw_bytes_s == pytest.approx(a.report_peak_hbm_bw_bytes_s, rel=max(rel_rate, rel_counter))
    assert a.extra.keys() == b.extra.keys()
    for key, va in a.extra.items():
        vb = b.extra[key]
        if key.endswith("_pct"):
            assert vb == pytest.approx(va, abs=abs_pct), key       # CSV prints 2 decimals
        elif key.endswith("_hz") or key.endswith("_hz_measured") or key.startswith("launch_spread"):
            assert vb == pytest.approx(va, rel=max(rel_rate, rel_counter), abs=1e-12), key
        else:
            assert vb == pytest.approx(va, rel=rel_counter, abs=0), key


def test_ncu_rep_and_csv_give_identical_counters(rep, csv_base):
    assert [k.source for k in rep] == ["ncu-rep"] * 8
    assert [k.source for k in csv_base] == ["ncu-csv"] * 8
    assert len(rep) == len(csv_base)
    for a, b in zip(rep, csv_base):
        # every counter identical; rates/percentages to the CSV's printed precision
        assert_same_counters(a, b)


def test_gzipped_report_loads_the_same(rep):
    gz = load(REP_GZ)
    assert [dataclasses.asdict(k) for k in gz] == [dataclasses.asdict(k) for k in rep]


def test_auto_units_csv_matches_base_units_csv(csv_base):
    auto = load(CSV_AUTO)
    # auto-scaled units (Mbyte, Gbyte, us, Ghz, Kbyte/cycle) keep 6 decimals: 2e-4 relative
    for a, b in zip(csv_base, auto):
        assert a.name == b.name
        assert_same_counters(a, b, rel_counter=2e-4)


def test_csv_with_log_lines_before_the_table(tmp_path, csv_base):
    p = tmp_path / "with_log.csv"
    p.write_text("==PROF== Connected to process 1\n==WARNING== something\n" + CSV_BASE.read_text())
    got = load(p)
    assert [dataclasses.asdict(k) for k in got] == [dataclasses.asdict(k) for k in csv_base]


def test_csv_without_units_row_is_read_as_base_units(tmp_path, csv_base):
    head, rows = _csv_rows(CSV_BASE)
    p = tmp_path / "nounits.csv"
    p.write_text("\n".join(head[:1] + rows) + "\n")
    got = load(p)
    assert [k.t_ms for k in got] == [k.t_ms for k in csv_base]


def test_missing_metrics_are_none_not_zero(tmp_path):
    head, rows = _csv_rows(CSV_BASE)
    import csv
    import io

    table = list(csv.reader(io.StringIO("\n".join(head + rows))))
    keep = [i for i, h in enumerate(table[0]) if not h.startswith(("dram__", "sm__ops_path", "sm__sass"))]
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL).writerows([[r[i] for i in keep] for r in table])
    p = tmp_path / "time_only.csv"
    p.write_text(out.getvalue())
    kc = load(p)[0]
    assert kc.t_ms is not None
    assert kc.dram_bytes is None and kc.dram_read_bytes is None
    assert kc.tensor_flops_by_dtype == {} and kc.cuda_core_flops is None and kc.flops_issued is None
    assert kc.report_peak_hbm_bw_bytes_s is None


def test_canonical_name_joins_the_three_spellings():
    torch_name = ("void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>, "
                  "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)")
    cli_name = "void at::vectorized_elementwise_kernel<8, at::CUDAFunctor_add<c10::BFloat16>, std::array<char *, 3>>"
    rep_name = ("void at::native::vectorized_elementwise_kernel<(int)8, at::native::CUDAFunctor_add<c10::BFloat16>, "
                "std::array<char *, (unsigned long)3>>(int, T2, T3)")
    assert canonical_name(torch_name) == canonical_name(cli_name) == canonical_name(rep_name)
