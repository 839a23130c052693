// Level 15: fp8 grouped GEMM for MoE prefill (hundreds of rows per expert), the
// torch._scaled_grouped_mm contract (grouped-fp8): C[R, N] = (A_e W_e^T) * sa[row] * sw[e, n], A [R, K]
// e4m3 rows sorted by expert, offs [E] int32 row ends, W [E, N, K] e4m3, bf16 out.
// What it adds to the levels below: level 12's grouped tile list (m-tiles fastest per expert, listed
// on the device from the offsets) with level 13's fp8 main loop (QGMMA m64n256k32, a K tile of 128
// one-byte elements in the same 128-byte swizzled rows) on level 12's large cooperative tile: two
// consumer warpgroups on 128x256 (4 stages of 48 KiB); the row scale sa[global row] and the unit's
// expert column scale sw[e * N + n] are applied in the epilogue (the TMA store's staging for whole
// 64-row slabs, masked register stores for the slab that crosses the expert's end). Level 12's fp8
// build (`l12_fp8_pingpong`, 64x256 ping-pong units) is the decode engine; at prefill a 64-row unit
// reads each weight tile twice as often per output row as a 128-row tile (notes/l15.md).
// -DL15_PP_M128: ping-pong consumers on whole 128x128 units (2 x m64n128k32), 6 stages of 32 KiB
// (one consumer's epilogue under the other's main loop: the short-K down projection).
// -DL15_M128N128: the cooperative engine on 128x128 tiles, 6 stages.
// -DL15_WEPI (with any of them; round 6, notes/l15.md): the per-warp epilogue (ws_epi_warp.cuh EpiPerWarp): each warp
// stages and TMA-stores its own 16 rows (16x64 boxes, double-buffered), no named barrier, and only the
// warp whose 16 rows cross the expert end stores from registers.
// -DL15_SSC (round 7, notes/l15.md): the unit's column scales sw[e, n0..n0+UN) staged in shared memory by a
// producer warp (ws_fp8_ssc.cuh Fp8StagedScales) instead of two __ldg per column pair in the staging.
// -DL15_PAIRS (round 7, NOT yet measured): a CTA takes consecutive tiles of the list in pairs (ws_grouped.cuh GroupedPairs,
// `using tiles`): two m-tiles of one weight block on one SM back to back (ping-pong: one per consumer).
#include "common.cuh"
#include "ws.cuh"
#include "ws_grouped.cuh"
#include "ws_fp8.cuh"
// the variants' policies
#include "ws_pingpong.cuh"
#include "ws_epi_warp.cuh"
#include "ws_fp8_ssc.cuh"

// level 12's build (grouped tile list, cooperative 128x256, 4 stages of 48 KiB) + level 13's fp8 main loop
struct L15Base : ladder::WsBuild {
#ifdef L15_PAIRS
  using tiles = ladder::GroupedPairs;   // round-7 variant: consecutive tiles in pairs (ws_grouped.cuh)
#else
  using tiles = ladder::GroupedTiles;   // level 12's grouped tile list (ws_grouped.cuh)
#endif
#ifdef L15_SSC
  using numerics = ladder::Fp8StagedScales;   // round-7 variant (ws_fp8_ssc.cuh)
#else
  using numerics = ladder::Fp8;         // level 13's fp8 (ws_fp8.cuh)
#endif
#ifdef L15_WEPI
  using epilogue = ladder::EpiPerWarp;  // round-6 variant (ws_epi_warp.cuh)
#endif
};
#if defined(L15_PP_M128)
struct L15 : L15Base { using consumer_mode = ladder::PingPong; static constexpr int m64_slabs = 2, tile_n = 128, stages = 6; };   // ping-pong 128x128 units
#elif defined(L15_M128N128)
struct L15 : L15Base { static constexpr int tile_n = 128, stages = 6; };                           // cooperative 128x128
#else
struct L15 : L15Base {};
#endif
LADDER_WS_LEVEL_X(gemm_l15, L15)
#ifdef LADDER_EXPECT_DYN_SMEM
static_assert(gemm_l15_cfg::DYN_SMEM == LADDER_EXPECT_DYN_SMEM, "registry dyn_smem_bytes != kernel DYN_SMEM");
#endif
