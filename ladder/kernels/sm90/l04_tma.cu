// Level 4: level 3 with the tile copies taken over by the TMA unit. Same 128x128x64 CTA tile,
// same two consumer warpgroups (wgmma m64n128k16), same 128B-swizzled shared layout and wgmma
// descriptors; still ONE shared-memory stage, so copy and MMA still alternate:
//   thread 0: arm the mbarrier with the tile's byte count, issue two cp.async.bulk.tensor loads
//   everyone: wait on the mbarrier phase (parity kt & 1), wgmma the tile, wait for it, barrier.
// Tails: the TMA unit zero-fills the parts of a box outside A/B (rows >= M, >= N, cols >= K), so
// no masks. Epilogue: with a C map (c_tma != 0, needs N % 8 == 0) each warpgroup stages its
// 64x128 accumulators as bf16 in the (now idle) operand buffers, 128B-swizzled, and one thread
// TMA-stores two 64x64 boxes, clipped at M/N; otherwise the masked register store of level 3.
#include "common.cuh"
using namespace ladder;

extern "C" __global__ void __launch_bounds__(THREADS)
gemm_l04(const __grid_constant__ TmaMap tmA, const __grid_constant__ TmaMap tmB,
         const __grid_constant__ TmaMap tmC, bf16_t* __restrict__ C, int M, int N, int K, int c_tma) {
  __shared__ __align__(1024) unsigned char smem[(BM + BN) * BK * 2];   // A tile, then B tile
  __shared__ __align__(8) u64 full;
  bf16_t* sA = reinterpret_cast<bf16_t*>(smem);
  bf16_t* sB = reinterpret_cast<bf16_t*>(smem + BM * BK * 2);
  const int tid = threadIdx.x, wg = tid >> 7, tid_wg = tid & 127;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  if (tid == 0) {
    if (smem_u32(smem) & 1023u) __trap();
    prefetch_tmap(&tmA);
    prefetch_tmap(&tmB);
    mbar_init(&full, 1);
    fence_mbar_init();
  }
  __syncthreads();

  float acc[ACC_REGS];
#pragma unroll
  for (int i = 0; i < ACC_REGS; ++i) acc[i] = 0.f;

  const int nkt = (K + BK - 1) / BK;
  constexpr u32 TILE_BYTES = (BM + BN) * BK * 2;   // full boxes, zero-filled parts included
  for (int kt = 0; kt < nkt; ++kt) {
    if (tid == 0) {
      mbar_arrive_expect_tx(&full, TILE_BYTES);
      tma_load_2d(sA, &tmA, &full, kt * BK, row0);
      tma_load_2d(sB, &tmB, &full, kt * BK, col0);
    }
    __syncwarp();
    mbar_wait(&full, kt & 1);
    wgmma_fence();
    mma_ktile(acc, sA + wg * 64 * BK, sB, kt == 0);
    wgmma_commit();
    wgmma_wait<0>();
    __syncthreads();   // both warpgroups are done reading before the next load overwrites
  }

  if (c_tma) {
    tma_store_acc<ACC_REGS>(acc, smem + wg * 16384, &tmC, M, N, row0 + wg * 64, col0, tid_wg, 1 + wg);
  } else {
    store_acc(acc, C, M, N, row0 + wg * 64, col0, tid_wg);
  }
}
