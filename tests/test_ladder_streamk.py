"""The stream-K tail of level 9 (ws.cuh SPLITK = 2) on a CPU: the work list the kernel walks
(gpu.streamk_work, the kernel's integer arithmetic) covers every tile's K tiles exactly once,
the segments of a tile agree on their count and workspace slots, the slots fit the workspace
the launcher allocates, and the plan only splits a tail that leaves SMs idle. The GPU check
suite (ladder/check.py, 200+ shapes against cuBLAS) is what shows the kernel does the same."""
from __future__ import annotations

from collections import defaultdict

import pytest

from roofline.ladder import gpu
from roofline.ladder.registry import VARIANTS

SK = VARIANTS["l09_streamk"]
SHAPES = [(8192, 8192, 8192), (512, 4096, 4096), (2048, 28672, 4096), (8192, 4096, 14336),
          (3000, 5000, 1000), (256, 14336, 4096), (64, 4096, 4096), (1000, 3000, 2000), (129, 130, 200),
          (640, 640, 640), (1, 256, 64)]


def _tiles(m, n, k):
    bm, bn, bk = SK.tile_mnk
    return -(-m // bm) * -(-n // bn), -(-k // bk)


@pytest.mark.parametrize("m,n,k", SHAPES)
def test_units_cover_each_tile_once_and_segments_agree(m, n, k):
    tiles, nkt = _tiles(m, n, k)
    s, dp = gpu.splitk_plan(SK, m, n, k, 132)
    grid = min(132, max(s, dp))
    work = gpu.streamk_work(tiles, nkt, grid, s, dp)
    covered = defaultdict(list)
    segs = defaultdict(list)
    for units in work:
        for t, kt0, kt1, nseg, own, slot, others in units:
            assert 0 <= kt0 < kt1 <= nkt
            covered[t].append((kt0, kt1))
            segs[t].append((nseg, own, slot, others))
    assert sorted(covered) == list(range(tiles))
    nslots = gpu.streamk_slots(SK, m, n, k, s, dp)
    for t, ranges in covered.items():
        ranges.sort()
        assert ranges[0][0] == 0 and ranges[-1][1] == nkt
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))   # contiguous, no overlap
        nsegs = {x[0] for x in segs[t]}
        assert nsegs == {len(ranges)}
        if len(ranges) > 1:
            own_slots = {x[1]: x[2] for x in segs[t]}
            assert sorted(own_slots) == list(range(len(ranges)))
            assert all(0 <= v < nslots for v in own_slots.values())
            for nseg, own, slot, others in segs[t]:
                assert sorted(others) == sorted(v for o, v in own_slots.items() if o != own)
    all_slots = [x[2] for v in segs.values() for x in v if x[0] > 1]
    assert len(all_slots) == len(set(all_slots))


def test_plan_splits_only_a_tail_that_leaves_sms_idle():
    # 8192^3 on 128x256 tiles: 2048 tiles = 15 waves of 132 + 68 (52 % of a wave): split the tail
    s, dp = gpu.splitk_plan(SK, 8192, 8192, 8192, 132)
    assert (s, dp) == (132, 15 * 132)
    # 4096^3: 512 tiles = 3 waves + 116 (88 % of a wave): left whole
    assert gpu.splitk_plan(SK, 4096, 4096, 4096, 132) == (0, 512)
    # 777x1531x263: 42 tiles of 5 K tiles: 210 iterations / 8 per CTA = 26 CTAs < 42 tiles: whole
    assert gpu.splitk_plan(SK, 777, 1531, 263, 132) == (0, 42)


def test_splitk_counts_the_partial_traffic():
    # 256x14336x4096 on level 10's 128x128 build: 224 tiles already cover the SMs (2 rounds of 64
    # K tiles); 4 splits would be 7 rounds of 16 + the fp32 partials: not split
    lv = VARIANTS["l10_m128"]
    assert gpu.splitk_plan(lv, 256, 14336, 4096, 132) == (1, 64)
    # a 128x128 fp32 partial is 64 KiB, written and read: 128 KiB = 4 K steps of 32 KiB (A + B);
    # 64x128: 2 x 32 KiB over 24 KiB per K step
    assert gpu._partial_cost_ktiles(128, 128, 64) == pytest.approx(4.0)
    assert gpu._partial_cost_ktiles(64, 128, 64) == pytest.approx(64 / 24)
