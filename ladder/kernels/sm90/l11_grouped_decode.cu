// Level 11: grouped GEMM for MoE decode, as weight streaming (swap-AB).
// What it adds to the levels below: a second contract (grouped, below) and, for it, a kernel of its
// own beside ws.cuh's tile engine (levels 7-10; level 12 puts the grouped tile list on that engine).
// Not a WsBuild: its build is the named switches L11_TN (tokens per chunk), L11_CH (chunks per unit),
// L11_D (stages), L11_WKN (weight layout), L11_FP8 (e4m3) below, read by the Cfg template.
//
// Contract (torch._grouped_mm, 2-D x 3-D): A [R, K] token rows sorted by expert, offs [E] int32
// cumulative row ends (expert e owns rows [offs[e-1], offs[e]), offs[-1] = 0), W the expert
// weights, C [R, N] = per expert A_e . W_e^T, fp32 accumulate, bf16 out.
//   WKN = 0: W [E, N, K] (K contiguous: the nn.Linear weights stacked; a 2-D map over E*N rows)
//   WKN = 1: W [E, K, N] (N contiguous; a 3-D map {N, K, E}; the tile is MN-major, wgmma trans-a)
//   FP8 = 1: A, W e4m3, C = (A_e . W_e^T) * sa[row] * sw[e, n] (rowwise / per-expert colwise scales).
//
// At decode an expert has a few rows, so its GEMM is a weight stream: each weight byte is used
// by m_e <= ~32 tokens. Swap-AB: the weights are the wgmma M side (64 weight rows per unit, one
// m64 slab), the expert's tokens the N side (TN = 8/16/32 per chunk, up to CH chunks, zero-filled
// past R, rows of the next expert discarded at the store). A unit = (expert, row group of
// RG = TN*CH tokens, 64 weight rows), all K. Units exist only for experts with rows: every CTA
// reads offs at start and builds the same prefix of units per expert in shared memory (no host
// sync, as torch._grouped_mm); the grid is one CTA per SM and unit u goes to CTA u % grid, so the
// hit experts' weight rows spread evenly over the SMs (small units: a tail of at most one unit).
// Roles as in ws.cuh: warp 0 of warpgroup 0 issues every TMA (one 8 KiB weight box + the token
// chunks of a stage, on the stage's full mbarrier), warpgroup 1 issues wgmma and releases stages;
// D stages keep D * 8 KiB of weights in flight per SM. Epilogue: register stores (the output is
// ~1 % of the bytes); the next unit's loads run under it.
#include "common.cuh"
#include "mma_small.cuh"
#include "grouped.cuh"

#ifndef L11_TN
#define L11_TN 16
#endif
#ifndef L11_CH
#define L11_CH 2
#endif
#ifndef L11_D
#define L11_D 16
#endif
#ifndef L11_WKN
#define L11_WKN 0
#endif
#ifndef L11_FP8
#define L11_FP8 0
#endif

namespace ladder {
namespace gdec {

using grp::MAX_E;

template <int TN, int CH, int D, int FP8>
struct Cfg {
  static constexpr int BW = 64;                    // weight rows per unit
  static constexpr int KE = FP8 ? 128 : 64;        // K elements per stage (128 bytes per row)
  static constexpr int W_BYTES = BW * 128;
  static constexpr int T_BYTES = TN * 128;
  static constexpr int STAGE = W_BYTES + CH * T_BYTES;
  static constexpr int RG = TN * CH;
  static constexpr int NACC = TN / 2;
  static constexpr int DYN_SMEM = D * STAGE + 1024;
  static_assert(STAGE % 1024 == 0 && T_BYTES % 1024 == 0, "1024-aligned swizzle atoms");
  static_assert(DYN_SMEM + 16 * D + 8 * (2 * MAX_E + 1) <= 227 * 1024, "fits");
};

struct Unit { int e, nb, r0, r1, nch; };

// unit u -> expert, row group, weight block (column blocks fastest: neighbouring CTAs share the token tile in L2)
__device__ __forceinline__ Unit unit_of(int u, const int* pre, const int* endr, int E, int NB, int RG, int TN) {
  const int lo = grp::expert_of(u, pre, E);
  Unit w;
  w.e = lo;
  const int local = u - pre[lo], g = local / NB;
  w.nb = local - g * NB;
  const int beg = lo ? endr[lo - 1] : 0;
  w.r0 = beg + g * RG;
  w.r1 = w.r0 + RG < endr[lo] ? w.r0 + RG : endr[lo];
  w.nch = (w.r1 - w.r0 + TN - 1) / TN;
  return w;
}

template <int TN, int CH, int D, int WKN, int FP8>
__device__ __forceinline__ void body(const TmaMap* tmA, const TmaMap* tmW, bf16_t* __restrict__ C,
                                     const int* __restrict__ offs, int E, int N, int K,
                                     const float* __restrict__ sa, const float* __restrict__ sw) {
  using G = Cfg<TN, CH, D, FP8>;
  static_assert(!(FP8 && WKN), "fp8 wgmma reads K-major operands only");
  extern __shared__ unsigned char dsmem[];
  __shared__ __align__(8) u64 full[D];
  __shared__ __align__(8) u64 empty[D];
  __shared__ int pre[MAX_E + 1];
  __shared__ int endr[MAX_E];
  unsigned char* base = align1024(dsmem);
  const int tid = threadIdx.x, wg = tid >> 7, tid_wg = tid & 127;
  const int NB = (N + G::BW - 1) / G::BW;
  if (tid == 32) {
    prefetch_tmap(tmA);
    prefetch_tmap(tmW);
#pragma unroll
    for (int s = 0; s < D; ++s) { mbar_init(&full[s], 1); mbar_init(&empty[s], 4); }
    fence_mbar_init();
  }
  if (tid < 32) grp::build_plan(offs, E, G::RG, NB, pre, endr, tid);
  __syncthreads();
  const int total = pre[E], grid = static_cast<int>(gridDim.x), cid = static_cast<int>(blockIdx.x);
  const int mine = cid < total ? (total - cid + grid - 1) / grid : 0;
  const int nkt = (K + G::KE - 1) / G::KE;

  if (wg == 0) {
    if (tid == 0) {
      int q = 0;
      for (int i = 0; i < mine; ++i) {
        const Unit w = unit_of(cid + i * grid, pre, endr, E, NB, G::RG, TN);
        for (int kt = 0; kt < nkt; ++kt, ++q) {
          const int s = q % D;
          if (q >= D) mbar_wait(&empty[s], ((q / D) - 1) & 1);
          unsigned char* st = base + s * G::STAGE;
          mbar_arrive_expect_tx(&full[s], G::W_BYTES + w.nch * G::T_BYTES);
          if constexpr (WKN) {
            asm volatile(
                "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];\n"
                ::"r"(smem_u32(st)), "l"(gaddr(tmW)), "r"(smem_u32(&full[s])), "r"(w.nb * G::BW), "r"(kt * G::KE), "r"(w.e)
                : "memory");
          } else {
            tma_load_2d(st, tmW, &full[s], kt * G::KE, w.e * N + w.nb * G::BW);
          }
          for (int ch = 0; ch < w.nch; ++ch)
            tma_load_2d(st + G::W_BYTES + ch * G::T_BYTES, tmA, &full[s], kt * G::KE, w.r0 + ch * TN);
        }
      }
    }
  } else {
    float acc[CH][G::NACC];
    int q = 0;
    const int wi = tid_wg >> 5, l = tid_wg & 31;
    for (int i = 0; i < mine; ++i) {
      const Unit w = unit_of(cid + i * grid, pre, endr, E, NB, G::RG, TN);
      // fp8: this thread's scales are loaded before the K loop, so their latency runs under the
      // MMA instead of serialising the epilogue (ncu on the H200: the consumer, not HBM, bounded
      // the short K = 768 units). sw: its two weight rows; sa: its 4 tokens per 8-column group.
      float swr[2] = {1.0f, 1.0f}, sar[CH][G::NACC / 2];
      if constexpr (FP8) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int n = w.nb * G::BW + 16 * wi + (l >> 2) + 8 * h;
          swr[h] = n < N ? __ldg(sw + static_cast<size_t>(w.e) * N + n) : 0.0f;
        }
#pragma unroll
        for (int ch = 0; ch < CH; ++ch)
#pragma unroll
          for (int j = 0; j < G::NACC / 2; ++j) {   // accumulator pairs i = 2j, 2j+1 share (i >> 2)
            const int i2 = (j >> 1) * 4 + (j & 1);  // i2 & 1 picks the token parity, i2 >> 2 the group
            const int r = w.r0 + ch * TN + 8 * (i2 >> 2) + 2 * (l & 3) + (i2 & 1);
            sar[ch][j] = r < w.r1 ? __ldg(sa + r) : 0.0f;
          }
      }
      for (int kt = 0; kt < nkt; ++kt, ++q) {
        const int s = q % D;
        mbar_wait(&full[s], (q / D) & 1);
        __syncwarp();
        const u32 sw0 = smem_u32(base + s * G::STAGE), st0 = sw0 + G::W_BYTES;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
          const u64 da = WKN ? make_desc_sw128_mn(sw0 + kk * 2048) : make_desc_sw128(sw0 + kk * 32);
#pragma unroll
          for (int ch = 0; ch < CH; ++ch)   // every chunk, active or not: a branch between wgmmas serialises them
            wgmma_small<TN, FP8, WKN>(acc[ch], da, make_desc_sw128(st0 + ch * G::T_BYTES + kk * 32),
                                      (kt == 0 && kk == 0) ? 0 : 1);
        }
        wgmma_commit();
        wgmma_wait<1>();
        if (kt > 0 && (tid & 31) == 0) mbar_arrive(&empty[(q - 1) % D]);
        __syncwarp();
      }
      wgmma_wait<0>();
      if ((tid & 31) == 0) mbar_arrive(&empty[(q - 1) % D]);
      __syncwarp();
      // acc[ch][i]: weight row 16*warp + lane/4 + 8*((i>>1)&1), token 8*(i>>2) + 2*(lane&3) + (i&1)
#pragma unroll
      for (int ch = 0; ch < CH; ++ch) {
        if (ch >= w.nch) break;
#pragma unroll
        for (int i = 0; i < G::NACC; ++i) {
          const int n = w.nb * G::BW + 16 * wi + (l >> 2) + 8 * ((i >> 1) & 1);
          const int r = w.r0 + ch * TN + 8 * (i >> 2) + 2 * (l & 3) + (i & 1);
          if (r < w.r1 && n < N) {
            float v = acc[ch][i];
            if constexpr (FP8) v *= sar[ch][(i >> 2) * 2 + (i & 1)] * swr[(i >> 1) & 1];
            C[static_cast<size_t>(r) * N + n] = static_cast<bf16_t>(pack_bf16x2(v, 0.0f) & 0xFFFFu);
          }
        }
      }
    }
  }
}

}  // namespace gdec
}  // namespace ladder

namespace { using gemm_l11_cfg = ladder::gdec::Cfg<L11_TN, L11_CH, L11_D, L11_FP8>; }
extern "C" __global__ void __launch_bounds__(256, 1)
gemm_l11(const __grid_constant__ ladder::TmaMap tmA, const __grid_constant__ ladder::TmaMap tmW, bf16_t* __restrict__ C,
         const int* __restrict__ offs, int E, int N, int K, const float* __restrict__ sa, const float* __restrict__ sw) {
  ladder::gdec::body<L11_TN, L11_CH, L11_D, L11_WKN, L11_FP8>(&tmA, &tmW, C, offs, E, N, K, sa, sw);
}
#ifdef LADDER_EXPECT_DYN_SMEM
static_assert(gemm_l11_cfg::DYN_SMEM == LADDER_EXPECT_DYN_SMEM, "registry dyn_smem_bytes != kernel DYN_SMEM");
#endif
