// ws_epi_warp.cuh: the per-warp TMA-store epilogue (round 6, notes/l13.md, l15.md: `using epilogue =
// ladder::EpiPerWarp;`). Warp w of a consumer owns rows 16w..16w+15 of each 64-row slab (the wgmma
// accumulator layout), so it can stage and store them alone: a 16-row x 64-column box (2 KiB,
// 128B-swizzled; 1024-aligned, so the swizzle row is r & 7) in one of the warp's two 2 KiB halves of its
// consumer's 16 KiB staging, fence, __syncwarp, lane 0 issues the TMA store of a 16x64 box (the C map's
// box is 16 rows) and moves on. No named barrier: before writing a half, lane 0 waits until at most one
// store group (the other half's) is still reading (wait_group.read 1), i.e. the store two boxes back
// has read this half. Grouped: only the warp whose 16 rows cross the expert end stores from registers.
#pragma once

namespace ladder {

// Box b of the slab holds accumulator columns 64b..64b+63 (acc indices 32b..32b+31); fp8 scales as
// Fp8::stage_chunk.
template <int NACC, int B, int FP8>
__device__ __forceinline__ void stage_box16(const float (&acc)[NACC], unsigned char* half, int l, float s0, float s1,
                                            const float* __restrict__ sbc, int ncols) {
#pragma unroll
  for (int i = B * 32; i < B * 32 + 32; i += 2) {
    const int r = (l >> 2) + 8 * ((i >> 1) & 1);
    const int ch = (i >> 2) - B * 8;
    u32 v;
    if constexpr (FP8) {
      const int cc = 8 * ch + 2 * (l & 3);
      const float sr = ((i >> 1) & 1) ? s1 : s0;
      const float b0 = cc < ncols ? __ldg(sbc + cc) : 0.0f, b1 = cc + 1 < ncols ? __ldg(sbc + cc + 1) : 0.0f;
      v = pack_bf16x2(acc[i] * sr * b0, acc[i + 1] * sr * b1);
    } else {
      v = pack_bf16x2(acc[i], acc[i + 1]);
    }
    *reinterpret_cast<u32*>(half + r * 128 + ((ch ^ (r & 7)) << 4) + 4 * (l & 3)) = v;
  }
}
__device__ __forceinline__ void tma_store_wait_read1() { asm volatile("cp.async.bulk.wait_group.read 1;\n" ::: "memory"); }

struct EpiPerWarp {
  static constexpr int mode = 2;
  template <class Cfg>
  static __device__ __forceinline__ int store(float (&acc)[Cfg::MR][Cfg::NACC], const TmaMap* tmC, bf16_t* C, int M, int N,
                                               int mend, int row0, int col0, int c, int tid_wg, int c_tma, const WsX& x,
                                               const float* sbu, const float*, unsigned char* base, int nbox) {
    constexpr int MR = Cfg::MR, FP8 = Cfg::FP8, GROUPED = Cfg::GROUPED;
    using Num = typename Cfg::Num;
    if (c_tma) {
      const int wq = tid_wg >> 5, l = tid_wg & 31;
      unsigned char* wbuf = base + Cfg::D * Cfg::STAGE + c * 16384 + wq * 4096;
#pragma unroll
      for (int mr = 0; mr < MR; ++mr) {
        const int r0 = row0 + mr * 64 + 16 * wq;   // this warp's first row
        if (r0 >= mend) continue;
        if (GROUPED && r0 + 16 > mend) {
          if constexpr (FP8) Num::template store_masked<Cfg::NACC>(acc[mr], C, mend, N, row0 + mr * 64, col0, tid_wg, x.sa, sbu);
          else store_acc<Cfg::NACC>(acc[mr], C, mend, N, row0 + mr * 64, col0, tid_wg);
          continue;
        }
        float s0 = 1.0f, s1 = 1.0f;
        if constexpr (FP8) {
          const int ra = r0 + (l >> 2);
          s0 = ra < M ? __ldg(x.sa + ra) : 0.0f;
          s1 = ra + 8 < M ? __ldg(x.sa + ra + 8) : 0.0f;
        }
#pragma unroll
        for (int b = 0; b < Cfg::UN / 64; ++b) {
          const int cb = col0 + 64 * b;
          if (cb >= N) break;
          unsigned char* half = wbuf + (nbox & 1) * 2048;
          if (l == 0) tma_store_wait_read1();
          __syncwarp();
          if (b == 0) stage_box16<Cfg::NACC, 0, FP8>(acc[mr], half, l, s0, s1, sbu + cb, N - cb);
          if (b == 1) stage_box16<Cfg::NACC, 1, FP8>(acc[mr], half, l, s0, s1, sbu + cb, N - cb);
          if constexpr (Cfg::UN > 128) {
            if (b == 2) stage_box16<Cfg::NACC, 2, FP8>(acc[mr], half, l, s0, s1, sbu + cb, N - cb);
            if (b == 3) stage_box16<Cfg::NACC, 3, FP8>(acc[mr], half, l, s0, s1, sbu + cb, N - cb);
          }
          fence_proxy_async_smem();
          __syncwarp();
          if (l == 0) { tma_store_2d(tmC, half, cb, r0); tma_store_commit(); }
          ++nbox;
        }
      }
    } else {
      ws_store_regs<Cfg>(acc, C, mend, N, row0, col0, tid_wg, x, sbu);
    }
    return nbox;   // boxes this warp has stored so far (its staging half alternates)
  }
  static __device__ __forceinline__ void drain(int c_tma, int tid, int) { if (c_tma && (tid & 31) == 0) tma_store_wait_all(); }
};

}  // namespace ladder
