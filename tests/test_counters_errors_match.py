"""Bad counter files are rejected with one typed, one-line error; matching never drops a row."""
from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from roofline.counters import CounterReadError, KernelCounters, load, match
from roofline.counters.match import canonical_name

FIX = Path(__file__).resolve().parent.parent / "fixtures"


def _bad_files(tmp: Path):
    rep = gzip.decompress((FIX / "ncu" / "known.ncu-rep.gz").read_bytes())
    cases = {
        "missing.csv": None,
        "empty.csv": b"",
        "blank.csv": b"  \n\n",
        "garbage.ncu-rep": bytes(range(256)) * 20,
        "truncated.ncu-rep": rep[:300_000],
        "other.csv": b"hello,world\n1,2\n",
        "header_only.csv": b'"ID","Kernel Name","gpu__time_duration.sum"\n"","","ns"\n',
        "bad_unit.csv": b'"ID","Kernel Name","gpu__time_duration.sum"\n"","","parsec"\n"0","k","5"\n',
        "short_row.csv": b'"ID","Kernel Name","gpu__time_duration.sum"\n"","","ns"\n"0","k"\n',
        "rocprof_header_only.csv": b'"Dispatch_Id","Kernel_Name","Counter_Name","Counter_Value"\n',
        "corrupt.csv.gz": b"\x1f\x8b\x08\x00garbage",
    }
    out = {}
    for name, data in cases.items():
        p = tmp / name
        if data is not None:
            p.write_bytes(data)
        out[name] = p
    out["a_directory"] = tmp
    return out


def test_bad_files_raise_one_line_typed_error(tmp_path):
    for name, p in _bad_files(tmp_path).items():
        with pytest.raises(CounterReadError) as ei:
            load(p)
        e = ei.value
        assert isinstance(e, ValueError)
        msg = str(e)
        assert "\n" not in msg, name
        assert msg.startswith(str(p) + ": "), msg
        assert len(msg) > len(str(p)) + 5


def test_a_rocprof_value_that_is_no_number_is_a_bad_reading_of_its_record(tmp_path):
    # one row is one reading: a Counter_Value that is no number makes that kernel's record L4 where
    # the analysis would read it (docs/input_policy.md, Counters), never the whole file unreadable
    from roofline.core.plausible import bad_readings

    p = tmp_path / "r.csv"
    p.write_bytes(b'"Dispatch_Id","Kernel_Name","Counter_Name","Counter_Value"\n1,"k","FETCH_SIZE",lots\n'
                  b'1,"k","WRITE_SIZE",4\n2,"j","FETCH_SIZE",8\n2,"j","WRITE_SIZE",4\n')
    k, j = load(p)
    assert k.dram_write_bytes == 4 * 1024 and k.dram_read_bytes != k.dram_read_bytes   # NaN
    cell = " (the file's cells: row 2, Counter_Value (FETCH_SIZE): 'lots')"   # issue 34 item 5: row and cell named
    assert bad_readings(k) == [f"dram_bytes is nan: not a count or a time{cell}",
                               f"dram_read_bytes is nan: not a count or a time{cell}"]
    assert j.dram_bytes == 12 * 1024 and bad_readings(j) == []


def test_match_exact_canonical_then_unique_short_name():
    recs = [KernelCounters(name=n, launches=1, source="ncu-csv") for n in (
        "nvjet_sm90_tst_64x64_64x13_2x1_v_bz_NNT",
        "void at::vectorized_elementwise_kernel<8, at::CUDAFunctor_add<c10::BFloat16>, std::array<char *, 3>>",
        "void at::vectorized_elementwise_kernel<4, at::BinaryFunctor<float, float, float, at::binary_internal::MulFunctor<float>>, std::array<char *, 3>>",
        "void cudnn::lean_reduction_kernel<0, 0, 0>(void *, float *)",
        "my_unrelated_kernel",
    )]
    entries = [
        {"name": "nvjet_sm90_tst_64x64_64x13_2x1_v_bz_NNT"},                               # exact
        {"name": "void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>,"
                 " std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)"},
        {"name": "lean_reduction_kernel"},   # short, unique, one side names no template arguments
        {"name": "vectorized_elementwise_kernel<2, FooFunctor>"},      # short name ambiguous: no match
        {"name": "kernel_that_did_not_run"},
        # a bf16 multiply: same short name as the fp32 one of the report, another instantiation: no match
        {"name": "void at::native::vectorized_elementwise_kernel<8, at::native::BinaryFunctor<c10::BFloat16, "
                 "c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 3ul> >"},
    ]
    got, unmatched = match(entries, recs)
    assert got[entries[0]["name"]] is recs[0]
    assert got[entries[1]["name"]] is recs[1]
    assert got[entries[2]["name"]] is recs[3]
    assert entries[3]["name"] not in got and entries[4]["name"] not in got and entries[5]["name"] not in got
    # every record is either matched or reported: nothing silently dropped
    assert unmatched == [recs[2].name, recs[4].name]
    assert {id(k) for k in got.values()} | {id(k) for k in recs if k.name in unmatched} == {id(k) for k in recs}


def test_match_tolerates_entries_without_names():
    recs = [KernelCounters(name="k", launches=1, source="ncu-csv")]
    got, unmatched = match([{}, {"name": None}, {"name": "k"}], recs)
    assert list(got) == ["k"] and unmatched == []




def test_a_folded_split_k_reduce_joins_its_gemm_per_gemm_launch():
    # one GEMM entry of 4 launches folds 2 reduce launches (the other 2 GEMM launches were not split):
    # per GEMM launch the logical op adds half a reduce
    gemm = KernelCounters(name="nvjet_splitK_TNN", launches=4, source="ncu-csv", t_ms=0.030, dram_bytes=1.0e8,
                          tensor_flops_by_dtype={"bf16": 8.0e9})
    red = KernelCounters(name="void cublasLt::splitKreduce_kernel<32, 16>(float*)", launches=2, source="ncu-csv",
                         t_ms=0.004, dram_bytes=3.0e6, tensor_flops_by_dtype={"bf16": 0.0})
    entry = {"name": "nvjet_splitK_TNN", "launches": 4,
             "folded_kernels": [{"name": "void cublasLt::splitKreduce_kernel<(int)32, (int)16>(T1 *)", "launches": 2}]}
    got, unmatched = match([entry], [gemm, red])
    kc = got["nvjet_splitK_TNN"]
    assert unmatched == []
    assert kc.dram_bytes == 1.0e8 + 3.0e6 * 2 / 4 and kc.t_ms == 0.030 + 0.004 * 2 / 4
    assert kc.tensor_flops_by_dtype == {"bf16": 8.0e9}
    # folded into two entries: not shared out, reported
    two = [entry, dict(entry, name="nvjet_other_splitK")]
    got, unmatched = match(two, [gemm, red, KernelCounters(name="nvjet_other_splitK", launches=1, source="x")])
    assert unmatched == [red.name] and got["nvjet_splitK_TNN"] is gemm
