// Level 13: fp8 e4m3 dense GEMM, level 9's engine in fp8 (ws.cuh FP8 = 1): QGMMA
// wgmma.m64n256k32.f32.e4m3.e4m3, a K tile of 128 fp8 elements (the same 128-byte swizzled rows,
// the same +32-byte descriptor steps as bf16), TMA maps of uint8; two cooperative consumers on a
// 128x256 tile, 4 stages, 2-CTA cluster (B multicast). Epilogue: C = acc * sa[row] * sb[col]
// (torch._scaled_mm with rowwise A scales and colwise B scales), bf16 out. One wgmma accumulation
// in fp32 (Hopper's fp8 tensor-core accumulation, as torch._scaled_mm with use_fast_accum=True).
#include "common.cuh"
#include "ws.cuh"
#ifndef L13_CL
#define L13_CL 2
#endif
LADDER_WS_KERNEL_X(gemm_l13, 2, 0, 1, 256, 4, L13_CL, 0, 16 / L13_CL, LADDER_EPI, 1, 0)
#ifdef LADDER_EXPECT_DYN_SMEM
static_assert(gemm_l13_cfg::DYN_SMEM == LADDER_EXPECT_DYN_SMEM, "registry dyn_smem_bytes != kernel DYN_SMEM");
#endif
