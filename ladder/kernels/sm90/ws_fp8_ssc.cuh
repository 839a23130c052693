// ws_fp8_ssc.cuh: staged column scales, a variant of the fp8 policy (round 7, notes/l13.md, l15.md:
// `using numerics = ladder::Fp8StagedScales;`; no split, the per-consumer TMA-store epilogue). Warp 1 of
// the producer warpgroup (idle after it listed the grouped tiles) copies each unit's column scales (UN
// floats of sb [N], grouped sw [e, n]; 0 past N) into one shared slot (ws.cuh `ssc`), in unit order;
// the consumers' TMA-store staging reads them as one 8-byte shared load per column pair instead of two
// __ldg. One slot, two mbarrier pairs by unit parity: sfull[i & 1] (32 lane arrivals) says unit i's
// scales are in, sempty[i & 1] (one arrival per consumer warp that reads unit i) says unit i's reader is
// done; unit i is written only after unit i-1 was released, so a parity wait is never two phases off.
// The copy runs a whole main loop ahead of the epilogue that reads it (one slot suffices while an
// epilogue is shorter than a main loop; otherwise the next unit's reader waits for the slot).
#pragma once
#include "ws_fp8.cuh"

namespace ladder {

struct Fp8StagedScales : Fp8 {
  static constexpr int ssc = 1;
  // warp 1 of the producer warpgroup (l = its lane): each unit's column scales into the slot, in unit
  // order (loads issued before the wait for the previous unit's release, so only the shared stores wait)
  template <class Cfg, class Work, class Locate>
  static __device__ __forceinline__ void produce(const Work& work, int mine, const Locate& locate, const WsX& x, int N,
                                                 float* ssc, u64* sfull, u64* sempty, int l) {
    for (int i = 0; i < mine; ++i) {
      const WsUnit w = work.unit(i);
      int arow, brow, tn, mend;
      locate(w.t, arow, brow, tn, mend);
      const int col0 = tn * Cfg::UN;
      const float* __restrict__ src = (Cfg::GROUPED ? x.sb + (brow - col0) : x.sb) + col0;
      float v[Cfg::UN / 32];
#pragma unroll
      for (int j = 0; j < Cfg::UN / 32; ++j) v[j] = col0 + 32 * j + l < N ? __ldg(src + 32 * j + l) : 0.0f;
      if (i > 0) mbar_wait(&sempty[(i - 1) & 1], ((i - 1) >> 1) & 1);
#pragma unroll
      for (int j = 0; j < Cfg::UN / 32; ++j) ssc[32 * j + l] = v[j];
      mbar_arrive(&sfull[i & 1]);
    }
  }
};

}  // namespace ladder
