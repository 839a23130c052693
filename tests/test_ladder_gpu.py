"""GPU: levels pass the check (random shapes, tails, NaN/Inf), and the wrong kernel fails it.
Skipped cleanly without CuPy or a GPU. On the device:
    pip install --no-index --no-deps --no-build-isolation -e . && python3 -m pytest -q -m gpu tests/test_ladder_gpu.py
"""
import pytest

from roofline.ladder import check, gpu
from roofline.ladder.registry import DENSE_LEVELS as LEVELS, WRONG

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not gpu.gpu_available(), reason="needs CuPy and an NVIDIA GPU")]


@pytest.mark.parametrize("level", LEVELS, ids=lambda lv: f"L{lv.id}")
def test_level_passes_check(level):
    res = check.check_level(level, n_random=40, seed=123)
    fails = [r for r in res if not r.ok]
    assert not fails, [(r.m, r.n, r.k, r.reason) for r in fails[:5]]
    assert any(r.specials for r in res)


@pytest.mark.parametrize("level", LEVELS, ids=lambda lv: f"L{lv.id}")
def test_nan_inf_propagate(level):
    m, n = (100, 77) if level.max_m else (300, 200)
    r = check.check_shape(level, m, n, min(level.max_k or 1000, 50), seed=5, specials=True)
    assert r.ok, r.reason


@pytest.mark.parametrize("shape", [(128, 128, 128), (200, 300, 65), (16, 16, 129)])
def test_wrong_kernel_fails_check(shape):
    r = check.check_shape(WRONG["l03_skip_last_k"], *shape, seed=7)
    assert not r.ok and ("rel err" in r.reason or "outside tolerance" in r.reason)


def test_wrong_kernel_agrees_where_bug_is_inactive():
    # one K tile: dropping "the last of several" tiles changes nothing, so the check passes
    r = check.check_shape(WRONG["l03_skip_last_k"], 200, 300, 64, seed=7)
    assert r.ok, r.reason
