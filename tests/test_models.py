"""Every op-class model against counts worked out by hand."""
import pytest

from roofline.core import opclasses
from roofline.core.models import wider
from roofline.core.models.attention import decode_counts, prefill_counts
from roofline.core.models.gemm import gemm_counts
from roofline.core.models.moe import expert_weight_elems, experts_hit

BF16 = {"act": "bf16", "weight": "bf16", "out": "bf16", "kv": "bf16", "act_bytes": 2, "weight_bytes": 2,
        "out_bytes": 2, "kv_bytes": 2}


def test_gemm_counts_A_B_C_once():
    flops, nbytes = gemm_counts(64, 4096, 4096, 2, 2, 2)
    assert flops == 2 * 64 * 4096 * 4096
    assert nbytes == 64 * 4096 * 2 + 4096 * 4096 * 2 + 64 * 4096 * 2
    # fp8 weights halve only the weight term
    _, b8 = gemm_counts(64, 4096, 4096, 2, 1, 2)
    assert nbytes - b8 == 4096 * 4096


def test_gemm_model_compute_dtype_is_the_wider_operand():
    r = opclasses.get("gemm").model({"M": 8, "N": 8, "K": 8}, dict(BF16, weight="fp8", weight_bytes=1))
    assert r.compute_dtype == "bf16" and wider("fp8", "fp8") == "fp8"


def test_experts_hit_limits():
    assert experts_hit(8, 1) == pytest.approx(1.0)
    assert experts_hit(256, 10_000) == pytest.approx(256, abs=1e-6)
    assert experts_hit(256, 512) < 256


def test_moe_stage_weights_and_flops():
    assert expert_weight_elems(2048, 512, 1) == 2 * 512 * 2048
    assert expert_weight_elems(2048, 512, 2) == 2048 * 512
    assert expert_weight_elems(2048, 512, None) == 3 * 2048 * 512
    dt = dict(BF16, act="fp8", weight="fp8", act_bytes=1, weight_bytes=1)
    r = opclasses.get("moe").model({"M": 4, "E": 16, "top_k": 2, "hidden": 64, "inter": 32, "stage": 2}, dt)
    c = {x.label: x for x in r.candidates}
    assert c["all_experts"].bytes_est - c["experts_hit"].bytes_est == pytest.approx(
        (16 - experts_hit(16, 8)) * 64 * 32)
    assert c["experts_hit"].flops_est == 2 * 8 * 64 * 32


def test_decode_attention_counts():
    flops, nbytes = decode_counts(64, 1536, 16, 2, 256, 2)
    assert nbytes == 64 * 1536 * 2 * 256 * 2 * 2
    assert flops == 2 * 64 * 16 * 1536 * 256 * 2


def test_prefill_attention_flash_counts():
    flops, nbytes = prefill_counts(1, 1024, 32, 8, 128, 2, 2, causal=True)
    assert flops == 4 * 32 * 1024 * 1024 * 128 * 0.5
    assert nbytes == 1024 * 128 * ((32 + 16) * 2 + 32 * 2)


@pytest.mark.parametrize("cls", ["elementwise", "norm", "quant"])
def test_streaming_models(cls):
    r = opclasses.get(cls).model({"shape": [64, 4096]}, dict(BF16, out="fp8", out_bytes=1))
    assert r.candidates[0].bytes_est == 64 * 4096 * 2 + 64 * 4096 * 1
    r2 = opclasses.get(cls).model({"elems_in": 10, "elems_out": 5}, BF16)
    assert r2.candidates[0].bytes_est == 10 * 2 + 5 * 2
