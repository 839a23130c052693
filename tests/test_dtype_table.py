"""One dtype table (roofline/peaks: DTYPE_ALIASES -> DTYPE_BYTES): integer and bool tensors are
bytes too, every dtype name `roofline topn` can write has a size, and an integer-keyed sort head
(radixSortKVInPlace, the kernel of aten::sort on int64 routing ids in an MoE step) gets bytes."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from roofline.core.opclasses.aten import DTYPES as ATEN_DTYPES
from roofline.peaks import DTYPE_BYTES, norm_dtype

ROOT = Path(__file__).resolve().parent.parent
RADIX = ("void at::native::radixSortKVInPlace<-2, -1, 32, 4, long, long, unsigned int>"
         "(at::cuda::detail::TensorInfo<long, unsigned int>, unsigned int, unsigned int, unsigned int, "
         "at::cuda::detail::TensorInfo<long, unsigned int>, unsigned int, bool)")


# numpy's itemsize is the independent count of each size
@pytest.mark.parametrize("spelling, np_name", [
    ("int64", "int64"), ("torch.int64", "int64"), ("long", "int64"), ("int32", "int32"), ("torch.int", "int32"),
    ("int16", "int16"), ("int8", "int8"), ("uint8", "uint8"), ("torch.uint8", "uint8"), ("bool", "bool"),
    ("uint16", "uint16"), ("uint32", "uint32"), ("uint64", "uint64"),
    ("float32", "float32"), ("torch.float32", "float32"), ("float64", "float64"), ("float16", "float16"),
])
def test_sizes_agree_with_numpy(spelling, np_name):
    assert DTYPE_BYTES[norm_dtype(spelling)] == np.dtype(np_name).itemsize


@pytest.mark.parametrize("spelling", ["float8_e4m3fn", "torch.float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
                                      "float8_e8m0fnu", "e4m3", "fp8_e5m2"])
def test_every_fp8_variant_is_one_byte(spelling):
    assert DTYPE_BYTES[norm_dtype(spelling)] == 1


def test_fp4_is_half_a_byte_and_the_packed_pair_one():
    assert DTYPE_BYTES[norm_dtype("nvfp4")] == 0.5 and DTYPE_BYTES[norm_dtype("torch.float4_e2m1fn_x2")] == 1


def test_every_dtype_topn_writes_has_a_size():
    missing = sorted({v for v in ATEN_DTYPES.values() if norm_dtype(v) not in DTYPE_BYTES})
    assert not missing, missing


def test_one_size_table_in_the_package():
    # no second {dtype: bytes} literal anywhere in the analysis package
    import re

    rx = re.compile(r"[\"']bf16[\"']\s*:\s*2\b")
    hits = [str(p.relative_to(ROOT)) for p in list((ROOT / "roofline").rglob("*.py")) + list((ROOT / "peaks").glob("*.py"))
            if rx.search(p.read_text())]
    assert hits == ["peaks/__init__.py"], hits


def test_an_int64_sort_head_gets_bytes_not_a_dtype_error(tmp_path):
    from click.testing import CliRunner

    from roofline.cli import main

    n_keys = 64 * 8 * 128          # decode batch 64, top-8 routing ids sorted over 128 experts' slots
    t_ms = 0.0114
    topn = {"schema_version": 1, "serving": {"n_decode_steps": 8, "n_prefill_steps": 0}, "entries": [{
        "name": RADIX, "pct_gpu_time": 40.0, "classification": "aten::sort",
        "regimes": {"decode": {"base_latency_ms": t_ms, "launches_per_step": 48}},
        "dtypes": {"act": "int64", "out": "int64"}, "shapes": [{"elems_in": n_keys}]}]}
    d = tmp_path / "run"
    d.mkdir()
    (d / "profile_topN.json").write_text(json.dumps(topn))
    shutil.copy(ROOT / "fixtures" / "traces_real" / "env_decode.json", d / "env_report.json")
    r = CliRunner().invoke(main, ["analyze", str(d / "profile_topN.json"), "--format", "json", "--no-write"])
    assert r.exit_code == 0, r.output
    art = json.loads(r.stdout)
    (e,) = art["entries"]
    assert not art["degraded"], art["degraded"]
    assert e["modeled"] and e["dtypes"]["act"] == "int64" and e["dtypes"]["out"] == "int64"
    # keys read once and written once, 8 bytes each (numpy's int64 itemsize)
    want = 2 * n_keys * np.dtype("int64").itemsize
    assert e["bytes_est"] == want
    assert e["achieved_bw_bytes_s"] == pytest.approx(want / (t_ms / 1e3))


def test_an_unset_out_dtype_of_an_integer_op_is_its_own(tmp_path):
    from roofline.core.inputs import Entry, Env, Regime
    from roofline.core.procedure import resolve_dtypes

    env = Env(path=None, gfx="sm_90", model_dtype="bf16", model_arch_class="dense", workload={})
    for act, out in (("uint8", "uint8"), ("bool", "bool"), ("int32", "int32"), ("fp8", "bf16")):
        e = Entry(0, "k", 10.0, {"decode": Regime(0.01, 1)}, dtypes={"act": act})
        dt = resolve_dtypes(e, env)
        assert (dt["out"], dt["out_bytes"]) == (out, DTYPE_BYTES[out])
