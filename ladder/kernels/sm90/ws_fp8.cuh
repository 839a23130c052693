// ws_fp8.cuh: the fp8 numerics policy of ws.cuh (levels 13-15: `using numerics = ladder::Fp8;`): e4m3
// operands, QGMMA k32; a K tile is 128 elements (the same 128-byte swizzled rows and +32-byte
// descriptor steps as bf16); the kernel takes rowwise sa [M] and colwise sb [N] scales (WsX) and applies
// them after any split-K reduction: in the staging of the TMA store (pair by pair) or before the
// register stores. Grouped fp8 (with ws_grouped.cuh): row scale sa[global row], column scale
// sw[e * N + n] of the unit's expert e (WsX sb = sw [E, N]); whole slabs apply them in the staging, the
// slab that crosses the expert end and the no-TMA-store path in the masked register stores
// (store_masked).
#pragma once

namespace ladder {

struct Fp8 {
  static constexpr int fp8 = 1, ssc = 0, KE = 128;
  template <int NACC>
  static __device__ __forceinline__ void mma(float (&d)[NACC], u64 da, u64 db, int scale_d) {
    if constexpr (NACC == 64) wgmma_m64n128k32_e4m3(d, da, db, scale_d);
    else wgmma_m64n256k32_e4m3(d, da, db, scale_d);
  }

  // the epilogue scales on one 64-row slab (rows row0.., columns col0..; the wgmma layout of store_acc)
  template <int NACC>
  static __device__ __forceinline__ void apply(float (&acc)[NACC], const float* __restrict__ sa, const float* __restrict__ sb,
                                               int M, int N, int row0, int col0, int tid_wg) {
    const int w = tid_wg >> 5, l = tid_wg & 31;
    const int ra = row0 + 16 * w + (l >> 2);
    const float s0 = ra < M ? __ldg(sa + ra) : 0.0f, s1 = ra + 8 < M ? __ldg(sa + ra + 8) : 0.0f;
#pragma unroll
    for (int i = 0; i < NACC; i += 4) {
      const int col = col0 + 8 * (i >> 2) + 2 * (l & 3);
      const float b0 = col < N ? __ldg(sb + col) : 0.0f, b1 = col + 1 < N ? __ldg(sb + col + 1) : 0.0f;
      acc[i] *= s0 * b0; acc[i + 1] *= s0 * b1; acc[i + 2] *= s1 * b0; acc[i + 3] *= s1 * b1;
    }
  }

  // ws.cuh stage_chunk128 with the scales applied pair by pair (s0, s1: the thread's two row scales;
  // sbc: the column scales from the chunk's first column; columns >= N read as 0), so the scale values
  // live only as long as one pair (a whole-slab pass spilled at 168 registers). SM = 1: sbc points into
  // the shared column-scale slot (ws_fp8_ssc.cuh; zero past N): one 8-byte shared load per pair
  template <int NACC, int CH, int SM = 0>
  static __device__ __forceinline__ void stage_chunk(const float (&acc)[NACC], unsigned char* buf, int tid_wg,
                                                     float s0, float s1, const float* __restrict__ sbc, int ncols) {
    const int w = tid_wg >> 5, l = tid_wg & 31;
#pragma unroll
    for (int i = CH * 64; i < (CH * 64 + 64 < NACC ? CH * 64 + 64 : NACC); i += 2) {
      const int r = 16 * w + (l >> 2) + 8 * ((i >> 1) & 1);
      const int j = (i >> 2) - CH * 16;
      const int box = j >> 3, ch = j & 7;
      const int cc = 8 * j + 2 * (l & 3);
      const float sr = ((i >> 1) & 1) ? s1 : s0;
      float b0, b1;
      if constexpr (SM) {
        const float2 b = *reinterpret_cast<const float2*>(sbc + cc);
        b0 = b.x; b1 = b.y;
      } else {
        b0 = cc < ncols ? __ldg(sbc + cc) : 0.0f; b1 = cc + 1 < ncols ? __ldg(sbc + cc + 1) : 0.0f;
      }
      *reinterpret_cast<u32*>(buf + box * 8192 + r * 128 + ((ch ^ (r & 7)) << 4) + 4 * (l & 3)) =
          pack_bf16x2(acc[i] * sr * b0, acc[i + 1] * sr * b1);
    }
  }

  // grouped: masked register stores with the scales applied pair by pair (acc untouched): row scales
  // sa[row] for rows < mend (the expert's end; rows past it are not stored), column scales sbe[col]
  // (sbe = sw + e * N: the unit's expert), columns >= N read as 0 and not stored
  template <int NACC>
  static __device__ __forceinline__ void store_masked(const float (&acc)[NACC], bf16_t* __restrict__ C, int mend, int N,
                                                      int row0, int col0, int tid_wg, const float* __restrict__ sa,
                                                      const float* __restrict__ sbe) {
    const int w = tid_wg >> 5, l = tid_wg & 31;
    const int ra = row0 + 16 * w + (l >> 2);
    const float s0 = ra < mend ? __ldg(sa + ra) : 0.0f, s1 = ra + 8 < mend ? __ldg(sa + ra + 8) : 0.0f;
    const bool n_even = (N & 1) == 0;
#pragma unroll
    for (int i = 0; i < NACC; i += 2) {
      const int row = ra + 8 * ((i >> 1) & 1);
      const int col = col0 + 8 * (i >> 2) + 2 * (l & 3);
      if (row >= mend) continue;
      const float sr = ((i >> 1) & 1) ? s1 : s0;
      const float b0 = col < N ? __ldg(sbe + col) : 0.0f, b1 = col + 1 < N ? __ldg(sbe + col + 1) : 0.0f;
      const u32 p = pack_bf16x2(acc[i] * sr * b0, acc[i + 1] * sr * b1);
      bf16_t* dst = C + static_cast<size_t>(row) * N + col;
      if (n_even && col + 1 < N) {
        *reinterpret_cast<u32*>(dst) = p;
      } else {
        if (col < N) dst[0] = static_cast<bf16_t>(p & 0xFFFFu);
        if (col + 1 < N) dst[1] = static_cast<bf16_t>(p >> 16);
      }
    }
  }
};

}  // namespace ladder
