// Level 9: two consumer warpgroups (384 threads: producer + 2 consumers), persistent, built on
// level 7 (level 8's cluster lost on the device: notes/l08.md; -DL9_CL=2 puts it back).
// Shipped: COOPERATIVE, the two consumers split a 128x256 tile by rows (64x256 each, wgmma
// m64n256k16, 128 accumulators), 4 stages of 48 KiB + 2 x 16 KiB epilogue staging.
// -DL9_PINGPONG: the consumers alternate whole 128x128 tiles (one's epilogue under the other's
// main loop), 6 stages of 32 KiB; with -DL9_PP_WIDE 64x256 tiles (m64n256, 4 stages of 40 KiB).
// -DL9_N192 / -DL9_M128 / -DL9_N96: the cooperative engine on 128x192 / 128x128 / 128x96 tiles
// (mid shapes, notes/mid.md; 128x96 with register stores).
// notes/l09.md says which was kept and why. The template: ws.cuh.
#include "common.cuh"
#include "ws.cuh"
#ifndef L9_CL
#define L9_CL 1
#endif
#ifdef L9_SK
#define L9_SPLIT 2   // -DL9_SK: the stream-K tail (ws.cuh): the last partial wave's K iterations spread over all CTAs
#else
#define L9_SPLIT 0
#endif
#if defined(L9_N192)
// mid shapes (notes/mid.md): cooperative 128x192 (m64n192, 96 accumulators), 4 stages of 40 KiB
LADDER_WS_KERNEL(gemm_l09, 2, 0, 1, 192, 4, L9_CL, L9_SPLIT, 16 / L9_CL, LADDER_EPI)
#elif defined(L9_N96)
// mid shapes (notes/mid.md): cooperative 128x96 (m64n96, 48 accumulators), 8 stages of 28 KiB,
// register-store epilogue (EPI = 0: 96 columns are not whole 64-column TMA store boxes)
LADDER_WS_KERNEL(gemm_l09, 2, 0, 1, 96, 8, L9_CL, L9_SPLIT, 16 / L9_CL, 0)
#elif defined(L9_M128)
// mid shapes (notes/mid.md): cooperative 128x128 (m64n128), 6 stages of 32 KiB, no split
LADDER_WS_KERNEL(gemm_l09, 2, 0, 1, 128, 6, L9_CL, L9_SPLIT, 16 / L9_CL, LADDER_EPI)
#elif defined(L9_PINGPONG) && defined(L9_PP_WIDE)
LADDER_WS_KERNEL(gemm_l09, 2, 1, 1, 256, 4, L9_CL, 0, 16 / L9_CL, LADDER_EPI)
#elif defined(L9_PINGPONG)
LADDER_WS_KERNEL(gemm_l09, 2, 1, 2, 128, 6, L9_CL, 0, 16 / L9_CL, LADDER_EPI)
#else
LADDER_WS_KERNEL(gemm_l09, 2, 0, 1, 256, 4, L9_CL, L9_SPLIT, 16 / L9_CL, LADDER_EPI)
#endif
#ifdef LADDER_EXPECT_DYN_SMEM
static_assert(gemm_l09_cfg::DYN_SMEM == LADDER_EXPECT_DYN_SMEM, "registry dyn_smem_bytes != kernel DYN_SMEM");
#endif
