// Level 5: a PIPE_DEPTH-stage shared-memory pipeline fed by TMA, so the loads of K tiles
// q+1 .. q+PIPE_DEPTH-1 are in flight while the tensor cores work on tile q.
//
// Tile: 128x256x64 (larger than levels 1-4: two consumer warpgroups, each wgmma m64n256k16 over
// 64 rows x 256 columns, 128 fp32 accumulators per thread). One stage = A 128x64 (16 KiB) +
// B 256x64 (32 KiB) = 48 KiB; PIPE_DEPTH=4 -> 192 KiB of dynamic shared memory, one CTA per SM.
//
// Not warp-specialized: the same 256 threads issue loads and MMAs; thread 0 (of warpgroup 0) is
// also the producer and issues TMA loads ahead (the purer level 5; the dedicated producer
// warpgroup is level 7).
//
// Ledger. Load q (K tile q) goes to stage s = q % D; it is the (q / D)-th use of that stage.
//   full[s]  (count 1 + tx bytes): the producer arms it and the TMA completes it;
//            consumers of load q wait on parity (q / D) & 1.
//   empty[s] (count 8): lane 0 of each of the 8 consumer warps arrives once its own
//            wgmma.wait_group says the wgmma that read the stage is complete (per warp, not
//            per warpgroup: every warp's part of m64n256k16 reads all of B); the producer reuses the stage for load p = q + D after waiting
//            on parity ((p / D) - 1) & 1.
// Prologue: the producer issues loads 0 .. D-1 (no empty wait). Steady state, iteration q:
// wait full, issue four wgmma, commit, wgmma.wait_group LAG (LAG = 1 if D > 1: the MMA of q-1 is
// complete, the one of q may still run), release stage of r = q - LAG, the producer refills up to
// load r + D. Drain: the last D loads have no refill; wait_group 0. With D = 1 (LAG = 0) the
// next load can only start after the MMA of the current tile completes: copy and MMA alternate
// as in level 4, which is the no-overlap baseline of the overlap measurement (same tile).
//
// Epilogue: all loads were consumed and all MMAs are done, so after a CTA barrier the stage
// memory (at least 64 KiB, also with D = 1) is free: each warpgroup stages its 64x256 result (4 boxes of 64x64, 32 KiB) there and
// one thread TMA-stores it (needs N % 8 == 0; masked register stores otherwise).
#include "common.cuh"
using namespace ladder;

#ifndef PIPE_DEPTH
#define PIPE_DEPTH 4
#endif

namespace {
constexpr int D = PIPE_DEPTH;
constexpr int LAG = D > 1 ? 1 : 0;
constexpr int BN5 = 256;
constexpr int A_BYTES = BM * BK * 2;            // 16 KiB
constexpr int B_BYTES = BN5 * BK * 2;           // 32 KiB
constexpr int STAGE_BYTES = A_BYTES + B_BYTES;  // 48 KiB, a multiple of 1024
static_assert(D >= 1 && D <= 4, "PIPE_DEPTH 1..4 (4 x 48 KiB fills the SM)");
// dynamic shared memory the launcher must give (registry dyn_smem_bytes): the stages, at least
// the 64 KiB epilogue staging, plus 1 KiB of alignment slack
constexpr int DYN_SMEM = (D * STAGE_BYTES > 2 * 64 * BN5 * 2 ? D * STAGE_BYTES : 2 * 64 * BN5 * 2) + 1024;
static_assert(DYN_SMEM <= 227 * 1024, "fits the 227 KiB per-block limit");
#ifdef LADDER_EXPECT_DYN_SMEM   // set by the CPU build test: the registry's dyn_smem_bytes
static_assert(DYN_SMEM == LADDER_EXPECT_DYN_SMEM, "registry dyn_smem_bytes != kernel DYN_SMEM");
#endif
}  // namespace

extern "C" __global__ void __launch_bounds__(THREADS, 1)
gemm_l05(const __grid_constant__ TmaMap tmA, const __grid_constant__ TmaMap tmB,
         const __grid_constant__ TmaMap tmC, bf16_t* __restrict__ C, int M, int N, int K, int c_tma) {
  extern __shared__ unsigned char dsmem[];
  __shared__ __align__(8) u64 full[D];
  __shared__ __align__(8) u64 empty[D];
  unsigned char* base = align1024(dsmem);   // launcher adds 1 KiB of slack
  const int tid = threadIdx.x, wg = tid >> 7, tid_wg = tid & 127;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN5;
  if (tid == 0) {
    prefetch_tmap(&tmA);
    prefetch_tmap(&tmB);
#pragma unroll
    for (int s = 0; s < D; ++s) { mbar_init(&full[s], 1); mbar_init(&empty[s], 8); }
    fence_mbar_init();
  }
  __syncthreads();

  const int nkt = (K + BK - 1) / BK;
  int p = 0;   // producer cursor: next load to issue (meaningful in thread 0 only)
  auto produce_upto = [&](int limit) {   // issue loads p < min(limit, nkt)
    const int lim = limit < nkt ? limit : nkt;
    for (; p < lim; ++p) {
      const int s = p % D;
      if (p >= D) mbar_wait(&empty[s], ((p / D) - 1) & 1);
      unsigned char* st = base + s * STAGE_BYTES;
      mbar_arrive_expect_tx(&full[s], STAGE_BYTES);
      tma_load_2d(st, &tmA, &full[s], p * BK, row0);
      tma_load_2d(st + A_BYTES, &tmB, &full[s], p * BK, col0);
    }
  };
  if (tid == 0) produce_upto(D);   // prologue
  __syncwarp();

  float acc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.f;

  for (int q = 0; q < nkt; ++q) {
    const int s = q % D;
    mbar_wait(&full[s], (q / D) & 1);
    const unsigned char* st = base + s * STAGE_BYTES;
    wgmma_fence();
    mma_ktile_n256(acc, reinterpret_cast<const bf16_t*>(st) + wg * 64 * BK,
                   reinterpret_cast<const bf16_t*>(st + A_BYTES), q == 0);
    wgmma_commit();
    wgmma_wait<LAG>();
    const int r = q - LAG;   // the newest load whose MMA is complete
    if (r >= 0) {
      if ((tid & 31) == 0) mbar_arrive(&empty[r % D]);
      if (tid == 0) produce_upto(r + D + 1);
    }
    __syncwarp();
  }
  wgmma_wait<0>();   // drain

  __syncthreads();   // every warpgroup's MMAs done and every load consumed: stages are free
  if (c_tma) {
    tma_store_acc<128>(acc, base + wg * 32768, &tmC, M, N, row0 + wg * 64, col0, tid_wg, 1 + wg);
  } else {
    store_acc(acc, C, M, N, row0 + wg * 64, col0, tid_wg);
  }
}
