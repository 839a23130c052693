// ws_splitk.cuh: the split-K policies of ws.cuh (level 10: `using split = ladder::SplitK;`; the stream-K
// tail variants: `ladder::StreamK`). Cooperative consumers only, not ping-pong.
// Split-K (cluster 1): a unit is (tile, split s); split s covers K tiles [s*ks, min(nkt, (s+1)*ks)) (ws.cuh
//   WsWork with S > 1 splits). Each split writes its fp32 partial tile to a global workspace (per-thread
//   float4 layout, coalesced), fences, and counts itself on the tile's counter; the LAST split to arrive
//   (atomicAdd returns S-1) adds the other partials (read through L2) to its registers, writes C and
//   resets the counter to 0 for the next launch. No split waits for another, so there is no deadlock
//   however the units are placed. Named barrier 1 (consumer threads only) orders the workspace writes
//   and the counter. fp8 (level 14): the scales are applied after the reduction (ws.cuh's epilogue).
// Stream-K tail (cluster 1 or 2): the first `dp` tiles (kernel argument ks; a multiple of #CTAs) are
//   whole units walked data-parallel; the K iterations of the remaining tiles (the last, partial wave)
//   are spread evenly over the first S CTAs: CTA p owns iterations [p*I/S, (p+1)*I/S) of the I = tail
//   tiles * K tiles in tile order, one unit per tile its range touches (StreamKWork). The segments of a
//   tile meet through the split-K workspace and counter above (the last to arrive adds the others and
//   stores); a tile inside one range has one segment and skips the workspace. S = 0: no tail split.
//   In a cluster both CTAs walk the same units, each with its own slots and counters.
#pragma once

namespace ladder {

// The stream-K work list (ws.cuh WsWork's fields: S tail CTAs, ks = dp whole tiles).
struct StreamKWork {
  int cid, ncl, tiles, nkt, S, ks;   // S tail CTAs, ks = dp tiles
  long long iters;                   // K iterations of the tail tiles
  int lmax;                          // most tiles one CTA's range touches (workspace slots per CTA)
  __device__ __forceinline__ void init() {
    iters = static_cast<long long>(tiles - ks) * nkt;
    const long long span = S > 0 ? (iters + S - 1) / S : 0;
    lmax = static_cast<int>((span + nkt - 1) / nkt) + 1;
  }
  __device__ __forceinline__ long long sk_start(int p) const { return (static_cast<long long>(p) * iters) / S; }
  // the tail CTA whose range holds iteration x: the largest p with sk_start(p) <= x
  __device__ __forceinline__ int sk_owner(long long x) const { return static_cast<int>(((x + 1) * S + iters - 1) / iters) - 1; }
  __device__ __forceinline__ int count() const {
    int n = cid < ks ? (ks - cid + ncl - 1) / ncl : 0;
    if (S > 0 && cid < S) {
      const long long x0 = sk_start(cid), x1 = sk_start(cid + 1);
      if (x1 > x0) n += static_cast<int>((x1 - 1) / nkt - x0 / nkt) + 1;
    }
    return n;
  }
  __device__ __forceinline__ WsUnit unit(int i) const {
    WsUnit w;
    const int ndp = cid < ks ? (ks - cid + ncl - 1) / ncl : 0;
    if (i < ndp) {
      w.t = cid + i * ncl; w.kt0 = 0; w.kt1 = nkt; w.nseg = 1; w.own = 0; w.slot = 0;
      return w;
    }
    const int li = i - ndp;
    const long long x0 = sk_start(cid), x1 = sk_start(cid + 1);
    const long long j = x0 / nkt + li, a = j * nkt;
    w.t = ks + static_cast<int>(j);
    w.kt0 = static_cast<int>((x0 > a ? x0 : a) - a);
    w.kt1 = static_cast<int>((x1 < a + nkt ? x1 : a + nkt) - a);
    const int pf = sk_owner(a);
    w.nseg = sk_owner(a + nkt - 1) - pf + 1;
    w.own = cid - pf;
    w.slot = cid * lmax + li;
    return w;
  }
  // workspace slot of segment o of tile t (o != the caller's own)
  __device__ __forceinline__ int seg_slot(int t, int o) const {
    const long long a = static_cast<long long>(t - ks) * nkt;
    const int p = sk_owner(a) + o;
    return p * lmax + static_cast<int>((t - ks) - sk_start(p) / nkt);
  }
};

struct SplitK {
  static constexpr int mode = 1;
  using work = WsWork;
  // One segment of a split tile (w.nseg > 1): store the partial, count it on the tile's counter; the
  // last segment to arrive adds the others' partials to acc and returns true (it stores the tile),
  // every other returns false.
  template <class Cfg, class Work>
  static __device__ __forceinline__ bool reduce(float (&acc)[Cfg::MR][Cfg::NACC], float* ws, int* cnt, int& last_flag,
                                                const WsUnit& w, const Work& work, int t, u32 rank, int ct) {
    constexpr int MR = Cfg::MR, CL = Cfg::CL;
    constexpr int NA = MR * Cfg::NACC;
    // CL = 2 (stream-K): both CTAs of a cluster walk the same units; each has its own slots and counters
    float4* slot = reinterpret_cast<float4*>(ws) + static_cast<size_t>(w.slot * CL + static_cast<int>(rank)) * (Cfg::NCT * NA / 4);
#pragma unroll
    for (int mr = 0; mr < MR; ++mr)
#pragma unroll
      for (int x = 0; x < Cfg::NACC; x += 4)
        slot[((mr * Cfg::NACC + x) / 4) * Cfg::NCT + ct] =
            make_float4(acc[mr][x], acc[mr][x + 1], acc[mr][x + 2], acc[mr][x + 3]);
    __threadfence();
    named_bar_sync(1, Cfg::NCT);
    if (ct == 0) {
      const int ci = t * CL + static_cast<int>(rank);
      const int old = atomicAdd(&cnt[ci], 1);
      last_flag = old == w.nseg - 1;
      if (old == w.nseg - 1) cnt[ci] = 0;   // every split has arrived: ready for the next launch
    }
    named_bar_sync(1, Cfg::NCT);
    if (!last_flag) return false;
    __threadfence();
    for (int o = 0; o < w.nseg; ++o) {
      if (o == w.own) continue;
      const float4* other = reinterpret_cast<const float4*>(ws) + static_cast<size_t>(work.seg_slot(t, o) * CL + static_cast<int>(rank)) * (Cfg::NCT * NA / 4);
#pragma unroll
      for (int mr = 0; mr < MR; ++mr)
#pragma unroll
        for (int x = 0; x < Cfg::NACC; x += 4) {
          const float4 v = __ldcg(other + ((mr * Cfg::NACC + x) / 4) * Cfg::NCT + ct);
          acc[mr][x] += v.x; acc[mr][x + 1] += v.y; acc[mr][x + 2] += v.z; acc[mr][x + 3] += v.w;
        }
    }
    return true;
  }
};

struct StreamK : SplitK {
  static constexpr int mode = 2;
  using work = StreamKWork;
};

}  // namespace ladder
