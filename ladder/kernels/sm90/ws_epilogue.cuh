// ws_epilogue.cuh: ws.cuh's two epilogues (level 7's; `using epilogue = ...`, default by LADDER_EPI):
// EpiTmaStore (N % 8 == 0): each consumer stages 64x128 chunks of its accumulators in its own 16 KiB
// of shared memory and one of its threads issues TMA bulk stores, left in flight (waited for, for
// reading, before the buffer is rewritten; named barrier 2 + consumer). EpiRegs, or N % 8 != 0 (no C
// map: c_tma = 0): masked register stores (levels 1-3, 6). fp8 builds (ws_fp8.cuh) apply the scales in
// the staging or the masked stores; grouped builds (ws_grouped.cuh) store the slab that crosses the
// expert end (mend) from registers. The per-warp TMA store: ws_epi_warp.cuh.
#pragma once

namespace ladder {

// Columns [128*CH, 128*CH + 128) of one consumer's 64-row accumulator slab -> two 64x64 bf16
// boxes (8 KiB each, 128B-swizzled: the layout the C map's SWIZZLE_128B store reads) at buf;
// with BN = 192 (NACC = 96) chunk 1 is the one box of columns 128-191.
template <int NACC, int CH>
__device__ __forceinline__ void stage_chunk128(const float (&acc)[NACC], unsigned char* buf, int tid_wg) {
  const int w = tid_wg >> 5, l = tid_wg & 31;
#pragma unroll
  for (int i = CH * 64; i < (CH * 64 + 64 < NACC ? CH * 64 + 64 : NACC); i += 2) {
    const int r = 16 * w + (l >> 2) + 8 * ((i >> 1) & 1);
    const int j = (i >> 2) - CH * 16;   // 8-column group inside the chunk, 0..15
    const int box = j >> 3, ch = j & 7;
    *reinterpret_cast<u32*>(buf + box * 8192 + r * 128 + ((ch ^ (r & 7)) << 4) + 4 * (l & 3)) =
        pack_bf16x2(acc[i], acc[i + 1]);
  }
}

// the masked register stores of a unit (fp8 grouped: scaled pair by pair; fp8 dense: scaled before)
template <class Cfg>
__device__ __forceinline__ void ws_store_regs(float (&acc)[Cfg::MR][Cfg::NACC], bf16_t* C, int mend, int N, int row0,
                                              int col0, int tid_wg, const WsX& x, const float* sbu) {
#pragma unroll
  for (int mr = 0; mr < Cfg::MR; ++mr) {
    if constexpr (Cfg::FP8 && Cfg::GROUPED) Cfg::Num::template store_masked<Cfg::NACC>(acc[mr], C, mend, N, row0 + mr * 64, col0, tid_wg, x.sa, sbu);
    else store_acc<Cfg::NACC>(acc[mr], C, mend, N, row0 + mr * 64, col0, tid_wg);
  }
}

struct EpiRegs {
  static constexpr int mode = 0;
  template <class Cfg>
  static __device__ __forceinline__ int store(float (&acc)[Cfg::MR][Cfg::NACC], const TmaMap*, bf16_t* C, int, int N, int mend,
                                               int row0, int col0, int, int tid_wg, int, const WsX& x, const float* sbu,
                                               const float*, unsigned char*, int nbox) {
    ws_store_regs<Cfg>(acc, C, mend, N, row0, col0, tid_wg, x, sbu);
    return nbox;
  }
  static __device__ __forceinline__ void drain(int, int, int) {}
};

struct EpiTmaStore {
  static constexpr int mode = 1;
  // writeback through shared memory: per 64x128 chunk, wait until the previous chunk's bulk store has
  // read the buffer, stage (st.shared, swizzled), fence to the async proxy, one thread issues the two
  // box stores (clipped at the edges) and moves on: the last chunk's store drains while the next
  // unit's MMAs run.
  template <class Cfg>
  static __device__ __forceinline__ int store(float (&acc)[Cfg::MR][Cfg::NACC], const TmaMap* tmC, bf16_t* C, int M, int N,
                                               int mend, int row0, int col0, int c, int tid_wg, int c_tma, const WsX& x,
                                               const float* sbu, const float* ssc, unsigned char* base, int nbox) {
    constexpr int MR = Cfg::MR, FP8 = Cfg::FP8, GROUPED = Cfg::GROUPED, SSC = Cfg::SSC;
    using Num = typename Cfg::Num;
    if (!c_tma) { ws_store_regs<Cfg>(acc, C, mend, N, row0, col0, tid_wg, x, sbu); return nbox; }
    unsigned char* buf = base + Cfg::D * Cfg::STAGE + c * 16384;
#pragma unroll
    for (int mr = 0; mr < MR; ++mr) {
      if constexpr (FP8 && GROUPED) {
        if (row0 + mr * 64 + 64 > mend) {   // the slab crosses the expert end: scaled masked register stores, no staging
          Num::template store_masked<Cfg::NACC>(acc[mr], C, mend, N, row0 + mr * 64, col0, tid_wg, x.sa, sbu);
          continue;
        }
      }
#pragma unroll
      for (int ch = 0; ch < (Cfg::UN + 127) / 128; ++ch) {
        if (tid_wg == 0) tma_store_wait_read();
        named_bar_sync(2 + c, 128);
        if constexpr (FP8) {
          const int ra = row0 + mr * 64 + 16 * (tid_wg >> 5) + ((tid_wg & 31) >> 2);
          const float s0 = ra < M ? __ldg(x.sa + ra) : 0.0f, s1 = ra + 8 < M ? __ldg(x.sa + ra + 8) : 0.0f;
          const int c0 = col0 + ch * 128;
          const float* sbc = SSC ? ssc + ch * 128 : sbu + c0;
          if (ch == 0) Num::template stage_chunk<Cfg::NACC, 0, SSC>(acc[mr], buf, tid_wg, s0, s1, sbc, N - c0);
          if constexpr (Cfg::UN > 128) { if (ch == 1) Num::template stage_chunk<Cfg::NACC, 1, SSC>(acc[mr], buf, tid_wg, s0, s1, sbc, N - c0); }
        } else {
          if (ch == 0) stage_chunk128<Cfg::NACC, 0>(acc[mr], buf, tid_wg);
          if constexpr (Cfg::UN > 128) { if (ch == 1) stage_chunk128<Cfg::NACC, 1>(acc[mr], buf, tid_wg); }
        }
        fence_proxy_async_smem();
        named_bar_sync(2 + c, 128);
        const int r = row0 + mr * 64;
        if (GROUPED && !FP8 && r + 64 > mend) {   // the slab ends inside the expert: masked register stores, once
          if (ch == 0) store_acc<Cfg::NACC>(acc[mr], C, mend, N, r, col0, tid_wg);
          continue;
        }
        if (tid_wg == 0 && r < M) {
#pragma unroll
          for (int box = 0; box < 2; ++box)
            if (ch * 128 + box * 64 < Cfg::UN && col0 + ch * 128 + box * 64 < N) tma_store_2d(tmC, buf + box * 8192, col0 + ch * 128 + box * 64, r);
          tma_store_commit();
        }
      }
    }
    return nbox;
  }
  static __device__ __forceinline__ void drain(int c_tma, int, int tid_wg) { if (c_tma && tid_wg == 0) tma_store_wait_all(); }   // smem stays valid until read
};

template <int E> struct WsEpiOf { using type = EpiTmaStore; };
template <> struct WsEpiOf<0> { using type = EpiRegs; };

}  // namespace ladder
