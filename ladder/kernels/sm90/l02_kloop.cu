// Level 2: level 1 plus a loop over K in 64-wide tiles (M <= 128, N <= 128, any K >= 1).
// The first k16 step of the first K tile overwrites the accumulator (scale-d = 0); every later
// step accumulates. The last K tile may be partial: the copy zero-fills K columns >= K, so the
// padded products add +0. Each tile is loaded, fenced, consumed and waited on before the next
// one overwrites shared memory (no overlap yet: that is level 5's job).
#include "common.cuh"
using namespace ladder;

extern "C" __global__ void __launch_bounds__(THREADS)
gemm_l02(const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, bf16_t* __restrict__ C,
         int M, int N, int K) {
  __shared__ __align__(1024) bf16_t sA[BM * BK];
  __shared__ __align__(1024) bf16_t sB[BN * BK];
  const int tid = threadIdx.x, wg = tid >> 7, tid_wg = tid & 127;
  if (tid == 0 && ((smem_u32(sA) | smem_u32(sB)) & 1023u)) __trap();

  float acc[ACC_REGS];
#pragma unroll
  for (int i = 0; i < ACC_REGS; ++i) acc[i] = 0.f;

  const int nkt = (K + BK - 1) / BK;
  for (int kt = 0; kt < nkt; ++kt) {
    if (kt > 0) __syncthreads();  // both warpgroups' wgmmas of the last tile are complete (waited)
    load_ab_tiles(sA, A, M, 0, sB, B, N, 0, K, kt * BK, tid);
    fence_proxy_async_smem();
    __syncthreads();
    wgmma_fence();
    mma_ktile(acc, sA + wg * 64 * BK, sB, kt == 0);
    wgmma_commit();
    wgmma_wait<0>();
  }

  store_acc(acc, C, M, N, wg * 64, 0, tid_wg);
}
