import pytest

from roofline.io.errors import PeaksError
from roofline.peaks import load_tables, resolve

REQUIRED = {"NVIDIA H100 SXM", "NVIDIA H200", "NVIDIA B200", "NVIDIA A100 SXM", "AMD Instinct MI300X",
            "AMD Instinct MI325X", "AMD Instinct MI355X"}


def test_every_required_device_has_a_table_with_sources():
    tables = {d["device"]: d for _, d in load_tables()}
    assert REQUIRED <= set(tables)
    for name, d in tables.items():
        assert d["hbm_bw_bytes_s"]["datasheet"]["source"], name
        for dtype, fig in d["flops"].items():
            for kind, blk in fig.items():
                assert blk["value"] > 0 and blk["source"], (name, dtype, kind)


def test_h200_uses_pin_rate_and_measured_compute():
    p = resolve("NVIDIA H200", "sm_90")
    assert p.hbm_bw_bytes_s == 4.8e12 and p.hbm_bw_kind == "datasheet"
    # measured on the device by `roofline peaks measure`: the envelope (highest median) of the runs
    # the table records (tests/test_peaks_envelope.py recomputes it from the raw samples)
    env = {d: max(sh["median"] for r in p.raw["flops"][d]["measured"]["runs"] for sh in r["shapes"].values())
           for d in ("bf16", "fp16")}
    assert p.flops["bf16"] == env["bf16"] and p.flops_kind["bf16"] == "measured"
    assert p.raw["flops"]["bf16"]["measured"]["source"].startswith("microbench")
    within = abs(env["bf16"] - env["fp16"]) / max(env.values()) <= 0.05
    assert p.compute_unusable_dtypes == ([] if within else ["bf16", "fp16"])
    assert p.compute_confidence("bf16") == ("high" if within else "low")


def test_resolution_by_gpu_name_then_gfx():
    assert resolve("NVIDIA H100 80GB HBM3", "sm_90").device == "NVIDIA H100 SXM"
    assert resolve(None, "gfx950").device == "AMD Instinct MI355X"
    assert resolve("AMD Instinct MI325X", "gfx942").hbm_bw_bytes_s == 6.0e12
    amb = resolve(None, "gfx942")
    assert amb.confidence == "low" and "shared by" in amb.notes[0]


def test_datasheet_compute_is_medium_confidence():
    p = resolve("NVIDIA B200")
    assert p.compute_confidence("bf16") == "medium"
    assert resolve(None, "gfx950").compute_confidence("fp8") == "high"   # validated fp8


def test_unknown_device_is_l1_or_an_error():
    p = resolve("Mystery", "gfx1100", device_props={"memory_clock_hz": 1.0e9, "memory_bus_width_bits": 4096})
    assert p.source == "derived" and p.confidence == "low" and p.hbm_bw_bytes_s == pytest.approx(1.024e12)
    with pytest.raises(PeaksError, match="no peak table for device Mystery"):
        resolve("Mystery", "gfx1100")
