// Level 8: level 7 in 2-CTA clusters (__cluster_dims__(2,1,1)). The two CTAs of a cluster take
// the two M-adjacent 128x128 tiles of a 256x128 cluster tile and share its B tile: CTA rank r
// loads B rows [64r, 64r+64) of the stage with one TMA multicast to both CTAs (B read from L2
// once per cluster), A for itself. Consumers release a stage on their own and on the peer's
// empty mbarrier (mapa + remote arrive); cluster barrier after init and before exit. ws.cuh.
#include "common.cuh"
#include "ws.cuh"
#ifndef L8_D
#define L8_D 6
#endif
LADDER_WS_KERNEL(gemm_l08, 1, 0, 2, 128, L8_D, 2, 0, 8, LADDER_EPI)
#ifdef LADDER_EXPECT_DYN_SMEM
static_assert(gemm_l08_cfg::DYN_SMEM == LADDER_EXPECT_DYN_SMEM, "registry dyn_smem_bytes != kernel DYN_SMEM");
#endif
