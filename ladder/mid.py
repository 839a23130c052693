"""Mid shapes (128 < M <= 1024 with few tiles): the wave model that picks a tile per shape, and
the proposed "mid" dispatch class (notes/mid.md has the arithmetic and the measurements).

A mid shape has fewer than two waves of level 9's 128x256 tiles on 132 SMs, so its time is set by
wave quantization (how full the last wave is) and by the tile's padding of M and N, not by the
per-tile efficiency alone. The model, a pure function of the shape and a calibration table:

    time = waves * (2 * BM * BN * (K + fixed)) / rate(tile)

    waves = ceil(units / slots); units = CTAs of work (a 2-CTA cluster pairs M-adjacent tiles, an
    odd tile row count leaves one CTA of the last pair idle); slots = #SMs (cluster: #SMs / 2 pairs)
    rate(tile) = one CTA's bf16 MMA rate on that tile, TFLOP/s (TILE_RATE_TFLOPS)
    fixed = UNIT_FIXED_K extra K elements per unit (pipeline fill and epilogue)

Assumptions: every CTA of a wave runs at the same rate (no DRAM/L2 limit: the mid shapes move
<= 250 MB through L2 in >= 20 us), tiles do not overlap across waves, split-K/stream-K are not
modelled (their fp32 partial traffic made them lose on these shapes, notes/mid.md).
"""
from __future__ import annotations

from math import ceil

# One CTA's MMA rate per unit tile, TFLOP/s, from ncu kernel durations on the H200 (L2 flushed,
# fixtures/ladder/grouped_fp8_h200/start3_where/where.md): 128x256 cooperative (level 9) 6.1
# (268 MFLOP per CTA in 43.9 us at 200x6144x4096, 459 MFLOP in 75.5 us at 1000x3000x7000);
# 128x128 cooperative (l10_m128, S = 1) 4.7 (4.55 at 200x6144x4096, 4.85 at 512x4096x4096);
# 128x192 5.6: NOT measured, between the two (m64n192 per instruction); the device run replaces it.
TILE_RATE_TFLOPS = {(128, 256): 6.1, (128, 192): 5.6, (128, 128): 4.7}
UNIT_FIXED_K = 128            # = gpu.SPLITK_UNIT_COST_KTILES (2) K tiles of 64: fill + epilogue per unit
SMS_H200 = 132
MID_MIN_M = 128               # above decode-skinny (dispatch.DECODE_SKINNY_MAX_M)
MID_MAX_M = 1024
MID_MAX_WAVES_WIDE = 2        # fewer than this many waves of 128x256 tiles: wave quantization dominates

# The builds the mid picker chooses from: (registry target, tile BM, BN, cluster). "9" is level 9
# itself (128x256, 2-CTA cluster); the others are registry.VARIANTS.
# A cluster pair wastes one CTA per tile column when the tile rows are odd (320 = 3 rows of 128),
# so each tile is offered with and without the cluster.
MID_BUILDS = (("9", 128, 256, 2), ("l09_n192_cl2", 128, 192, 2), ("l09_m128_cl2", 128, 128, 2),
              ("l09_nocluster", 128, 256, 1), ("l09_n192", 128, 192, 1), ("l09_m128", 128, 128, 1))


def units_and_waves(m: int, n: int, bm: int, bn: int, cluster: int, sms: int = SMS_H200,
                    clusters: int | None = None) -> tuple[int, int]:
    """-> (CTAs of work, waves) of a data-parallel persistent launch (gpu._launch_ws without split);
    `clusters`: co-resident clusters (gpu.max_active_clusters), default #SMs / cluster."""
    tiles_m = -(-m // bm)
    ctas = -(-tiles_m // cluster) * cluster * -(-n // bn)
    slots = min(sms // cluster, clusters or sms) * cluster
    return ctas, -(-ctas // slots)


def predict_us(m: int, n: int, k: int, bm: int, bn: int, cluster: int, sms: int = SMS_H200,
               clusters: int | None = None) -> float:
    """The model's kernel time in us (module docstring)."""
    _, waves = units_and_waves(m, n, bm, bn, cluster, sms, clusters)
    return waves * 2.0 * bm * bn * (k + UNIT_FIXED_K) / (TILE_RATE_TFLOPS[(bm, bn)] * 1e6)


def pick_build(m: int, n: int, k: int, sms: int = SMS_H200, clusters_of=None) -> str:
    """The MID_BUILDS target with the lowest predicted time (ties: the earlier build in MID_BUILDS).
    clusters_of(target) -> co-resident clusters of a cluster build or None (default #SMs / 2)."""
    def cost(b):
        cl = clusters_of(b[0]) if (clusters_of and b[3] > 1) else None
        return predict_us(m, n, k, b[1], b[2], b[3], sms, cl), MID_BUILDS.index(b)
    return min(MID_BUILDS, key=cost)[0]


def is_mid(M: int, N: int, K: int, sms: int = SMS_H200) -> bool:
    """The proposed "mid" class: MID_MIN_M < M <= MID_MAX_M and fewer than MID_MAX_WAVES_WIDE
    waves of 128x256 tiles (level 9's), whatever the alignment."""
    if not MID_MIN_M < M <= MID_MAX_M:
        return False
    return ceil(M / 128) * ceil(N / 256) < MID_MAX_WAVES_WIDE * sms


def shape_class_with_mid(M: int, N: int, K: int) -> str:
    """dispatch.shape_class with the "mid" class in front (the proposal, off until the device run:
    dispatch.shape_class is what the shipped table uses)."""
    from .dispatch import shape_class
    return "mid" if is_mid(M, N, K) else shape_class(M, N, K)
