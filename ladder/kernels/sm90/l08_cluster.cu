// Level 8: level 7 in 2-CTA clusters (__cluster_dims__(2,1,1)). The two CTAs of a cluster take
// the two M-adjacent 128x128 tiles of a 256x128 cluster tile and share its B tile: CTA rank r
// loads B rows [64r, 64r+64) of the stage with one TMA multicast to both CTAs (B read from L2
// once per cluster), A for itself. Consumers release a stage on their own and on the peer's
// empty mbarrier (mapa + remote arrive); cluster barrier after init and before exit. ws_cluster.cuh.
#include "common.cuh"
#include "ws.cuh"
#include "ws_cluster.cuh"
#ifndef L8_D
#define L8_D 6
#endif
// level 7's build + what level 8 adds: a 2-CTA cluster (the tile groups count cluster rows: 8 x 2)
struct L8 : ladder::WsBuild {
  static constexpr int consumers = 1, m64_slabs = 2, tile_n = 128, stages = L8_D;
  using cluster = ladder::Multicast2;   // ws_cluster.cuh
  static constexpr int group_rows = 8;
};
LADDER_WS_LEVEL(gemm_l08, L8)
#ifdef LADDER_EXPECT_DYN_SMEM
static_assert(gemm_l08_cfg::DYN_SMEM == LADDER_EXPECT_DYN_SMEM, "registry dyn_smem_bytes != kernel DYN_SMEM");
#endif
