// Level 14: fp8 e4m3 for decode shapes: level 10's build (producer + one consumer on 64x128
// tiles, 8 stages, split-K chosen per shape by gpu.splitk_plan, partials in an fp32 workspace)
// in fp8 (ws_fp8.cuh: QGMMA m64n128k32, K tiles of 128 elements); the scales are applied
// once, after the split-K reduction (ws_fp8.cuh Fp8::apply). Level 13 says the fp8 contract.
#include "common.cuh"
#include "ws.cuh"
#include "ws_splitk.cuh"
#include "ws_fp8.cuh"
// level 10's build + what level 14 adds: fp8 (QGMMA m64n128k32, scales after the split-K reduction)
struct L14 : ladder::WsBuild {
  static constexpr int consumers = 1, tile_n = 128, stages = 8;
  using split = ladder::SplitK;
  using numerics = ladder::Fp8;   // ws_fp8.cuh
};
LADDER_WS_LEVEL_X(gemm_l14, L14)
#ifdef LADDER_EXPECT_DYN_SMEM
static_assert(gemm_l14_cfg::DYN_SMEM == LADDER_EXPECT_DYN_SMEM, "registry dyn_smem_bytes != kernel DYN_SMEM");
#endif
