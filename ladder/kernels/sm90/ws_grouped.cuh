// ws_grouped.cuh: the grouped tile-list policy of ws.cuh (level 12: `using tiles = ladder::GroupedTiles;`;
// cluster 1, no split). M = R token rows sorted by expert, offs [E] the cumulative row ends (WsX), B a 2-D
// map over the E*N weight rows of W [E, N, K]; warp 1 lists the m-tiles per expert from offs
// (grouped.cuh), tile t -> (expert, m-tile within the expert, column block), m-tiles fastest; A rows of a
// tile past the expert's end are computed and discarded: the 64-row slab that crosses the end is stored
// from registers with the row bound at the expert's end (mend), whole slabs through the TMA store. The
// m-tile is the unit tile (UM rows): cooperative NC*64*MR, ping-pong 64*MR (each consumer takes whole
// units, so a 64-row ping-pong unit pads an expert's tail by < 64 rows, not < 128); the slab test runs
// per consumer on the consumer's own rows (row0 = the unit's first row in ping-pong).
// Paired units (`ladder::GroupedPairs`, round 7): the tile list is walked in pairs of consecutive tiles:
// CTA cid takes pairs P = cid, cid + #CTAs, ..., and units 2j, 2j+1 of its list are tiles 2P, 2P+1 (the
// list holds m-tiles fastest, so a pair is two m-tiles of one weight block whenever the expert has two
// more m-tiles in that column block): the same SM reads the W block twice back to back (ping-pong: one
// unit per consumer), instead of two CTAs at whatever distance their drift puts them.
#pragma once
#include "grouped.cuh"

namespace ladder {

// The paired work list (ws.cuh WsWork's fields; ks = nkt: whole tiles).
struct PairWork {
  int cid, ncl, tiles, nkt, S, ks;
  long long iters;
  int lmax;
  __device__ __forceinline__ void init() {}
  __device__ __forceinline__ int count() const {   // pairs P = cid, cid + ncl, ... < ceil(tiles / 2); the last tile alone if tiles is odd
    const int pairs = (tiles + 1) / 2, np = cid < pairs ? (pairs - cid + ncl - 1) / ncl : 0;
    return np ? 2 * np - (2 * (cid + (np - 1) * ncl) + 1 >= tiles ? 1 : 0) : 0;
  }
  __device__ __forceinline__ WsUnit unit(int i) const {
    WsUnit w;
    w.t = 2 * (cid + (i >> 1) * ncl) + (i & 1);
    w.own = 0; w.nseg = 1; w.slot = w.t; w.kt0 = 0; w.kt1 = ks < nkt ? ks : nkt;
    return w;
  }
  __device__ __forceinline__ int seg_slot(int t, int o) const { return t * S + o; }
};

struct GroupedTiles {
  static constexpr int grouped = 1, pairs = 0;
  static constexpr int PLAN = grp::MAX_E_WS + 1;   // shared uint16 m-tiles per expert (prefix)
  using work = WsWork;
  template <class Cfg>
  static __device__ __forceinline__ void plan(const WsX& x, unsigned short* gpre, int tid) {
    if (tid >= 32 && tid < 64) grp::build_plan(x.offs, x.E, Cfg::UM, 1, gpre, static_cast<int*>(nullptr), tid - 32);
  }
  static __device__ __forceinline__ int ntiles(const WsOrder& order, const unsigned short* gpre, const WsX& x) {
    return static_cast<int>(gpre[x.E]) * order.tiles_n;
  }
  // expert e's tiles are [gpre[e] * NB, gpre[e + 1] * NB): e = the largest with gpre[e] <= t / NB;
  // m-tiles fastest (the m-tiles of one weight block run side by side: W from L2)
  template <class Cfg>
  static __device__ __forceinline__ void locate(int t, int& arow, int& brow, int& tn, int& mend, const WsOrder& order,
                                                const unsigned short* gpre, const WsX& x, u32, int, int N) {
    const int e = grp::expert_of(t / order.tiles_n, gpre, x.E), beg = e ? __ldg(x.offs + e - 1) : 0, end = __ldg(x.offs + e);
    const int mt_e = (end - beg + Cfg::UM - 1) / Cfg::UM, local = t - static_cast<int>(gpre[e]) * order.tiles_n;
    tn = local / mt_e;
    arow = beg + (local - tn * mt_e) * Cfg::UM;
    brow = e * N + tn * Cfg::UN;
    mend = end;
  }
};

struct GroupedPairs : GroupedTiles {
  static constexpr int pairs = 1;
  using work = PairWork;
};

}  // namespace ladder
