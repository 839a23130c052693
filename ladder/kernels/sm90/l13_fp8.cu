// Level 13: fp8 e4m3 dense GEMM, level 9's engine in fp8 (ws_fp8.cuh Fp8): QGMMA
// wgmma.m64n256k32.f32.e4m3.e4m3, a K tile of 128 fp8 elements (the same 128-byte swizzled rows,
// the same +32-byte descriptor steps as bf16), TMA maps of uint8; two cooperative consumers on a
// 128x256 tile, 4 stages, 2-CTA cluster (B multicast). Epilogue: C = acc * sa[row] * sb[col]
// (torch._scaled_mm with rowwise A scales and colwise B scales), bf16 out. One wgmma accumulation
// in fp32 (Hopper's fp8 tensor-core accumulation, as torch._scaled_mm with use_fast_accum=True).
// -DL13_PINGPONG: ping-pong consumers (ws_pingpong.cuh PingPong: one consumer's epilogue under the
// other's main loop), each on whole 128x128 units (2 x m64n128k32, 128 accumulators), 6 stages of
// 32 KiB; with -DL13_PP_WIDE 64x256 units (m64n256k32), 4 stages of 40 KiB.
// Round 6 (notes/l13.md), each alone or together: -DL13_WEPI: the per-warp epilogue (ws_epi_warp.cuh EpiPerWarp:
// each warp stages and TMA-stores its own 16 rows, 16x64 boxes double-buffered in its 4 KiB of the
// staging, no named barrier); -DL13_SK: the stream-K tail (ws_splitk.cuh StreamK) in the 2-CTA cluster:
// whole waves of cluster tiles data-parallel, the last partial wave's K iterations spread over every
// cluster (all 132 SMs), partials per CTA rank in the workspace, the scales applied after the sum.
#include "common.cuh"
#include "ws.cuh"
#include "ws_cluster.cuh"
#include "ws_fp8.cuh"
// the round-6/7 variants' policies
#include "ws_pingpong.cuh"
#include "ws_splitk.cuh"
#include "ws_epi_warp.cuh"
#include "ws_fp8_ssc.cuh"
#ifndef L13_CL
#define L13_CL 2
#endif
#if L13_CL == 2
#define L13_CLUSTER ladder::Multicast2
#else
#define L13_CLUSTER ladder::NoCluster
#endif
// level 9's build (cooperative 128x256, 4 stages, 2-CTA cluster) + what level 13 adds: fp8
struct L13Base : ladder::WsBuild {
  using cluster = L13_CLUSTER;
  static constexpr int group_rows = 16 / L13_CL;
#ifdef L13_SSC
  using numerics = ladder::Fp8StagedScales;   // round-7 variant (ws_fp8_ssc.cuh)
#else
  using numerics = ladder::Fp8;   // ws_fp8.cuh: what level 13 adds
#endif
#ifdef L13_WEPI
  using epilogue = ladder::EpiPerWarp;   // round-6 variant (ws_epi_warp.cuh)
#endif
#ifdef L13_SK
  using split = ladder::StreamK;   // round-6 variant (ws_splitk.cuh)
#endif
};
#if defined(L13_PINGPONG) && defined(L13_PP_WIDE)
struct L13 : L13Base { using consumer_mode = ladder::PingPong; };                                      // ping-pong 64x256, 4 stages
#elif defined(L13_PINGPONG)
struct L13 : L13Base { using consumer_mode = ladder::PingPong; static constexpr int m64_slabs = 2, tile_n = 128, stages = 6; };   // ping-pong 128x128, 6 stages
#else
struct L13 : L13Base {};
#endif
LADDER_WS_LEVEL_X(gemm_l13, L13)
#ifdef LADDER_EXPECT_DYN_SMEM
static_assert(gemm_l13_cfg::DYN_SMEM == LADDER_EXPECT_DYN_SMEM, "registry dyn_smem_bytes != kernel DYN_SMEM");
#endif
