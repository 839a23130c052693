// Level 3: level 2 over a grid: CTA (x, y) computes C tile rows [128y, 128y+128) x cols
// [128x, 128x+128); any M, N, K >= 1. The copies mask rows >= M (A) and >= N (B) and columns
// >= K; the store masks rows >= M and columns >= N, so edge tiles are correct and no byte
// outside C is touched. Still synchronous: copy, then MMA, then copy.
//
// LADDER_BUG_SKIP_LAST_KTILE (defined only by the harness's deliberately wrong variant) drops
// the last K tile: the check must catch it.
#include "common.cuh"
using namespace ladder;

extern "C" __global__ void __launch_bounds__(THREADS)
gemm_l03(const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, bf16_t* __restrict__ C,
         int M, int N, int K) {
  __shared__ __align__(1024) bf16_t sA[BM * BK];
  __shared__ __align__(1024) bf16_t sB[BN * BK];
  const int tid = threadIdx.x, wg = tid >> 7, tid_wg = tid & 127;
  if (tid == 0 && ((smem_u32(sA) | smem_u32(sB)) & 1023u)) __trap();
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;

  float acc[ACC_REGS];
#pragma unroll
  for (int i = 0; i < ACC_REGS; ++i) acc[i] = 0.f;

  int nkt = (K + BK - 1) / BK;
#ifdef LADDER_BUG_SKIP_LAST_KTILE
  if (nkt > 1) --nkt;
#endif
  for (int kt = 0; kt < nkt; ++kt) {
    if (kt > 0) __syncthreads();
    load_ab_tiles(sA, A, M, row0, sB, B, N, col0, K, kt * BK, tid);
    fence_proxy_async_smem();
    __syncthreads();
    wgmma_fence();
    mma_ktile(acc, sA + wg * 64 * BK, sB, kt == 0);
    wgmma_commit();
    wgmma_wait<0>();
  }

  store_acc(acc, C, M, N, row0 + wg * 64, col0, tid_wg);
}
