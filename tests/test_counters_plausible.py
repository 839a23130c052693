"""Stage C's plausibility rules (roofline/core/plausible.py, docs/input_policy.md "Counters"),
each on the H200 peak table's own figures: a record at a limit is believed, one past it is L4."""
import math

import pytest
import yaml

from roofline import peaks as P
from roofline.counters import KernelCounters
from roofline.core.merge import counters_block
from roofline.core.plausible import bad_readings, implausible

H200 = P.resolve(gpu_name="NVIDIA H200")
TABLE = yaml.safe_load((P.peaks_dir() / "h200.yaml").read_text())
L2 = TABLE["l2_bytes"]
PIN = TABLE["hbm_bw_bytes_s"]["datasheet"]["value"]
BF16_DATASHEET = TABLE["flops"]["bf16"]["datasheet"]["value"]
FP8_DATASHEET = TABLE["flops"]["fp8"]["datasheet"]["value"]
# the 64x8192x8192 bf16 GEMM: A, B and C cross HBM once
GEMM_BYTES = (64 * 8192 + 8192 * 8192 + 64 * 8192) * 2


def kc(**kw) -> KernelCounters:
    return KernelCounters(name="k", launches=1, source="ncu-csv", **kw)


def why(k, kind="gemm", source="captured", model=GEMM_BYTES, t_s=40e-6, n=1):
    return implausible(k, H200, kind, source, model, t_s, n)


def test_the_table_figures_the_rules_use():
    assert L2 == 62914560 and H200.hbm_bw_bytes_s == PIN


def test_rule_1_a_reading_is_a_finite_count_and_a_positive_duration():
    assert bad_readings(kc(t_ms=0.04, dram_bytes=1e8)) == []
    assert bad_readings(kc(t_ms=0.04, dram_bytes=math.inf)) == ["dram_bytes is inf: not a count or a time"]
    assert bad_readings(kc(t_ms=0.04, l2_bytes=-5.0)) == ["l2_bytes is -5.0: not a count or a time"]
    assert bad_readings(kc(t_ms=0.0, dram_bytes=1e8)) == ["t_ms is 0: no kernel runs in no time"]
    assert bad_readings(kc(t_ms=0.04, tensor_flops_by_dtype={"bf16": math.nan})) == [
        "tensor FLOPs (bf16) are nan: not a count or a time"]


def test_rule_2_no_faster_than_the_pins():
    t = 40e-6
    assert why(kc(t_ms=t * 1e3, dram_bytes=PIN * t)) == []                 # at the pin rate: believed
    [w] = why(kc(t_ms=t * 1e3, dram_bytes=PIN * t * 1.01))
    assert f"above the memory roof {PIN:.3g} B/s" in w
    # the report's own peak wins over the table's (the DRAM clock it ran at)
    own = PIN * 0.9
    assert why(kc(t_ms=t * 1e3, dram_bytes=own * t * 1.01, report_peak_hbm_bw_bytes_s=own))
    # without its own duration, the Top-N's is used
    assert why(kc(dram_bytes=PIN * t * 1.01), t_s=t)


def test_rule_3_the_tensor_load_summed_over_dtypes():
    t = 100e-6
    ok = kc(t_ms=t * 1e3, dram_bytes=GEMM_BYTES, tensor_flops_by_dtype={"bf16": 0.6 * BF16_DATASHEET * t,
                                                                          "fp8": 0.39 * FP8_DATASHEET * t})
    assert why(ok, t_s=t) == []
    both = kc(t_ms=t * 1e3, dram_bytes=GEMM_BYTES, tensor_flops_by_dtype={"bf16": 0.6 * BF16_DATASHEET * t,
                                                                            "fp8": 0.41 * FP8_DATASHEET * t})
    [w] = why(both, t_s=t)        # each alone below its peak, together past the tensor cores
    assert "need 101% of the tensor peak" in w
    # the peak is the table's highest figure (the dense datasheet one), not the measured envelope
    env = H200.compute_peak("bf16")
    assert env < BF16_DATASHEET and why(kc(t_ms=t * 1e3, dram_bytes=GEMM_BYTES,
                                           tensor_flops_by_dtype={"bf16": 1.05 * env * t}), t_s=t) == []


def test_rule_4_at_least_the_operands_less_an_l2():
    floor = GEMM_BYTES - L2
    assert why(kc(t_ms=0.04, dram_bytes=floor)) == []
    [w] = why(kc(t_ms=0.04, dram_bytes=floor - 1))
    assert f"below the {floor:.3g} the operands need ({GEMM_BYTES:.3g} model bytes - 1 x {L2:.3g} L2 bytes)" in w
    # per logical op: each of n launches may start with an L2 of operands on chip
    assert why(kc(t_ms=0.02, dram_bytes=(GEMM_BYTES - 2 * L2) / 2), n=2) == []
    assert why(kc(t_ms=0.02, dram_bytes=(GEMM_BYTES - 2 * L2) / 2 - 1), n=2)
    # not where the model's bytes are an estimate, nor on estimated shapes, nor without l2_bytes
    tiny = kc(t_ms=0.04, dram_bytes=2.0)
    assert why(tiny, kind="moe") == [] and why(tiny, kind="attn") == [] and why(tiny, source="estimated") == []
    no_l2 = P.from_table({k: v for k, v in TABLE.items() if k != "l2_bytes"}, "t.yaml")
    assert implausible(tiny, no_l2, "gemm", "captured", GEMM_BYTES, 40e-6, 1) == []
    assert why(tiny, kind="elementwise", model=GEMM_BYTES)


def test_the_counters_block_writes_no_non_finite_number():
    b = counters_block(kc(t_ms=0.04, dram_bytes=math.inf, extra={"x": math.nan, "y": 2.0}))
    assert b["dram_bytes"] is None and b["extra"] == {"x": None, "y": 2.0} and b["t_ms"] == 0.04


@pytest.mark.parametrize("kind", ["gemm", "elementwise", "norm", "quant"])
def test_a_real_reading_of_each_compulsory_kind_passes(kind):
    # fixtures/ncu/known_raw.csv: the 64x8192x8192 GEMM read 135,291,136 and wrote 2,459,392 bytes
    assert why(kc(t_ms=0.0362, dram_bytes=135291136 + 2459392), kind=kind) == []
