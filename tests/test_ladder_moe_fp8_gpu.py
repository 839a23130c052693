"""GPU: the grouped and fp8 levels that passed on the H200 pass their checks (edge routings with
0 / 1-row experts, every row on one expert, tails, K = 1, NaN/Inf), and the re-run measures a
grouped head beside torch._grouped_mm. Skipped without CuPy and a GPU. On the device:
    python3 -m pytest -q -m gpu tests/test_ladder_moe_fp8_gpu.py
"""
import pytest

from roofline.ladder import check, gpu
from roofline.ladder.registry import VARIANTS, get_level
from roofline.ladder.routing import edge_routings

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not gpu.gpu_available(), reason="needs CuPy and an NVIDIA GPU")]


@pytest.mark.parametrize("target", [get_level(11), get_level(12), VARIANTS["l12_m128n128"], VARIANTS["l11_fp8"],
                                    VARIANTS["l11_fp8_tn32"], VARIANTS["l12_pingpong"], VARIANTS["l12_pingpong_m128"],
                                    VARIANTS["l12_fp8_pingpong"], get_level(15), VARIANTS["l15_pp_m128"],
                                    VARIANTS["l15_m128n128"]],
                         ids=lambda lv: lv.name)
def test_grouped_level_passes_edge_routings(target):
    for i, (name, counts) in enumerate(edge_routings(big=target.kind == "ws")):
        for n, k in ((256, 128), (131, 1), (200, 77)):
            r = check.check_grouped(target, counts, n, k, seed=i, specials=(i == 2), case=name)
            assert r.ok, (name, n, k, r.reason)


@pytest.mark.parametrize("level_id", [13, 14, "l13_pingpong"])
def test_fp8_level_passes(level_id):
    res = check.check_fp8_level(get_level(level_id), n_random=6, seed=1)
    assert all(r.ok for r in res), [(r.case, r.reason) for r in res if not r.ok][:5]
    assert any(r.specials for r in res)


def test_rerun_measures_a_grouped_head_beside_torch():
    from roofline.core.opclasses import Problem
    from roofline.stagec.timing import measure_grouped

    m = measure_grouped([Problem("grouped", 512, 1536, 2048, "bf16", 1.0, E=128)], level_id="l12_pingpong")
    assert m["check_ok"] and m["ladder_t_ms"] > 0 and m["cublas_t_ms"] > 0
    assert m["ladder_level"] == 12 and m["ladder_build"] == "l12_pingpong"   # the grouped decode default
    assert m["library"] == "torch._grouped_mm" and m["problems"][0]["experts_hit_drawn"] <= 128


def test_rerun_measures_an_fp8_prefill_head_beside_torch_scaled_grouped_mm():
    """An fp8 MoE prefill head (4096 tokens, E 128, top-8) runs what the grouped-fp8 table names for
    the prefill class (level 15's ping-pong build) beside torch._scaled_grouped_mm."""
    from roofline.ladder import dispatch
    from roofline.core.opclasses import Problem
    from roofline.stagec.timing import measure_grouped

    lvl, why = dispatch.choose_grouped_level(dispatch.default_dispatch_table("grouped-fp8"), 32768, 128, 1536, 2048,
                                             "fp8", E=128)
    assert lvl == "l15_pp_m128", why
    m = measure_grouped([Problem("grouped", 32768, 1536, 2048, "fp8", 1.0, E=128)], level_id=lvl, contract="grouped-fp8")
    assert m["check_ok"] and m["ladder_t_ms"] > 0 and m["cublas_t_ms"] > 0
    assert m["ladder_level"] == 15 and m["ladder_build"] == "l15_pp_m128"
    assert m["library"] == "torch._scaled_grouped_mm"
