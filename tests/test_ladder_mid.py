"""CPU-only: the mid-shape wave model (ladder/mid.py) and the proposed "mid" class.

The expected tile counts are counted here from the shape (ceil divisions written out per shape),
not read from the module; the picks are checked against a brute-force minimum of the same
formula recomputed in the test."""
from math import ceil

import pytest

from roofline.ladder import mid
from roofline.ladder.bench import MID, MID_HELD_OUT, MID_NAMED
from roofline.ladder.registry import VARIANTS, get_level


def test_units_and_waves_counts_tiles_and_cluster_pairs():
    # 200x6144: 2 row tiles of 128 x 6144/128 = 48 column tiles = 96 CTAs, one wave on 132
    assert mid.units_and_waves(200, 6144, 128, 128, 2) == (96, 1)
    # 1000x3000 on 128x192: 8 row tiles x ceil(3000/192) = 16 -> 128 CTAs, one wave
    assert mid.units_and_waves(1000, 3000, 128, 192, 1) == (8 * 16, 1)
    # 320 rows = 3 row tiles: a 2-CTA cluster pairs them into 2 pairs = 4 CTAs per column
    assert mid.units_and_waves(320, 8192, 128, 192, 2) == (4 * 43, 2)
    assert mid.units_and_waves(320, 8192, 128, 192, 1) == (3 * 43, 1)
    # fewer co-resident clusters than #SMs / 2: 128 CTAs on 60 pairs (120 slots) = 2 waves
    assert mid.units_and_waves(1000, 3000, 128, 192, 2, clusters=60) == (128, 2)
    assert mid.units_and_waves(1000, 3000, 128, 192, 2) == (128, 1)


def test_predict_us_is_waves_times_tile_time():
    # 1000x3000x7000, 128x256: 96 CTAs, 1 wave; 2 * 128 * 256 * (7000 + 128) flop at 6.1 TFLOP/s
    want = 2 * 128 * 256 * (7000 + mid.UNIT_FIXED_K) / (mid.TILE_RATE_TFLOPS[(128, 256)] * 1e6)
    assert mid.predict_us(1000, 3000, 7000, 128, 256, 2) == pytest.approx(want)
    # two waves cost twice one
    one = mid.predict_us(384, 11008, 4096, 128, 256, 1)
    two = mid.predict_us(384, 11008, 4096, 128, 256, 2)   # 2 pairs per column x 43 = 172 CTAs
    assert two == pytest.approx(2 * one)


@pytest.mark.parametrize("shape", MID)
def test_pick_build_is_the_minimum_of_the_model(shape):
    m, n, k = shape
    costs = {}
    for key, bm, bn, cl in mid.MID_BUILDS:
        ctas = ceil(ceil(m / bm) / cl) * cl * ceil(n / bn)
        waves = ceil(ctas / ((132 // cl) * cl))
        costs[key] = waves * bm * bn * (k + 128) / mid.TILE_RATE_TFLOPS[(bm, bn)]
    best = min(costs.values())
    assert costs[mid.pick_build(m, n, k)] == pytest.approx(best)


def test_mid_builds_exist_and_match_their_tiles():
    for key, bm, bn, cl in mid.MID_BUILDS:
        lv = get_level(int(key)) if key.isdigit() else VARIANTS[key]
        assert lv.tile_mnk[:2] == (bm, bn) and lv.cluster == cl and lv.splitk == 0, key
    assert VARIANTS["l09_mid"].by_waves


def test_mid_class_boundaries():
    for s in MID_NAMED + MID_HELD_OUT:
        assert mid.is_mid(*s), s
    assert not mid.is_mid(128, 6144, 4096)          # decode-skinny stays
    assert mid.is_mid(129, 6144, 4096)
    assert mid.is_mid(1024, 4096, 4096)
    assert not mid.is_mid(1025, 4096, 4096)
    # 1024 x 32768: 8 x 128 = 1024 tiles of 128x256, many waves: not mid
    assert not mid.is_mid(1024, 32768, 4096)
    # the wave bound: 8 row tiles x ceil(N/256) < 264  <=>  N/256 <= 32
    assert mid.is_mid(1024, 33 * 256 - 256, 4096) and not mid.is_mid(1024, 33 * 256, 4096)
    assert mid.shape_class_with_mid(512, 4096, 4096) == "mid"
    assert mid.shape_class_with_mid(4096, 4096, 4096) == "prefill"
    assert mid.shape_class_with_mid(64, 4096, 4096) == "decode-skinny"
