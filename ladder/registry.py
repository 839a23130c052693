"""The one registry of GEMM-ladder levels: LEVELS (one entry per level file), WRONG (builds that
must fail the check) and VARIANTS (other measured builds of the same files, named by a key).

The CLI (`roofline ladder list`), the README table (`render_markdown_table`) and the tests all
read `LEVELS`; what a Level entry promises (and how tests/test_ladder_build.py checks it against
ptxas) is level.py's docstring.
"""
from __future__ import annotations

from .level import ARCH, KERNEL_DIR, Contract, Level  # noqa: F401  (the registry's public names; the contract records: contracts.py)


_TILE = (128, 128, 64)
_SMEM = (128 * 64 + 128 * 64) * 2  # A and B tiles, bf16
_SMEM_L4 = _SMEM + 8               # + one mbarrier
_TILE_WIDE = (128, 256, 64)        # levels 5-6: two warpgroups x wgmma m64n256k16
_STAGE_WIDE = (128 * 64 + 256 * 64) * 2   # 48 KiB per pipeline stage


def _dyn_wide(depth: int, min_bytes: int = 0) -> int:
    # the kernels' DYN_SMEM: stages (or the epilogue staging, if larger) + 1 KiB alignment slack
    return max(depth * _STAGE_WIDE, min_bytes) + 1024


PIPE_DEPTH = 4                     # levels 5-6 as shipped

LEVELS: tuple[Level, ...] = (
    Level(1, "single_tile", "l01_single_tile.cu", "gemm_l01",
          "one 128x128 tile, one K tile: sync copy to 128B-swizzled smem, 2 warpgroups x 4 wgmma m64n128k16",
          "tensor-core path: swizzled smem, wgmma descriptors, register epilogue",
          _TILE, 256, _SMEM, 128, True, max_m=128, max_n=128, max_k=64),
    Level(2, "kloop", "l02_kloop.cu", "gemm_l02",
          "level 1 + K loop over 64-wide tiles with zero-filled K tail",
          "K accumulation (scale-d=0 first step), K tail",
          _TILE, 256, _SMEM, 128, True, max_m=128, max_n=128, max_k=None),
    Level(3, "grid", "l03_grid.cu", "gemm_l03",
          "level 2 over a grid of 128x128 CTA tiles, masked edges, any M, N, K",
          "grid -> M/N tile mapping, boundary masks on loads and stores",
          _TILE, 256, _SMEM, 128, True),
    Level(4, "tma", "l04_tma.cu", "gemm_l04",
          "level 3 with TMA loads (SWIZZLE_128B, mbarrier expect_tx) and TMA store; one stage",
          "TMA loads on an mbarrier, zero-filled tails, TMA store epilogue (register store if N % 8)",
          _TILE, 256, _SMEM_L4, 128, True, kind="tma"),
    Level(5, "pipeline", "l05_pipeline.cu", "gemm_l05",
          "128x256 tile, 4-stage TMA pipeline, full/empty mbarriers; thread 0 loads ahead (no warp specialization)",
          "PIPE_DEPTH=4 stages, full/empty ledger (prologue, steady state, drain); 128x256 tile, wgmma m64n256k16",
          _TILE_WIDE, 256, 16 * PIPE_DEPTH, 168, True, kind="tma",
          dyn_smem_bytes=_dyn_wide(PIPE_DEPTH, 2 * 64 * 256 * 2)),
    Level(6, "persistent", "l06_persistent.cu", "gemm_l06",
          "level 5 persistent: #SMs CTAs walk 128x256 tiles in GROUP_M=16 grouped order; ledger spans tiles",
          "one CTA per SM, grouped (L2-friendly) tile order, next tile's loads overlap the epilogue",
          _TILE_WIDE, 256, 16 * PIPE_DEPTH, 168, True, kind="persistent",
          dyn_smem_bytes=_dyn_wide(PIPE_DEPTH)),
)

_STAGE_128 = (128 * 64 + 128 * 64) * 2   # 32 KiB: 128x64 A + 128x64 B
_STAGE_64 = (64 * 64 + 128 * 64) * 2     # 24 KiB: 64x64 A + 128x64 B
_STAGE_N192 = (128 * 64 + 192 * 64) * 2  # 40 KiB: 128x64 A + 192x64 B
_STAGE_N96 = (128 * 64 + 96 * 64) * 2    # 28 KiB: 128x64 A + 96x64 B
_WS_THREADS_1 = 256                      # producer warpgroup + 1 consumer
_WS_THREADS_2 = 384                      # producer warpgroup + 2 consumers


def _ws_dyn(depth: int, stage: int, consumers: int, tma_store: bool = True) -> int:
    # ws.cuh's DYN_SMEM: stages + 16 KiB epilogue staging per consumer (TMA store) + 1 KiB slack
    return depth * stage + (consumers * 16384 if tma_store else 0) + 1024

LEVELS = LEVELS + (
    Level(7, "warp_specialized", "l07_warp_specialized.cu", "gemm_l07",
          "producer warpgroup (TMA only, setmaxnreg 40) + one consumer warpgroup (wgmma, setmaxnreg 232) on 128x128 tiles; persistent, 6 stages",
          "warp specialization: producer/consumer warpgroups, setmaxnreg, full/empty parity waits",
          (128, 128, 64), _WS_THREADS_1, 16 * 6, 232, True, kind="ws",
          dyn_smem_bytes=_ws_dyn(6, _STAGE_128, 1)),
    Level(8, "cluster2", "l08_cluster.cu", "gemm_l08",
          "level 7 in 2-CTA clusters: the M-adjacent tile pair shares B, each CTA multicasts half of it",
          "2-CTA cluster, TMA multicast of B, remote empty arrivals, cluster barriers",
          (128, 128, 64), _WS_THREADS_1, 16 * 6, 232, True, kind="ws", cluster=2,
          dyn_smem_bytes=_ws_dyn(6, _STAGE_128, 1)),
    Level(9, "multi_consumer", "l09_multi_consumer.cu", "gemm_l09",
          "two cooperative consumer warpgroups on a 128x256 tile (64x256 each), 4 stages, in level 8's 2-CTA cluster (B multicast), on the fewest clusters that keep the rounds",
          "two consumer warpgroups (cooperative 128x256), 384 threads; 2-CTA cluster; balanced persistent grid",
          _TILE_WIDE, _WS_THREADS_2, 16 * 4, 168, True, kind="ws", cluster=2, defines=("L9_CL=2",),
          grid_balance=True, dyn_smem_bytes=_ws_dyn(4, _STAGE_WIDE, 2)),
    Level(10, "splitk_decode", "l10_splitk.cu", "gemm_l10",
          "level 7 with 64-row tiles (one m64n128 consumer) and split-K chosen per shape; M > 64: 128x128 tiles (l10_m128)",
          "serving shapes: 64x128 tiles + split-K (workspace, per-tile counters), 8 stages",
          (64, 128, 64), _WS_THREADS_1, 16 * 8 + 16, 232, True, kind="ws", splitk=-1,
          dyn_smem_bytes=_ws_dyn(8, _STAGE_64, 1), by_m=((64, "l10_m128"),)),
)

# Levels 11-14 (grouped MoE GEMMs and fp8; notes/l11.md .. l14.md). Level 11's tile is 64 weight
# rows x RG = 32 token rows x 64 K; its shared memory: D = 16 stages of 8 KiB weights + 2 token chunks.
_L11_STAGE = 64 * 128 + 2 * 16 * 128
LEVELS = LEVELS + (
    Level(11, "grouped_decode", "l11_grouped_decode.cu", "gemm_l11",
          "MoE decode as weight streaming: swap-AB (64 weight rows as wgmma M, the expert's tokens as N = one chunk of 32), "
          "units (expert, token group, 64 weight rows) for hit experts only, listed on the device from the offsets, 16 stages",
          "grouped GEMM (torch._grouped_mm contract), swap-AB weight streaming, device-side unit list",
          (64, 32, 64), 256, 4368, 64, True, kind="grouped", contract="grouped-bf16",
          defines=("L11_TN=32", "L11_CH=1"), dyn_smem_bytes=16 * _L11_STAGE + 1024),
    Level(12, "grouped_prefill", "l12_grouped_prefill.cu", "gemm_l12",
          "MoE prefill: level 9's engine (two cooperative consumers, 128x256, 4 stages, TMA-store epilogue) over the "
          "grouped tile list (m-tiles fastest per expert), row-masked stores at expert ends; no cluster",
          "grouped tile list in the warp-specialized engine",
          _TILE_WIDE, _WS_THREADS_2, 1104, 168, True, kind="ws", contract="grouped-bf16",
          dyn_smem_bytes=_ws_dyn(4, _STAGE_WIDE, 2)),
    Level(13, "fp8", "l13_fp8.cu", "gemm_l13",
          "fp8 e4m3: level 9 in fp8 (QGMMA m64n256k32, K tiles of 128), 2-CTA cluster, scales in the epilogue",
          "fp8 (e4m3) QGMMA, rowwise/colwise scales in the epilogue",
          (128, 256, 128), _WS_THREADS_2, 64, 168, False, kind="ws", cluster=2, contract="gemm-fp8",
          grid_balance=True, dyn_smem_bytes=_ws_dyn(4, _STAGE_WIDE, 2)),
    Level(14, "fp8_splitk", "l14_fp8_splitk.cu", "gemm_l14",
          "fp8 e4m3 for decode shapes: level 10 in fp8 (64x128 tiles, split-K per shape, 8 stages)",
          "fp8 decode: split-K, scales after the reduction",
          (64, 128, 128), _WS_THREADS_1, 16 * 8 + 16, 232, True, kind="ws", splitk=-1, contract="gemm-fp8",
          dyn_smem_bytes=_ws_dyn(8, _STAGE_64, 1)),
    Level(15, "grouped_fp8_prefill", "l15_grouped_fp8_prefill.cu", "gemm_l15",
          "fp8 MoE prefill: level 12's grouped tile list with level 13's QGMMA m64n256k32 main loop, two cooperative "
          "consumers on 128x256 (4 stages of 48 KiB), sa[row] * sw[e, n] in the epilogue; no cluster",
          "fp8 grouped prefill: level 12's tile list on level 13's fp8 main loop",
          (128, 256, 128), _WS_THREADS_2, 1104, 168, True, kind="ws", contract="grouped-fp8",
          dyn_smem_bytes=_ws_dyn(4, _STAGE_WIDE, 2)),
)

# Deliberately wrong builds, kept so that a test proves the check catches them. Never benched.
WRONG: dict[str, Level] = {
    "l03_skip_last_k": Level(
        103, "grid_skip_last_k", "l03_grid.cu", "gemm_l03",
        "WRONG ON PURPOSE: level 3 that drops the last K tile",
        "a bug the check must catch", _TILE, 256, _SMEM, 128, True,
        defines=("LADDER_BUG_SKIP_LAST_KTILE",)),
}


# Earlier measured versions, rebuilt from the same files with a -D switch so that a bench can
# time them beside the current ones (notes/l02.md, notes/l03.md). Never shipped as a level.
VARIANTS: dict[str, Level] = {
    "l02_v1_serial_copy": Level(
        2, "kloop_v1_serial_copy", "l02_kloop.cu", "gemm_l02",
        "level 2, first version: copy loads and stores chunk by chunk (8 dependent round trips/K tile)",
        "-", _TILE, 256, _SMEM, 128, True, max_m=128, max_n=128, max_k=None,
        defines=("LADDER_COPY_SERIAL",)),
    "l03_v1_serial_copy": Level(
        3, "grid_v1_serial_copy", "l03_grid.cu", "gemm_l03",
        "level 3, first version: copy loads and stores chunk by chunk (8 dependent round trips/K tile)",
        "-", _TILE, 256, _SMEM, 128, True, defines=("LADDER_COPY_SERIAL",)),
    # the overlap measurement of level 5: same 128x256 tile, same code, PIPE_DEPTH 1 (copy and
    # MMA alternate) and 2
    "l05_depth1": Level(
        5, "pipeline_depth1", "l05_pipeline.cu", "gemm_l05",
        "level 5 with PIPE_DEPTH=1: no overlap of load and MMA (baseline of the overlap measurement)",
        "-", _TILE_WIDE, 256, 16, 168, True, kind="tma",
        defines=("PIPE_DEPTH=1",), dyn_smem_bytes=_dyn_wide(1, 2 * 64 * 256 * 2)),
    "l05_depth2": Level(
        5, "pipeline_depth2", "l05_pipeline.cu", "gemm_l05",
        "level 5 with PIPE_DEPTH=2", "-", _TILE_WIDE, 256, 32, 168, True, kind="tma",
        defines=("PIPE_DEPTH=2",), dyn_smem_bytes=_dyn_wide(2, 2 * 64 * 256 * 2)),
    # level 6 with the tile order of level 5 (GROUP_M=1: row-major over tiles): what the grouping buys
    "l06_group1": Level(
        6, "persistent_group1", "l06_persistent.cu", "gemm_l06",
        "level 6 with GROUP_M=1 (plain row-major tile order)", "-", _TILE_WIDE, 256, 16 * PIPE_DEPTH,
        168, True, kind="persistent", defines=("GROUP_M=1",), dyn_smem_bytes=_dyn_wide(PIPE_DEPTH)),
    # level 6's epilogue alternatives (notes/l06.md): 3 stages with the register store (what the
    # smaller depth costs), and 3 stages + a 64 KiB staging buffer with a TMA store left in flight
    "l06_depth3": Level(
        6, "persistent_depth3", "l06_persistent.cu", "gemm_l06",
        "level 6 with PIPE_DEPTH=3 (register-store epilogue)", "-", _TILE_WIDE, 256, 48,
        168, True, kind="persistent", defines=("PIPE_DEPTH=3",), dyn_smem_bytes=_dyn_wide(3)),
    "l06_tma_store": Level(
        6, "persistent_tma_store", "l06_persistent.cu", "gemm_l06",
        "level 6 with PIPE_DEPTH=3 + 64 KiB staging: async TMA-store epilogue overlapping the next tile",
        "-", _TILE_WIDE, 256, 48, 184, True, kind="persistent", defines=("L6_TMA_STORE",),
        dyn_smem_bytes=3 * _STAGE_WIDE + 2 * 64 * 256 * 2 + 1024),
    # level 9's alternatives (notes/l09.md): the cooperative build in a 2-CTA cluster (level 9 of
    # the first device run), ping-pong consumers (with and without the cluster), register stores
    "l09_coop_cluster": Level(
        9, "multi_consumer_coop_cluster", "l09_multi_consumer.cu", "gemm_l09",
        "level 9 cooperative in 2-CTA clusters (B multicast, cluster tile 256x256)", "-", _TILE_WIDE,
        _WS_THREADS_2, 16 * 4, 168, True, kind="ws", cluster=2, defines=("L9_CL=2",),
        dyn_smem_bytes=_ws_dyn(4, _STAGE_WIDE, 2)),
    "l09_nocluster": Level(
        9, "multi_consumer_nocluster", "l09_multi_consumer.cu", "gemm_l09",
        "level 9 without the cluster and on all SMs (level 9 as shipped before the cluster worked)", "-", _TILE_WIDE,
        _WS_THREADS_2, 16 * 4, 168, True, kind="ws", defines=("L9_CL=1",), dyn_smem_bytes=_ws_dyn(4, _STAGE_WIDE, 2)),
    "l08_fenced": Level(
        8, "cluster2_fenced", "l08_cluster.cu", "gemm_l08",
        "level 8 with the remote empty arrivals as .release.cluster (the first build: a fence per arrival)", "-",
        (128, 128, 64), _WS_THREADS_1, 16 * 6, 232, True, kind="ws", cluster=2,
        defines=("LADDER_REMOTE_RELEASE_CLUSTER",), dyn_smem_bytes=_ws_dyn(6, _STAGE_128, 1)),
    "l09_pingpong": Level(
        9, "multi_consumer_pingpong", "l09_multi_consumer.cu", "gemm_l09",
        "level 9 ping-pong: consumers alternate whole 128x128 tiles, 6 stages, 2-CTA cluster", "-",
        (128, 128, 64), _WS_THREADS_2, 16 * 6 + 16, 168, True, kind="ws", cluster=2,
        defines=("L9_PINGPONG", "L9_CL=2"), dyn_smem_bytes=_ws_dyn(6, _STAGE_128, 2)),
    "l09_pingpong_wide": Level(
        9, "multi_consumer_pingpong_wide", "l09_multi_consumer.cu", "gemm_l09",
        "level 9 ping-pong on 64x256 tiles (m64n256), 4 stages of 40 KiB, 2-CTA cluster", "-",
        (64, 256, 64), _WS_THREADS_2, 16 * 4 + 16, 168, True, kind="ws", cluster=2,
        defines=("L9_PINGPONG", "L9_PP_WIDE", "L9_CL=2"), dyn_smem_bytes=_ws_dyn(4, (64 * 64 + 256 * 64) * 2, 2)),
    "l09_pingpong_nocluster": Level(
        9, "multi_consumer_pingpong_nocluster", "l09_multi_consumer.cu", "gemm_l09",
        "level 9 ping-pong without the cluster", "-", (128, 128, 64), _WS_THREADS_2, 16 * 6 + 16, 168, True,
        kind="ws", defines=("L9_PINGPONG", "L9_CL=1"), dyn_smem_bytes=_ws_dyn(6, _STAGE_128, 2)),
    "l09_pingpong_wide_nocluster": Level(
        9, "multi_consumer_pingpong_wide_nocluster", "l09_multi_consumer.cu", "gemm_l09",
        "level 9 ping-pong on 64x256 tiles without the cluster", "-", (64, 256, 64), _WS_THREADS_2,
        16 * 4 + 16, 168, True, kind="ws", defines=("L9_PINGPONG", "L9_PP_WIDE", "L9_CL=1"),
        dyn_smem_bytes=_ws_dyn(4, (64 * 64 + 256 * 64) * 2, 2)),
    "l09_streamk": Level(
        9, "multi_consumer_streamk", "l09_multi_consumer.cu", "gemm_l09",
        "level 9 cooperative with a stream-K tail: the last partial wave's K iterations spread over all CTAs",
        "-", _TILE_WIDE, _WS_THREADS_2, 16 * 4 + 16, 168, True, kind="ws", splitk=-2, defines=("L9_SK",),
        dyn_smem_bytes=_ws_dyn(4, _STAGE_WIDE, 2)),
    "l09_balanced": Level(
        9, "multi_consumer_balanced", "l09_multi_consumer.cu", "gemm_l09",
        "level 9 on the fewest CTAs that keep its number of rounds (8192^3: 128 CTAs x 16 tiles, 4 SMs idle)",
        "-", _TILE_WIDE, _WS_THREADS_2, 16 * 4, 168, True, kind="ws", grid_balance=True,
        dyn_smem_bytes=_ws_dyn(4, _STAGE_WIDE, 2)),
    "l09_coop_regstore": Level(
        9, "multi_consumer_coop_regstore", "l09_multi_consumer.cu", "gemm_l09",
        "level 9 cooperative with register stores instead of the TMA-store epilogue", "-", _TILE_WIDE,
        _WS_THREADS_2, 16 * 4, 168, True, kind="ws", cluster=2, defines=("LADDER_REG_STORE", "L9_CL=2"),
        grid_balance=True,
        dyn_smem_bytes=_ws_dyn(4, _STAGE_WIDE, 2, False)),
    "l07_regstore": Level(
        7, "warp_specialized_regstore", "l07_warp_specialized.cu", "gemm_l07",
        "level 7 with register stores instead of the TMA-store epilogue", "-", (128, 128, 64),
        _WS_THREADS_1, 16 * 6, 232, True, kind="ws", defines=("LADDER_REG_STORE",),
        dyn_smem_bytes=_ws_dyn(6, _STAGE_128, 1, False)),
    # mid shapes (128 < M <= 1024, < 2 waves of 128x256 tiles; notes/mid.md): the cooperative engine on
    # 128x192 / 128x128 / 128x96 tiles; `l09_mid` launches the MID_BUILDS entry ladder/mid.py predicts fastest
    "l09_n192": Level(
        9, "multi_consumer_n192", "l09_multi_consumer.cu", "gemm_l09",
        "level 9 cooperative on 128x192 tiles (two m64n192 consumers, 96 accumulators), 4 stages of 40 KiB", "-",
        (128, 192, 64), _WS_THREADS_2, 16 * 4, 168, True, kind="ws", defines=("L9_N192",),
        dyn_smem_bytes=_ws_dyn(4, _STAGE_N192, 2)),
    "l09_n192_cl2": Level(
        9, "multi_consumer_n192_cl2", "l09_multi_consumer.cu", "gemm_l09",
        "l09_n192 in 2-CTA clusters (B multicast in two 96-row halves)", "-",
        (128, 192, 64), _WS_THREADS_2, 16 * 4, 168, True, kind="ws", cluster=2, defines=("L9_N192", "L9_CL=2"),
        dyn_smem_bytes=_ws_dyn(4, _STAGE_N192, 2)),
    "l09_n192_sk": Level(
        9, "multi_consumer_n192_streamk", "l09_multi_consumer.cu", "gemm_l09",
        "l09_n192 with the stream-K tail (data-parallel whole waves, the last partial wave spread over the CTAs)", "-",
        (128, 192, 64), _WS_THREADS_2, 16 * 4 + 16, 168, True, kind="ws", splitk=-2, defines=("L9_N192", "L9_SK"),
        dyn_smem_bytes=_ws_dyn(4, _STAGE_N192, 2)),
    "l09_m128_cl2": Level(
        9, "multi_consumer_m128_cl2", "l09_multi_consumer.cu", "gemm_l09",
        "level 9 cooperative on 128x128 tiles (two m64n128 consumers), 6 stages, 2-CTA cluster, no split", "-",
        (128, 128, 64), _WS_THREADS_2, 16 * 6, 168, True, kind="ws", cluster=2, defines=("L9_M128", "L9_CL=2"),
        dyn_smem_bytes=_ws_dyn(6, _STAGE_128, 2)),
    "l09_m128": Level(
        9, "multi_consumer_m128", "l09_multi_consumer.cu", "gemm_l09",
        "level 9 cooperative on 128x128 tiles (two m64n128 consumers), 6 stages, no cluster, no split", "-",
        (128, 128, 64), _WS_THREADS_2, 16 * 6, 168, True, kind="ws", defines=("L9_M128",),
        dyn_smem_bytes=_ws_dyn(6, _STAGE_128, 2)),
    # 128x96 (notes/mid.md): 200x6144 on 128 CTAs of 12288 outputs (128x128: 96 of 16384); register stores
    "l09_n96": Level(
        9, "multi_consumer_n96", "l09_multi_consumer.cu", "gemm_l09",
        "level 9 cooperative on 128x96 tiles (two m64n96 consumers, 48 accumulators), 8 stages of 28 KiB, register stores",
        "-", (128, 96, 64), _WS_THREADS_2, 16 * 8, 168, True, kind="ws", defines=("L9_N96",),
        dyn_smem_bytes=_ws_dyn(8, _STAGE_N96, 2, False)),
    "l09_n96_cl2": Level(
        9, "multi_consumer_n96_cl2", "l09_multi_consumer.cu", "gemm_l09",
        "l09_n96 in 2-CTA clusters (B multicast in two 48-row halves)", "-", (128, 96, 64), _WS_THREADS_2,
        16 * 8, 168, True, kind="ws", cluster=2, defines=("L9_N96", "L9_CL=2"), dyn_smem_bytes=_ws_dyn(8, _STAGE_N96, 2, False)),
    "l09_mid": Level(
        9, "multi_consumer_mid", "l09_multi_consumer.cu", "gemm_l09",
        "mid shapes: per shape the build of mid.MID_BUILDS (128x256, 128x192, 128x128, 128x96; cluster 2 or 1) with the least "
        "predicted time of the calibrated wave model (ladder/mid.py); itself level 9's build", "-", _TILE_WIDE, _WS_THREADS_2, 16 * 4, 168,
        True, kind="ws", cluster=2, defines=("L9_CL=2",), grid_balance=True,
        dyn_smem_bytes=_ws_dyn(4, _STAGE_WIDE, 2), by_waves=True),
    # level 10's alternatives: 128-row tiles (two cooperative consumers), and no split (S = 1)
    "l10_streamk": Level(
        10, "splitk_decode_streamk", "l10_splitk.cu", "gemm_l10",
        "level 10's 64x128 build with a stream-K tail instead of a uniform split (any M)", "-", (64, 128, 64),
        _WS_THREADS_1, 16 * 8 + 16, 232, True, kind="ws", splitk=-2, defines=("L10_SK",),
        dyn_smem_bytes=_ws_dyn(8, _STAGE_64, 1)),
    "l10_m128": Level(
        10, "splitk_decode_m128", "l10_splitk.cu", "gemm_l10",
        "level 10 with 128x128 tiles (two cooperative consumers), split-K per shape, 6 stages", "-",
        (128, 128, 64), _WS_THREADS_2, 16 * 6 + 16, 168, True, kind="ws", splitk=-1,
        defines=("L10_M128",), dyn_smem_bytes=_ws_dyn(6, _STAGE_128, 2)),
    "l10_nosplit": Level(
        10, "splitk_decode_nosplit", "l10_splitk.cu", "gemm_l10",
        "level 10's 64x128 tiles with S = 1 (what split-K buys)", "-", (64, 128, 64), _WS_THREADS_1,
        16 * 8 + 16, 232, True, kind="ws", splitk=1, dyn_smem_bytes=_ws_dyn(8, _STAGE_64, 1)),
    "l10_n256": Level(
        10, "splitk_decode_n256", "l10_splitk.cu", "gemm_l10",
        "level 10 with 64x256 tiles (one m64n256 consumer), split-K per shape, 5 stages of 40 KiB", "-",
        (64, 256, 64), _WS_THREADS_1, 16 * 5 + 16, 232, True, kind="ws", splitk=-1,
        defines=("L10_N256",), dyn_smem_bytes=_ws_dyn(5, (64 * 64 + 256 * 64) * 2, 1)),
    # level 11's alternatives: W stored [E, K, N] (N contiguous: MN-major tiles, wgmma trans-a),
    # token chunks of 32 (one chunk) and of 8 (four chunks), and the fp8 build (grouped-fp8)
    "l11_wkn": Level(
        11, "grouped_decode_wkn", "l11_grouped_decode.cu", "gemm_l11",
        "level 11 with W [E, K, N] (N contiguous): a 3-D map, MN-major weight tiles (wgmma trans-a)", "-",
        (64, 32, 64), 256, 4368, 64, True, kind="grouped", contract="grouped-bf16", defines=("L11_WKN=1", "L11_TN=32", "L11_CH=1"),
        dyn_smem_bytes=16 * _L11_STAGE + 1024),
    # the first default build (two token chunks of 16); one chunk of 32 beat it on all six decode
    # cases of the H200 run (start3_where: 1.20-1.42x torch vs 1.07-1.31x) and is level 11 now
    "l11_tn16": Level(
        11, "grouped_decode_tn16", "l11_grouped_decode.cu", "gemm_l11",
        "level 11 with two token chunks of 16 (wgmma m64n16), its first default", "-", (64, 32, 64), 256, 4368, 64, True,
        kind="grouped", contract="grouped-bf16", defines=("L11_TN=16", "L11_CH=2"), dyn_smem_bytes=16 * _L11_STAGE + 1024),
    "l11_fp8_tn32": Level(
        11, "grouped_decode_fp8_tn32", "l11_grouped_decode.cu", "gemm_l11",
        "l11_fp8 with one token chunk of 32 (QGMMA m64n32k32)", "-",
        (64, 32, 128), 256, 4368, 72, True, kind="grouped", contract="grouped-fp8",
        defines=("L11_FP8=1", "L11_TN=32", "L11_CH=1"), dyn_smem_bytes=16 * _L11_STAGE + 1024),
    "l11_tn8": Level(
        11, "grouped_decode_tn8", "l11_grouped_decode.cu", "gemm_l11",
        "level 11 with four token chunks of 8 (wgmma m64n8)", "-", (64, 32, 64), 256, 4368, 64, True,
        kind="grouped", contract="grouped-bf16", defines=("L11_TN=8", "L11_CH=4"), dyn_smem_bytes=16 * _L11_STAGE + 1024),
    "l11_tn64": Level(
        11, "grouped_decode_tn64", "l11_grouped_decode.cu", "gemm_l11",
        "level 11 with one token chunk of 64 (wgmma m64n64), 12 stages of 16 KiB", "-", (64, 64, 64), 256, 4304, 72, True,
        kind="grouped", contract="grouped-bf16", defines=("L11_TN=64", "L11_CH=1", "L11_D=12"),
        dyn_smem_bytes=12 * (64 * 128 + 64 * 128) + 1024),
    "l11_fp8": Level(
        11, "grouped_decode_fp8", "l11_grouped_decode.cu", "gemm_l11",
        "level 11 in fp8 e4m3 (QGMMA m64n16k32, K stages of 128), scales sa[row] * sw[e, n] at the store", "-",
        (64, 32, 128), 256, 4368, 72, True, kind="grouped", contract="grouped-fp8", defines=("L11_FP8=1",),
        dyn_smem_bytes=16 * _L11_STAGE + 1024),
    "l12_m128n128": Level(
        12, "grouped_prefill_128x128", "l12_grouped_prefill.cu", "gemm_l12",
        "level 12 on 128x128 tiles (two cooperative m64n128 consumers), 6 stages", "-", (128, 128, 64),
        _WS_THREADS_2, 1136, 168, True, kind="ws", contract="grouped-bf16", defines=("L12_PP",),
        dyn_smem_bytes=_ws_dyn(6, _STAGE_128, 2)),
    # ping-pong builds of levels 12-13 (ws.cuh PINGPONG = 1; tile_mnk = one consumer's unit tile,
    # which is also the grouped list's m-tile): notes/l12.md, notes/l13.md say why these tiles
    "l12_pingpong": Level(
        12, "grouped_prefill_pingpong", "l12_grouped_prefill.cu", "gemm_l12",
        "level 12 ping-pong: the consumers alternate whole 64x256 units (m64n256; expert tails pad < 64 rows), 4 stages of 40 KiB",
        "-", (64, 256, 64), _WS_THREADS_2, 1120, 168, True, kind="ws", contract="grouped-bf16",
        defines=("L12_PINGPONG",), dyn_smem_bytes=_ws_dyn(4, (64 * 64 + 256 * 64) * 2, 2)),
    "l12_pingpong_m128": Level(
        12, "grouped_prefill_pingpong_128x128", "l12_grouped_prefill.cu", "gemm_l12",
        "level 12 ping-pong on 128x128 units (2 x m64n128 per consumer), 6 stages of 32 KiB", "-", (128, 128, 64),
        _WS_THREADS_2, 1152, 168, True, kind="ws", contract="grouped-bf16", defines=("L12_PINGPONG", "L12_PP_M128"),
        dyn_smem_bytes=_ws_dyn(6, _STAGE_128, 2)),
    "l12_fp8_pingpong": Level(
        12, "grouped_fp8_pingpong", "l12_grouped_prefill.cu", "gemm_l12",
        "l12_pingpong in fp8 e4m3 (QGMMA m64n256k32, K tiles of 128): 64x256 units, 4 stages of 40 KiB, "
        "scales sa[row] * sw[e, n] in the epilogue", "-", (64, 256, 128), _WS_THREADS_2, 1120, 168, True, kind="ws",
        contract="grouped-fp8", defines=("L12_PINGPONG", "L12_FP8"), dyn_smem_bytes=_ws_dyn(4, (64 * 64 + 256 * 64) * 2, 2)),
    "l15_pp_m128": Level(
        15, "grouped_fp8_prefill_pingpong_128x128", "l15_grouped_fp8_prefill.cu", "gemm_l15",
        "level 15 ping-pong: the consumers alternate whole 128x128 units (2 x m64n128k32), 6 stages of 32 KiB", "-",
        (128, 128, 128), _WS_THREADS_2, 1152, 168, True, kind="ws", contract="grouped-fp8", defines=("L15_PP_M128",),
        dyn_smem_bytes=_ws_dyn(6, _STAGE_128, 2)),
    "l15_m128n128": Level(
        15, "grouped_fp8_prefill_128x128", "l15_grouped_fp8_prefill.cu", "gemm_l15",
        "level 15 on 128x128 tiles (two cooperative m64n128k32 consumers), 6 stages of 32 KiB", "-",
        (128, 128, 128), _WS_THREADS_2, 1136, 168, True, kind="ws", contract="grouped-fp8", defines=("L15_M128N128",),
        dyn_smem_bytes=_ws_dyn(6, _STAGE_128, 2)),
    # round 6 (notes/l15.md): level 15's builds with the per-warp epilogue (ws.cuh EPI = 2): only the warp whose 16
    # rows cross the expert end stores from registers
    "l15_pp_m128_wepi": Level(
        15, "grouped_fp8_prefill_pingpong_128x128_warp_epilogue", "l15_grouped_fp8_prefill.cu", "gemm_l15",
        "l15_pp_m128 with the per-warp epilogue (each warp stages and stores its 16 rows, 16x64 boxes, no named barrier)", "-",
        (128, 128, 128), _WS_THREADS_2, 1152, 168, True, kind="ws", contract="grouped-fp8", defines=("L15_PP_M128", "L15_WEPI"),
        dyn_smem_bytes=_ws_dyn(6, _STAGE_128, 2)),
    "l15_wepi": Level(
        15, "grouped_fp8_prefill_warp_epilogue", "l15_grouped_fp8_prefill.cu", "gemm_l15",
        "level 15 (cooperative 128x256) with the per-warp epilogue", "-", (128, 256, 128), _WS_THREADS_2, 1104, 168, True,
        kind="ws", contract="grouped-fp8", defines=("L15_WEPI",), dyn_smem_bytes=_ws_dyn(4, _STAGE_WIDE, 2)),
    "l13_pingpong": Level(
        13, "fp8_pingpong", "l13_fp8.cu", "gemm_l13",
        "level 13 ping-pong: the consumers alternate whole 128x128 units (2 x m64n128k32), 6 stages of 32 KiB, 2-CTA cluster",
        "-", (128, 128, 128), _WS_THREADS_2, 112, 168, True, kind="ws", cluster=2, contract="gemm-fp8",
        defines=("L13_PINGPONG",), grid_balance=True, dyn_smem_bytes=_ws_dyn(6, _STAGE_128, 2)),
    "l13_pingpong_wide": Level(
        13, "fp8_pingpong_wide", "l13_fp8.cu", "gemm_l13",
        "level 13 ping-pong on 64x256 units (m64n256k32), 4 stages of 40 KiB, 2-CTA cluster", "-", (64, 256, 128),
        _WS_THREADS_2, 80, 168, True, kind="ws", cluster=2, contract="gemm-fp8",
        defines=("L13_PINGPONG", "L13_PP_WIDE"), grid_balance=True,
        dyn_smem_bytes=_ws_dyn(4, (64 * 64 + 256 * 64) * 2, 2)),
    # round 6 (notes/l13.md): level 13 with the per-warp epilogue (ws.cuh EPI = 2: each warp stages and stores its
    # own 16 rows, 16x64 boxes double-buffered, no named barrier; the C map's box is 16 rows), with the stream-K
    # tail in the 2-CTA cluster (all 132 SMs; partials per CTA rank, the scales after the sum), and both
    "l13_wepi": Level(
        13, "fp8_warp_epilogue", "l13_fp8.cu", "gemm_l13",
        "level 13 with the per-warp epilogue: each warp stages and TMA-stores its own 16 rows (16x64 boxes, double-buffered), no named barrier",
        "-", (128, 256, 128), _WS_THREADS_2, 64, 168, True, kind="ws", cluster=2, contract="gemm-fp8",
        defines=("L13_WEPI",), grid_balance=True, dyn_smem_bytes=_ws_dyn(4, _STAGE_WIDE, 2)),
    "l13_sk": Level(
        13, "fp8_streamk", "l13_fp8.cu", "gemm_l13",
        "level 13 with a stream-K tail in the 2-CTA cluster: whole waves of 256x256 cluster tiles, the last partial wave's "
        "K iterations over every cluster (132 SMs), scales after the sum", "-", (128, 256, 128), _WS_THREADS_2, 80, 168, False,
        kind="ws", cluster=2, splitk=-2, contract="gemm-fp8", defines=("L13_SK",), dyn_smem_bytes=_ws_dyn(4, _STAGE_WIDE, 2)),
    "l13_sk_wepi": Level(
        13, "fp8_streamk_warp_epilogue", "l13_fp8.cu", "gemm_l13",
        "l13_sk with the per-warp epilogue of l13_wepi", "-", (128, 256, 128), _WS_THREADS_2, 80, 168, True,
        kind="ws", cluster=2, splitk=-2, contract="gemm-fp8", defines=("L13_SK", "L13_WEPI"),
        dyn_smem_bytes=_ws_dyn(4, _STAGE_WIDE, 2)),
    # round 7 (notes/l13.md, l15.md): the unit's column scales staged in shared memory once per unit by warp 1 of the
    # producer warpgroup (ws.cuh SSC = 1, WsBuild stage_scales): the TMA-store staging reads one 8-byte shared load per
    # column pair instead of two __ldg (the long-scoreboard stall of round 5's ncu); one slot, mbarrier pairs by unit parity
    "l13_ssc": Level(
        13, "fp8_staged_scales", "l13_fp8.cu", "gemm_l13",
        "level 13 with the column scales staged in shared memory once per unit by a producer warp", "-", (128, 256, 128),
        _WS_THREADS_2, 1120, 168, True, kind="ws", cluster=2, contract="gemm-fp8", defines=("L13_SSC",),
        grid_balance=True, dyn_smem_bytes=_ws_dyn(4, _STAGE_WIDE, 2)),
    "l15_pp_m128_ssc": Level(
        15, "grouped_fp8_prefill_pingpong_128x128_staged_scales", "l15_grouped_fp8_prefill.cu", "gemm_l15",
        "l15_pp_m128 with the unit's column scales sw[e, n] staged in shared memory once per unit by a producer warp", "-",
        (128, 128, 128), _WS_THREADS_2, 1696, 168, True, kind="ws", contract="grouped-fp8",
        defines=("L15_PP_M128", "L15_SSC"), dyn_smem_bytes=_ws_dyn(6, _STAGE_128, 2)),
    # round 7 (notes/l15.md), NOT yet run on the device: l15_pp_m128 with the tile list walked in pairs of consecutive tiles
    # per CTA (ws.cuh PAIRS = 1, WsBuild unit_pairs): two m-tiles of one weight block on one SM back to back
    "l15_pp_m128_pairs": Level(
        15, "grouped_fp8_prefill_pingpong_128x128_paired_units", "l15_grouped_fp8_prefill.cu", "gemm_l15",
        "l15_pp_m128 with consecutive tiles in pairs per CTA (two m-tiles of a weight block on one SM, one per consumer)", "-",
        (128, 128, 128), _WS_THREADS_2, 1152, 168, True, kind="ws", contract="grouped-fp8",
        defines=("L15_PP_M128", "L15_PAIRS"), dyn_smem_bytes=_ws_dyn(6, _STAGE_128, 2)),
    "l13_nocluster": Level(
        13, "fp8_nocluster", "l13_fp8.cu", "gemm_l13",
        "level 13 without the cluster", "-", (128, 256, 128), _WS_THREADS_2, 64, 168, False, kind="ws",
        contract="gemm-fp8", defines=("L13_CL=1",), grid_balance=True, dyn_smem_bytes=_ws_dyn(4, _STAGE_WIDE, 2)),
}


def levels_for(contract: str, levels=None) -> tuple[Level, ...]:
    """The levels (default: LEVELS) that solve `contract` (contracts.CONTRACTS)."""
    return tuple(lv for lv in (LEVELS if levels is None else levels) if lv.contract == contract)


DENSE_LEVELS = levels_for("gemm-bf16")   # levels 1-10: what the dense bench, check and dispatch run


def get_level(level_id: int | str) -> Level:
    """A level by its id (int or digits), or a named build of one (a VARIANTS key: what a dispatch
    row's "build" names when a variant measured best)."""
    if isinstance(level_id, str) and not level_id.isdigit():
        if level_id in VARIANTS:
            return VARIANTS[level_id]
        raise KeyError(f"no ladder level or build {level_id!r}; builds: {sorted(VARIANTS)}")
    for lv in LEVELS:
        if lv.id == int(level_id):
            return lv
    raise KeyError(f"no ladder level {level_id}; known: {[lv.id for lv in LEVELS]}")


def build_key(level: Level) -> str | None:
    """The VARIANTS key of a named build, None for a level's own build."""
    return next((k for k, v in VARIANTS.items() if v == level), None)


def build_of_row(level_id: int, name: str) -> str | None:
    """The build a bench row timed (its level id and Level.name): None for the level's own build."""
    if get_level(level_id).name == name:
        return None
    return next((k for k, v in VARIANTS.items() if v.id == level_id and v.name == name), None)


def _smem_text(lv: Level) -> str:
    if not lv.dyn_smem_bytes:
        return f"{lv.smem_bytes // 1024} KiB"
    return f"{lv.total_smem_bytes / 1024:.0f} KiB (dynamic {lv.dyn_smem_bytes})"


def render_markdown_table() -> str:
    """The README's level table, generated from LEVELS."""
    rows = ["| level | file | contract | what it adds | tile (MxNxK) | threads | smem | regs <= | no spills | shapes |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for lv in LEVELS:
        t = "x".join(map(str, lv.tile_mnk))
        rows.append(f"| {lv.id} | `kernels/sm90/{lv.file}` | {lv.contract} | {lv.adds} | {t} | {lv.threads} | "
                    f"{_smem_text(lv)} | {lv.regs_max} | {'yes' if lv.no_spills else 'no'} | "
                    f"{lv.domain_text()} |")
    return "\n".join(rows)
