"""Mid shapes (128 < M <= 1024 with few tiles): the wave model that picks a tile per shape, and
the proposed "mid" dispatch class (notes/mid.md has the arithmetic and the measurements).

A mid shape has fewer than two waves of level 9's 128x256 tiles on 132 SMs, so its time is set by
wave quantization (how full the last wave is) and by the tile's padding of M and N, not by the
per-tile efficiency alone. The model, a pure function of the shape and the calibration below
(notes/mid.md, "Calibration"):

    time_us = T0_US + sum over waves of max(compute, l2)
    compute = 2 * BM * BN * K * smem_ratio(BN) / R_CTA_TFLOPS        (one tile per CTA per wave)
    l2      = active CTAs * (BM + BN / CL) * K * 2 bytes / L2_MISALIGNED_TBPS, only when the
              operand row pitch K * 2 bytes is not a multiple of 128 and K >= L2_MISALIGNED_MIN_K
              (else 0: never seen binding)
    smem_ratio(BN) = max(1, (256 + 3 BN) / (4 BN))

    waves = ceil(units / slots); units = CTAs of work (a 2-CTA cluster pairs M-adjacent tiles, an
    odd tile row count leaves one CTA of the last pair idle); slots = #SMs (cluster: 2 x pairs)

smem_ratio: shared-memory clocks over MMA clocks per 64-wide K tile of the cooperative engine
(two consumers of 64 rows): MMA 4 BN clocks (4096 bf16 flop/clk/SM); shared memory at 128 B/clk:
wgmma operand reads 128 + 2 BN clocks (each consumer's m64nBNk16 reads its 64x16 A and the 16xBN
B), TMA writes of the stage 128 + BN clocks. 128x256: 1.0, 128x192: 1.08, 128x128: 1.25,
128x96: 1.42: the one parameter R_CTA_TFLOPS fits all three measured widths (notes/mid.md).
Assumptions: every CTA of a wave runs at the same rate; T0_US (launch, cold-L2 fill, last
epilogue) is the same for every build; split-K/stream-K are not modelled (their fp32 partial
traffic made them lose on these shapes); the K-padding copy of K % 8 != 0 shapes is not in T0_US.
"""
from __future__ import annotations


# Calibration (notes/mid.md): least squares on relative error over the 30 rows of the five
# held-out mid shapes (320x8192x4096, 640x5120x5120, 384x11008x4096, 896x2048x8192,
# 450x3584x3584; 6 builds each) of fixtures/ladder/grouped_fp8_h200/start4_round2/bench_mid.json;
# the named shapes were left out of the fit and checked against it.
T0_US = 8.8                   # fitted 8.79
R_CTA_TFLOPS = 6.76           # one CTA's bf16 MMA rate when shared memory does not bind
# L2 -> SM operand bytes per second when rows are not 128-byte aligned (each 128-byte box row
# spans two L2 lines): the one shape of the set with such a pitch, 1000x3000x7000 (14000 bytes),
# 5.0-5.8 TB/s over its six builds (7.0-7.2 for the 128x128 pair); 5.3 fits them; no held-out check.
L2_MISALIGNED_TBPS = 5.3
L2_MISALIGNED_MIN_K = 1024    # the term is a streaming limit: a K of a few tiles (777x1531x263) is latency-bound
SMS_H200 = 132

# The builds the mid picker chooses from: (registry target, tile BM, BN, cluster). "9" is level 9
# itself (128x256, 2-CTA cluster); the others are registry.VARIANTS. Each tile is offered with and
# without the cluster (an odd tile row count wastes a CTA per column in a pair); on equal predicted
# time the fewer CTAs win, then the earlier entry (the cluster build: B read from L2 once per pair).
MID_BUILDS = (("9", 128, 256, 2), ("l09_n192_cl2", 128, 192, 2), ("l09_m128_cl2", 128, 128, 2),
              ("l09_n96_cl2", 128, 96, 2), ("l09_nocluster", 128, 256, 1), ("l09_n192", 128, 192, 1),
              ("l09_m128", 128, 128, 1), ("l09_n96", 128, 96, 1))


def units_and_waves(m: int, n: int, bm: int, bn: int, cluster: int, sms: int = SMS_H200,
                    clusters: int | None = None) -> tuple[int, int]:
    """-> (CTAs of work, waves) of a data-parallel persistent launch (gpu._launch_ws without split);
    `clusters`: co-resident clusters (gpu.max_active_clusters), default #SMs / cluster."""
    tiles_m = -(-m // bm)
    ctas = -(-tiles_m // cluster) * cluster * -(-n // bn)
    slots = min(sms // cluster, clusters or sms) * cluster
    return ctas, -(-ctas // slots)


def smem_ratio(bn: int) -> float:
    """Shared-memory clocks over MMA clocks per K tile of the 128-row cooperative engine (docstring)."""
    return max(1.0, (256 + 3 * bn) / (4 * bn))


def predict_us(m: int, n: int, k: int, bm: int, bn: int, cluster: int, sms: int = SMS_H200,
               clusters: int | None = None) -> float:
    """The model's launch time in us (module docstring)."""
    ctas, waves = units_and_waves(m, n, bm, bn, cluster, sms, clusters)
    slots = -(-ctas // waves)
    compute = 2.0 * bm * bn * k * smem_ratio(bn) / (R_CTA_TFLOPS * 1e6)
    body = 0.0
    for w in range(waves):
        active = min(slots, ctas - w * slots)
        l2 = active * (bm + bn / cluster) * k * 2 / (L2_MISALIGNED_TBPS * 1e6) if (k * 2) % 128 and k >= L2_MISALIGNED_MIN_K else 0.0
        body += max(compute, l2)
    return T0_US + body


def pick_build(m: int, n: int, k: int, sms: int = SMS_H200, clusters_of=None) -> str:
    """The MID_BUILDS target with the lowest predicted time (ties: fewer CTAs, then the earlier
    build in MID_BUILDS). clusters_of(target) -> co-resident clusters of a cluster build or None
    (default #SMs / 2)."""
    def cost(b):
        cl = clusters_of(b[0]) if (clusters_of and b[3] > 1) else None
        return (round(predict_us(m, n, k, b[1], b[2], b[3], sms, cl), 6),
                units_and_waves(m, n, b[1], b[2], b[3], sms, cl)[0], MID_BUILDS.index(b))
    return min(MID_BUILDS, key=cost)[0]
