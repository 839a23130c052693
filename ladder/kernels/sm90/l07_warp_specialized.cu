// Level 7: warp specialization. Level 6's persistent grouped walk, now with a PRODUCER
// warpgroup (one thread issues every TMA load; setmaxnreg.dec to 40 registers) and one CONSUMER
// warpgroup (setmaxnreg.inc to 232; waits on the stage's full mbarrier by parity, issues wgmma,
// releases the stage on its empty mbarrier, stores the tile). The consumer owns the whole
// 128x128 tile: two m64n128k16 per K step (128 fp32 accumulators per thread). 6 stages of
// 32 KiB. The template and its ledger: ws.cuh.
#include "common.cuh"
#include "ws.cuh"
#ifndef L7_D
#define L7_D 6
#endif
// what level 7 sets (ws.cuh WsBuild has the rest): one consumer owning a 128x128 tile as two m64 slabs
struct L7 : ladder::WsBuild {
  static constexpr int consumers = 1, m64_slabs = 2, tile_n = 128, stages = L7_D;
};
LADDER_WS_LEVEL(gemm_l07, L7)
#ifdef LADDER_EXPECT_DYN_SMEM
static_assert(gemm_l07_cfg::DYN_SMEM == LADDER_EXPECT_DYN_SMEM, "registry dyn_smem_bytes != kernel DYN_SMEM");
#endif
