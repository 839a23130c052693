// Level 6: level 5 made persistent. The launcher starts min(#tiles, #SMs) CTAs (SM count read
// from the device); CTA b computes tiles b, b + G, b + 2G, ... (G = gridDim.x) of a tile order
// that walks the 128x256 output tiles in groups of GROUP_M tile-rows: inside a group, tile ids
// go down the rows first, then across the columns, so the ~132 tiles in flight at any moment
// share GROUP_M row-panels of A and ~132/GROUP_M column-panels of B in L2.
//
// The pipeline ledger of level 5 runs over the CTA's whole work list: load index q enumerates
// (tile i of this CTA, K tile kt) as q = i * nkt + kt, so stage s = q % D and the full/empty
// parities continue across tiles. The producer (thread 0, not a separate warp: no warp
// specialization yet) therefore issues the first loads of tile i+1 as soon as the last stages
// of tile i are released, i.e. BEFORE the epilogue of tile i, which overlaps them.
//
// Epilogue: masked register stores straight from the accumulators (as levels 1-3), not a TMA
// store: during the epilogue all D stages may hold loads of the next tile, and a 64 KiB staging
// buffer does not fit beside 4 x 48 KiB stages (notes/l06.md). Variant -DL6_TMA_STORE (measured
// beside it, registry VARIANTS): 3 stages + a dedicated 64 KiB staging buffer, TMA store left
// in flight while the next tile computes (waited for, for reading, before the next staging).
// Tails: TMA zero-fill (M, N, K) on loads, masks on stores; a CTA never gets an empty list
// (grid <= #tiles).
#include "common.cuh"
using namespace ladder;

#ifndef PIPE_DEPTH
#ifdef L6_TMA_STORE
#define PIPE_DEPTH 3
#else
#define PIPE_DEPTH 4
#endif
#endif
#ifndef GROUP_M
#define GROUP_M 16
#endif

namespace {
constexpr int D = PIPE_DEPTH;
constexpr int LAG = D > 1 ? 1 : 0;
constexpr int BN6 = 256;
constexpr int A_BYTES = BM * BK * 2;            // 16 KiB
constexpr int B_BYTES = BN6 * BK * 2;           // 32 KiB
constexpr int STAGE_BYTES = A_BYTES + B_BYTES;  // 48 KiB
#ifdef L6_TMA_STORE
constexpr int STAGING_BYTES = 2 * 64 * BN6 * 2;   // 64 KiB: each warpgroup's 64x256 bf16 result
#else
constexpr int STAGING_BYTES = 0;
#endif
constexpr int DYN_SMEM = D * STAGE_BYTES + STAGING_BYTES + 1024;
static_assert(DYN_SMEM <= 227 * 1024, "fits the 227 KiB per-block limit");
#ifdef LADDER_EXPECT_DYN_SMEM   // set by the CPU build test: the registry's dyn_smem_bytes
static_assert(DYN_SMEM == LADDER_EXPECT_DYN_SMEM, "registry dyn_smem_bytes != kernel DYN_SMEM");
#endif
static_assert(D >= 1 && D <= 4, "PIPE_DEPTH 1..4");

struct TileOrder {
  int tiles_m, tiles_n;
  // tile id t -> (tile row, tile column), grouped by GROUP_M tile-rows
  __device__ __forceinline__ void coords(int t, int& tm, int& tn) const {
    const int per_group = GROUP_M * tiles_n;
    const int g = t / per_group;
    const int first = g * GROUP_M;
    const int rows = tiles_m - first < GROUP_M ? tiles_m - first : GROUP_M;
    const int r = t - g * per_group;
    tm = first + r % rows;
    tn = r / rows;
  }
};
}  // namespace

extern "C" __global__ void __launch_bounds__(THREADS, 1)
gemm_l06(const __grid_constant__ TmaMap tmA, const __grid_constant__ TmaMap tmB,
         const __grid_constant__ TmaMap tmC, bf16_t* __restrict__ C, int M, int N, int K, int c_tma) {
  (void)tmC; (void)c_tma;   // same signature as levels 4-5; used only by the L6_TMA_STORE variant
  extern __shared__ unsigned char dsmem[];
  __shared__ __align__(8) u64 full[D];
  __shared__ __align__(8) u64 empty[D];
  unsigned char* base = align1024(dsmem);
  const int tid = threadIdx.x, wg = tid >> 7, tid_wg = tid & 127;
  if (tid == 0) {
    prefetch_tmap(&tmA);
    prefetch_tmap(&tmB);
#pragma unroll
    for (int s = 0; s < D; ++s) { mbar_init(&full[s], 1); mbar_init(&empty[s], 8); }
    fence_mbar_init();
  }
  __syncthreads();

  const TileOrder order{(M + BM - 1) / BM, (N + BN6 - 1) / BN6};
  const int total = order.tiles_m * order.tiles_n;
  const int mine = (total - static_cast<int>(blockIdx.x) + gridDim.x - 1) / gridDim.x;
  const int nkt = (K + BK - 1) / BK;
  const int Q = mine * nkt;   // this CTA's loads

  int p = 0, p_tile = 0, p_kt = 0, p_row0 = 0, p_col0 = 0;   // producer cursor (thread 0)
  auto produce_upto = [&](int limit) {
    const int lim = limit < Q ? limit : Q;
    for (; p < lim; ++p) {
      if (p_kt == 0) {   // first K tile of the producer's next tile: its coordinates
        int tm, tn;
        order.coords(blockIdx.x + p_tile * gridDim.x, tm, tn);
        p_row0 = tm * BM; p_col0 = tn * BN6;
      }
      const int s = p % D;
      if (p >= D) mbar_wait(&empty[s], ((p / D) - 1) & 1);
      unsigned char* st = base + s * STAGE_BYTES;
      mbar_arrive_expect_tx(&full[s], STAGE_BYTES);
      tma_load_2d(st, &tmA, &full[s], p_kt * BK, p_row0);
      tma_load_2d(st + A_BYTES, &tmB, &full[s], p_kt * BK, p_col0);
      if (++p_kt == nkt) { p_kt = 0; ++p_tile; }
    }
  };
  if (tid == 0) produce_upto(D);   // prologue
  __syncwarp();

  float acc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.f;

  int q = 0;
  for (int i = 0; i < mine; ++i) {
    int tm, tn;
    order.coords(blockIdx.x + i * gridDim.x, tm, tn);
    for (int kt = 0; kt < nkt; ++kt, ++q) {
      const int s = q % D;
      mbar_wait(&full[s], (q / D) & 1);
      const unsigned char* st = base + s * STAGE_BYTES;
      wgmma_fence();
      mma_ktile_n256(acc, reinterpret_cast<const bf16_t*>(st) + wg * 64 * BK,
                     reinterpret_cast<const bf16_t*>(st + A_BYTES), kt == 0);
      wgmma_commit();
      wgmma_wait<LAG>();
      if (LAG == 0 || kt > 0) {   // release the newest load whose MMA is complete
        const int r = q - LAG;
        if ((tid & 31) == 0) mbar_arrive(&empty[r % D]);
        if (tid == 0) produce_upto(r + D + 1);
      }
      __syncwarp();
    }
    if (LAG) {   // drain this tile: its last MMA, its last stage, and refill (next tile's loads)
      wgmma_wait<0>();
      const int r = q - 1;
      if ((tid & 31) == 0) mbar_arrive(&empty[r % D]);
      if (tid == 0) produce_upto(r + D + 1);
      __syncwarp();
    }
#ifdef L6_TMA_STORE
    if (c_tma) {
      // the previous tile's store must have finished reading this warpgroup's staging buffer
      unsigned char* stg = base + D * STAGE_BYTES + wg * (STAGING_BYTES / 2);
      if (tid_wg == 0) tma_store_wait_read();
      named_bar_sync(1 + wg, 128);
      stage_acc_sw128<128>(acc, stg, tid_wg);
      fence_proxy_async_smem();
      named_bar_sync(1 + wg, 128);
      const int r0 = tm * BM + wg * 64, c0 = tn * BN6;
      if (tid_wg == 0 && r0 < M) {
#pragma unroll
        for (int box = 0; box < 4; ++box)
          if (c0 + 64 * box < N) tma_store_2d(&tmC, stg + box * 8192, c0 + 64 * box, r0);
        tma_store_commit();   // not waited for here: it drains while the next tile computes
      }
    } else {
      store_acc(acc, C, M, N, tm * BM + wg * 64, tn * BN6, tid_wg);
    }
#else
    store_acc(acc, C, M, N, tm * BM + wg * 64, tn * BN6, tid_wg);
#endif
  }
#ifdef L6_TMA_STORE
  if (tid_wg == 0) tma_store_wait_all();
#endif
}
