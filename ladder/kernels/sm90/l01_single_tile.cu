// Level 1: one 128x128 output tile, one 64-wide K tile (M <= 128, N <= 128, K <= 64).
// Synchronous global->shared copies (masked, zero-filled, 128B-swizzled), a fence for the async
// proxy, four wgmma m64n128k16 per warpgroup, accumulators stored straight from registers.
// Contract and layouts: common.cuh.
#include "common.cuh"
using namespace ladder;

extern "C" __global__ void __launch_bounds__(THREADS)
gemm_l01(const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, bf16_t* __restrict__ C,
         int M, int N, int K) {
  __shared__ __align__(1024) bf16_t sA[BM * BK];
  __shared__ __align__(1024) bf16_t sB[BN * BK];
  const int tid = threadIdx.x, wg = tid >> 7, tid_wg = tid & 127;
  if (tid == 0 && ((smem_u32(sA) | smem_u32(sB)) & 1023u)) __trap();  // swizzle atoms need 1 KiB alignment

  float acc[ACC_REGS];
#pragma unroll
  for (int i = 0; i < ACC_REGS; ++i) acc[i] = 0.f;

  load_ab_tiles(sA, A, M, 0, sB, B, N, 0, K, 0, tid);
  fence_proxy_async_smem();
  __syncthreads();

  wgmma_fence();
  mma_ktile(acc, sA + wg * 64 * BK, sB, /*first=*/1);
  wgmma_commit();
  wgmma_wait<0>();

  store_acc(acc, C, M, N, wg * 64, 0, tid_wg);
}
