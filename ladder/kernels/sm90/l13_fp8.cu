// Level 13: fp8 e4m3 dense GEMM, level 9's engine in fp8 (ws.cuh FP8 = 1): QGMMA
// wgmma.m64n256k32.f32.e4m3.e4m3, a K tile of 128 fp8 elements (the same 128-byte swizzled rows,
// the same +32-byte descriptor steps as bf16), TMA maps of uint8; two cooperative consumers on a
// 128x256 tile, 4 stages, 2-CTA cluster (B multicast). Epilogue: C = acc * sa[row] * sb[col]
// (torch._scaled_mm with rowwise A scales and colwise B scales), bf16 out. One wgmma accumulation
// in fp32 (Hopper's fp8 tensor-core accumulation, as torch._scaled_mm with use_fast_accum=True).
// -DL13_PINGPONG: ping-pong consumers (ws.cuh PINGPONG = 1: one consumer's epilogue under the
// other's main loop), each on whole 128x128 units (2 x m64n128k32, 128 accumulators), 6 stages of
// 32 KiB; with -DL13_PP_WIDE 64x256 units (m64n256k32), 4 stages of 40 KiB.
// Round 6 (notes/l13.md), each alone or together: -DL13_WEPI: the per-warp epilogue (ws.cuh EPI = 2:
// each warp stages and TMA-stores its own 16 rows, 16x64 boxes double-buffered in its 4 KiB of the
// staging, no named barrier); -DL13_SK: the stream-K tail (ws.cuh SPLITK = 2) in the 2-CTA cluster:
// whole waves of cluster tiles data-parallel, the last partial wave's K iterations spread over every
// cluster (all 132 SMs), partials per CTA rank in the workspace, the scales applied after the sum.
#include "common.cuh"
#include "ws.cuh"
#ifndef L13_CL
#define L13_CL 2
#endif
// level 9's build (cooperative 128x256, 4 stages) + what level 13 adds: fp8, in a 2-CTA cluster
#ifdef L13_WEPI
#define L13_EPI 2
#else
#define L13_EPI LADDER_EPI
#endif
#ifdef L13_SK
#define L13_SPLIT 2
#else
#define L13_SPLIT 0
#endif
#ifdef L13_SSC
#define L13_STAGE_SCALES 1
#else
#define L13_STAGE_SCALES 0
#endif
struct L13Base : ladder::WsBuild {
  static constexpr int cluster = L13_CL, group_rows = 16 / L13_CL, fp8 = 1;
  static constexpr int tma_store = L13_EPI, splitk = L13_SPLIT;   // round-6 variants; level 13: 1, 0
  static constexpr int stage_scales = L13_STAGE_SCALES;          // round-7 variant; level 13: 0
};
#if defined(L13_PINGPONG) && defined(L13_PP_WIDE)
struct L13 : L13Base { static constexpr int pingpong = 1; };                                      // ping-pong 64x256, 4 stages
#elif defined(L13_PINGPONG)
struct L13 : L13Base { static constexpr int pingpong = 1, m64_slabs = 2, tile_n = 128, stages = 6; };   // ping-pong 128x128, 6 stages
#else
struct L13 : L13Base {};
#endif
LADDER_WS_LEVEL_X(gemm_l13, L13)
#ifdef LADDER_EXPECT_DYN_SMEM
static_assert(gemm_l13_cfg::DYN_SMEM == LADDER_EXPECT_DYN_SMEM, "registry dyn_smem_bytes != kernel DYN_SMEM");
#endif
