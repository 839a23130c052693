// Level 10: the serving-shape level. Decode GEMMs (small M) have few output tiles: 64x4096 is
// 16 tiles of 128x256, 132 SMs. Level 10 = level 7's warp-specialized persistent kernel with a
// 64-row tile (one consumer warpgroup, one m64n128k16 per K step: no M padding beyond 64) and
// split-K: a unit is (64x128 tile, K split); the launcher picks the split count S from the
// shape (gpu.splitk_plan) so that the units fill the SMs; partials meet in an fp32 workspace,
// the last split of a tile adds them and writes C (ws.cuh). 8 stages of 24 KiB keep ~190 KiB of
// B in flight per SM. -DL10_M128: 128x128 tiles, two cooperative consumers, 6 stages: the
// launcher uses it for M > 64 (registry by_m). -DL10_N256: 64x256 tiles (m64n256), 5 stages.
#include "common.cuh"
#include "ws.cuh"
#include "ws_splitk.cuh"
// what level 10 sets: one consumer on 64x128 tiles, 8 stages, split-K (the launcher picks the splits)
struct L10Base : ladder::WsBuild {
  static constexpr int consumers = 1, tile_n = 128, stages = 8;
  using split = ladder::SplitK;   // ws_splitk.cuh
};
#if defined(L10_M128)
struct L10 : L10Base { static constexpr int consumers = 2, stages = 6; };   // 128x128, two cooperative consumers
#elif defined(L10_N256)
struct L10 : L10Base { static constexpr int tile_n = 256, stages = 5; };    // 64x256 (m64n256)
#elif defined(L10_SK)
struct L10 : L10Base { using split = ladder::StreamK; };                    // stream-K tail (ws_splitk.cuh)
#else
struct L10 : L10Base {};
#endif
LADDER_WS_LEVEL(gemm_l10, L10)
#ifdef LADDER_EXPECT_DYN_SMEM
static_assert(gemm_l10_cfg::DYN_SMEM == LADDER_EXPECT_DYN_SMEM, "registry dyn_smem_bytes != kernel DYN_SMEM");
#endif
