// ws.cuh: the warp-specialized persistent GEMM of levels 7-14 and their variants (one template).
// Unit tile N (BNW): 128, 192 or 256 (wgmma m64n128 / m64n192 / m64n256; the mid-shape builds of
// notes/mid.md use 192), or 96 (m64n96) with register stores only: 96 columns are one and a half
// 64-column store boxes, so the TMA-store epilogue would write a half box into the next tile.
//
// Roles (warpgroup = 128 threads, 4 consecutive warps):
//   warpgroup 0       PRODUCER: setmaxnreg.dec to 40 registers; one thread issues every TMA load
//                     (A box and B box of a stage on the stage's `full` mbarrier, expect_tx of the
//                     stage bytes) after waiting on the stage's `empty` mbarrier. It never
//                     touches wgmma or the output.
//   warpgroups 1..NC  CONSUMERS: setmaxnreg.inc to 232 registers; wait `full` (parity of the
//                     load's round), issue wgmma, release the stage on `empty` (one arrival per
//                     warp, after wgmma.wait_group says the MMA that read it is done), epilogue.
// The two roles are the two branches of one if/else (ptxas honours setmaxnreg only then) and
// the kernel has a register cap at entry (__launch_bounds__(threads, 1)).
//
// Ledger: one sequence q = 0, 1, 2, ... of stage loads over the CTA's whole work list (every
// unit's K tiles in order); stage q % D, round q / D; full[s] completes once per round (one
// arrival + the TMA transaction bytes), empty[s] completes when every consumer warp that reads
// stage s (in every CTA of the cluster, for the multicast operand) has released it. Waiters poll
// the parity of the round they need: full round r -> parity r & 1; the producer's wait for the
// release of round r-1 -> parity (r - 1) & 1.
//
// Consumer modes:
//   cooperative (PINGPONG = 0): the NC consumers split one unit tile by rows: consumer c owns
//     rows [64*MR*c, 64*MR*(c+1)); every consumer reads every stage (empty count 4*NC*CL).
//   ping-pong (PINGPONG = 1, NC = 2): consumer c takes the CTA's units i with i % 2 == c, each
//     a whole 64*MR x BN tile; the ring's order (unit i's stages before unit i+1's) makes the
//     two main loops alternate, so one consumer's epilogue runs under the other's MMA. An
//     mbarrier per consumer (mdone[c], one phase per finished main loop) makes consumer c start
//     unit i only after the other consumer passed all its waits of unit i-1 (ordering, and the
//     at-most-one-round-ahead rule of parity waits).
// Cluster (CL = 2, __cluster_dims__(2,1,1)): the two CTAs of a cluster compute the two
//   M-adjacent tiles of a cluster tile; they share the B tile. CTA rank r loads rows
//   [r*BN/2, (r+1)*BN/2) of the B tile with a TMA multicast to both CTAs (same smem offset),
//   so B is read from L2 once per cluster; A is loaded by each CTA for itself. A stage may be
//   refilled only when the consumers of BOTH CTAs released it: each consumer warp arrives on
//   its own empty[s] and, through mapa + mbarrier.arrive.shared::cluster, on the peer's.
//   A cluster barrier after mbarrier init (before any remote access) and one before exit (so
//   no CTA leaves while the peer may still arrive on its barriers).
// Split-K (SPLITK = 1, CL = 1, not ping-pong): a unit is (tile, split s); split s covers K
//   tiles [s*ks, min(nkt, (s+1)*ks)). Each split writes its fp32 partial tile to a global
//   workspace (per-thread float4 layout, coalesced), fences, and counts itself on the tile's
//   counter; the LAST split to arrive (atomicAdd returns S-1) adds the other partials (read
//   through L2) to its registers, writes bf16 C and resets the counter to 0 for the next
//   launch. No split waits for another, so there is no deadlock however the units are placed.
//   Named barrier 1 (consumer threads only) orders the workspace writes and the counter.
// Stream-K tail (SPLITK = 2, CL = 1, not ping-pong): the first `dp` tiles (kernel argument
//   ks; a multiple of #CTAs) are whole units walked data-parallel as below; the K iterations of
//   the remaining tiles (the last, partial wave) are spread evenly over the first S CTAs: CTA p
//   owns iterations [p*I/S, (p+1)*I/S) of the I = tail tiles * K tiles in tile order, one unit
//   per tile its range touches. The segments of a tile meet through the split-K workspace and
//   counter above (the last to arrive adds the others and stores); a tile inside one range has
//   one segment and skips the workspace. S = 0: no tail split (every tile whole).
// Work list: units u = cluster_id + i * #clusters (persistent: #clusters <= #SMs / CL and <=
//   cuOccupancyMaxActiveClusters, gpu.max_active_clusters);
//   u -> (tile t = u / S, split u % S); t -> (cluster-row, column) in GROUP-row grouped order
//   (level 6's L2-friendly order), row tile = cluster-row * CL + rank.
// fp8 (FP8 = 1, levels 13-14): e4m3 operands, QGMMA k32; a K tile is 128 elements (the same
//   128-byte swizzled rows and +32-byte descriptor steps); the kernel takes rowwise sa [M] and
//   colwise sb [N] scales (WsX) and applies them after any split-K reduction, in the staging of
//   the TMA store (pair by pair) or before the register stores. Grouped fp8 (GROUPED = 1, FP8 = 1:
//   `l12_fp8_pingpong`): row scale sa[global row], column scale sw[e * N + n] of the unit's expert e
//   (WsX sb = sw [E, N]); whole slabs apply them in the staging, the slab that crosses the
//   expert end and the no-TMA-store path in the masked register stores (store_acc_scaled).
// Grouped (GROUPED = 1, level 12; CL = 1, no split): M = R token rows sorted by
//   expert, offs [E] the cumulative row ends (WsX), B a 2-D map over the E*N weight rows of W
//   [E, N, K]; warp 1 lists the tiles per expert from offs (grouped.cuh), tile t -> (expert, m-tile
//   within the expert, column block), m-tiles fastest; A rows of a tile past the expert's end are
//   computed and discarded: the 64-row slab that crosses the end is stored from registers with the
//   row bound at the expert's end, whole slabs through the TMA store. The m-tile is the unit tile
//   (UM rows): cooperative NC*64*MR, ping-pong 64*MR (each consumer takes whole units, so a 64-row
//   ping-pong unit pads an expert's tail by < 64 rows, not < 128); the slab test runs per consumer
//   on the consumer's own rows (row0 = the unit's first row in ping-pong).
// Staged column scales (SSC = 1, FP8, no split; round 7, notes/l13.md, l15.md): warp 1 of the producer
//   warpgroup (idle after it listed the grouped tiles) copies each unit's column scales (UN floats of sb
//   [N], grouped sw [e, n]; 0 past N) into one shared slot, in unit order; the consumers' TMA-store
//   staging reads them as one 8-byte shared load per column pair instead of two __ldg. One slot, two
//   mbarrier pairs by unit parity: sfull[i & 1] (32 lane arrivals) says unit i's scales are in,
//   sempty[i & 1] (one arrival per consumer warp that reads unit i) says unit i's reader is done;
//   unit i is written only after unit i-1 was released, so a parity wait is never two phases off.
//   The copy runs a whole main loop ahead of the epilogue that reads it (one slot suffices while an
//   epilogue is shorter than a main loop; otherwise the next unit's reader waits for the slot).
// Paired units (PAIRS = 1, grouped, no split; round 7, NOT yet measured): the tile list is walked in pairs of
//   consecutive tiles: CTA cid takes pairs P = cid, cid + #CTAs, ..., and units 2j, 2j+1 of its list are tiles
//   2P, 2P+1 (the list holds m-tiles fastest, so a pair is two m-tiles of one weight block whenever the expert
//   has two more m-tiles in that column block): the same SM reads the W block twice back to back (ping-pong:
//   one unit per consumer), instead of two CTAs at whatever distance their drift puts them.
// Epilogue (EPI = 1, N % 8 == 0): each consumer stages 64x128 chunks of its accumulators in its
//   own 16 KiB of shared memory and one of its threads issues TMA bulk stores, left in flight
//   (waited for, for reading, before the buffer is rewritten; named barrier 2 + consumer).
//   EPI = 0 or N % 8 != 0: masked register stores (levels 1-3, 6). Tails of M, N, K: TMA
//   zero-fill on the loads, clipping / masks on the stores.
#pragma once
#include "mma_small.cuh"
#include "grouped.cuh"

namespace ladder {

template <int R>
__device__ __forceinline__ void setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R)); }
template <int R>
__device__ __forceinline__ void setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R)); }

__device__ __forceinline__ u32 cluster_ctarank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
// every thread of every CTA of the cluster; release/acquire orders smem (and mbarrier init)
__device__ __forceinline__ void cluster_sync_all() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n"
               "barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// arrive on the mbarrier at the same smem offset in CTA `cta` of the cluster. The default
// semantics (release at CTA scope), not .release.cluster: the arrival only says "this warp's
// wgmma reads of the stage are done" (wgmma.wait_group already ordered them), and a cluster-scope
// release is a memory fence per arrival: on the H200 it stalled the consumers ("waiting on a
// memory barrier", 35 % of issue stalls) and made the cluster builds ~2x slower (notes/l08.md).
// -DLADDER_REMOTE_RELEASE_CLUSTER restores the fenced form, to measure it again.
__device__ __forceinline__ void mbar_arrive_remote(u64* bar, u32 cta) {
#ifdef LADDER_REMOTE_RELEASE_CLUSTER
  asm volatile(
      "{\n"
      ".reg .b32 ra;\n"
      "mapa.shared::cluster.u32 ra, %0, %1;\n"
      "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [ra];\n"
      "}\n" ::"r"(smem_u32(bar)), "r"(cta) : "memory");
#else
  asm volatile(
      "{\n"
      ".reg .b32 ra;\n"
      "mapa.shared::cluster.u32 ra, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [ra];\n"
      "}\n" ::"r"(smem_u32(bar)), "r"(cta) : "memory");
#endif
}
// 2-D TMA load multicast to the CTAs in `mask`: same smem offset, each CTA's own mbarrier at
// `bar`'s offset gets the transaction bytes
__device__ __forceinline__ void tma_load_2d_mc(void* dst, const TmaMap* map, u64* bar, int c0, int c1, unsigned short mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%3, %4}], [%2], %5;\n"
      ::"r"(smem_u32(dst)), "l"(gaddr(map)), "r"(smem_u32(bar)), "r"(c0), "r"(c1), "h"(mask) : "memory");
}

template <int NACC>
__device__ __forceinline__ void wgmma_k16(float (&d)[NACC], u64 da, u64 db, int scale_d);
template <>
__device__ __forceinline__ void wgmma_k16<64>(float (&d)[64], u64 da, u64 db, int scale_d) {
  wgmma_m64n128k16_bf16(d, da, db, scale_d);
}
template <>
__device__ __forceinline__ void wgmma_k16<48>(float (&d)[48], u64 da, u64 db, int scale_d) {
  wgmma_m64n96k16_bf16(d, da, db, scale_d);
}
template <>
__device__ __forceinline__ void wgmma_k16<96>(float (&d)[96], u64 da, u64 db, int scale_d) {
  wgmma_m64n192k16_bf16(d, da, db, scale_d);
}
template <>
__device__ __forceinline__ void wgmma_k16<128>(float (&d)[128], u64 da, u64 db, int scale_d) {
  wgmma_m64n256k16_bf16(d, da, db, scale_d);
}

template <int NC, int PINGPONG, int MR, int BNW, int D, int CL, int SPLITK, int GROUP, int EPI, int FP8 = 0, int GROUPED = 0, int SSC = 0,
          int PAIRS = 0>
struct WsCfg {
  static constexpr int KE = FP8 ? 128 : 64;                      // K elements per stage: 128 bytes per row either way
  static constexpr int UM = PINGPONG ? 64 * MR : NC * 64 * MR;   // rows of one unit tile
  static constexpr int UN = BNW;                                 // columns of one unit tile
  static constexpr int NACC = BNW / 2;                           // f32 per thread per m64 slab
  static constexpr int A_BYTES = UM * BK * 2;
  static constexpr int B_BYTES = UN * BK * 2;
  static constexpr int STAGE = A_BYTES + B_BYTES;
  static constexpr int THREADS = 128 * (1 + NC);
  static constexpr int NCT = 128 * NC;                           // consumer threads
  static constexpr int EMPTY_COUNT = 4 * (PINGPONG ? 1 : NC) * CL;
  static constexpr int STAGING = EPI ? NC * 16384 : 0;           // per consumer: 64 rows x 128 cols bf16
  static constexpr int DYN_SMEM = D * STAGE + STAGING + 1024;
  static_assert(NC == 1 || NC == 2, "one or two consumer warpgroups");
  static_assert(!PINGPONG || NC == 2, "ping-pong needs two consumers");
  static_assert(BNW == 128 || BNW == 192 || BNW == 256 || (BNW == 96 && !EPI),
                "wgmma n128, n192 or n256 (whole 64-column store boxes); n96 only with register stores");
  static_assert(!FP8 || BNW != 192, "fp8: n128 or n256");
  static_assert(MR * NACC <= 128, "accumulators per thread");
  static_assert(CL == 1 || CL == 2, "cluster of 1 or 2");
  static_assert(!SPLITK || (!PINGPONG && (CL == 1 || SPLITK == 2)), "split-K only cooperative, no cluster (stream-K: cluster 1 or 2)");
  static_assert(EPI >= 0 && EPI <= 2, "epilogue: 0 register stores, 1 TMA store per consumer, 2 TMA store per warp");
  static_assert(DYN_SMEM + 8 * (2 * D + 2) + 16 <= 227 * 1024, "fits the 227 KiB per-block limit");
  static_assert(A_BYTES % 1024 == 0 && B_BYTES % (1024 * CL) == 0, "1024-aligned swizzle atoms");
  static_assert(!GROUPED || (CL == 1 && !SPLITK), "grouped: no cluster, no split");
  static_assert(!SSC || (FP8 && !SPLITK && EPI == 1), "staged column scales: fp8, no split, the per-consumer TMA-store epilogue");
  static constexpr int SSC_FLOATS = SSC ? UN : 1;                // the column-scale slot (static shared memory)
  static_assert(!PAIRS || (GROUPED && !SPLITK), "paired units: the grouped tile list, no split");
  static constexpr int CLUSTER = CL;
};

// The registry's promise for a "ws" build (registry.Level.tile_mnk = the unit tile UM x UN x KE,
// cluster = CL): the CPU build test passes -DLADDER_EXPECT_TILE_M/N/K and -DLADDER_EXPECT_CLUSTER,
// and each entry point static_asserts them, because the launchers size the A box, the grid and
// the grouped grid bound from tile_mnk.
template <class Cfg>
constexpr bool ws_matches_registry() {
#ifdef LADDER_EXPECT_TILE_M
  return Cfg::UM == LADDER_EXPECT_TILE_M && Cfg::UN == LADDER_EXPECT_TILE_N && Cfg::KE == LADDER_EXPECT_TILE_K &&
         Cfg::CLUSTER == LADDER_EXPECT_CLUSTER;
#else
  return true;
#endif
}

// What levels 12-14 add to the kernel's arguments: fp8 scales (rowwise sa [M], colwise sb [N]:
// C = acc * sa[row] * sb[col], applied after any split-K reduction) and the grouped offsets.
struct WsX { const float* sa; const float* sb; const int* offs; int E; };

template <int NACC, int FP8>
__device__ __forceinline__ void ws_mma(float (&d)[NACC], u64 da, u64 db, int scale_d) {
  if constexpr (FP8) {
    if constexpr (NACC == 64) wgmma_m64n128k32_e4m3(d, da, db, scale_d);
    else wgmma_m64n256k32_e4m3(d, da, db, scale_d);
  } else {
    wgmma_k16<NACC>(d, da, db, scale_d);
  }
}

// fp8 epilogue scales on one 64-row slab (rows row0.., columns col0..; the wgmma layout of store_acc)
template <int NACC>
__device__ __forceinline__ void apply_scales(float (&acc)[NACC], const float* __restrict__ sa, const float* __restrict__ sb,
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

// Which units a CTA owns and what each covers (one definition, read by producer and consumers).
struct WsUnit { int t, kt0, kt1, nseg, own, slot; };
template <int SPLITK, int PAIRS = 0>
struct WsWork {
  int cid, ncl, tiles, nkt, S, ks;   // split-K: S splits of ks K tiles; stream-K: S tail CTAs, ks = dp tiles
  long long iters;                   // stream-K: K iterations of the tail tiles
  int lmax;                          // stream-K: most tiles one CTA's range touches (workspace slots per CTA)
  __device__ __forceinline__ void init() {
    if (SPLITK == 2) {
      iters = static_cast<long long>(tiles - ks) * nkt;
      const long long span = S > 0 ? (iters + S - 1) / S : 0;
      lmax = static_cast<int>((span + nkt - 1) / nkt) + 1;
    }
  }
  __device__ __forceinline__ long long sk_start(int p) const { return (static_cast<long long>(p) * iters) / S; }
  // the tail CTA whose range holds iteration x: the largest p with sk_start(p) <= x
  __device__ __forceinline__ int sk_owner(long long x) const { return static_cast<int>(((x + 1) * S + iters - 1) / iters) - 1; }
  __device__ __forceinline__ int count() const {
    if (PAIRS) {   // pairs P = cid, cid + ncl, ... < ceil(tiles / 2); the last tile alone if tiles is odd
      const int pairs = (tiles + 1) / 2, np = cid < pairs ? (pairs - cid + ncl - 1) / ncl : 0;
      return np ? 2 * np - (2 * (cid + (np - 1) * ncl) + 1 >= tiles ? 1 : 0) : 0;
    }
    if (SPLITK != 2) {
      const int units = tiles * S;
      return cid < units ? (units - cid + ncl - 1) / ncl : 0;
    }
    int n = cid < ks ? (ks - cid + ncl - 1) / ncl : 0;
    if (S > 0 && cid < S) {
      const long long x0 = sk_start(cid), x1 = sk_start(cid + 1);
      if (x1 > x0) n += static_cast<int>((x1 - 1) / nkt - x0 / nkt) + 1;
    }
    return n;
  }
  __device__ __forceinline__ WsUnit unit(int i) const {
    WsUnit w;
    if (PAIRS) {
      w.t = 2 * (cid + (i >> 1) * ncl) + (i & 1);
      w.own = 0; w.nseg = 1; w.slot = w.t; w.kt0 = 0; w.kt1 = ks < nkt ? ks : nkt;
      return w;
    }
    if (SPLITK != 2) {
      const int u = cid + i * ncl;
      w.t = u / S; w.own = u - w.t * S; w.nseg = S; w.slot = u;
      w.kt0 = w.own * ks; w.kt1 = w.kt0 + ks < nkt ? w.kt0 + ks : nkt;
      return w;
    }
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
    if (SPLITK != 2) return t * S + o;
    const long long a = static_cast<long long>(t - ks) * nkt;
    const int p = sk_owner(a) + o;
    return p * lmax + static_cast<int>((t - ks) - sk_start(p) / nkt);
  }
};

struct WsOrder {
  int tiles_mc, tiles_n, group;
  __device__ __forceinline__ void coords(int t, int& tmc, int& tn) const {
    const int per_group = group * tiles_n;
    const int g = t / per_group;
    const int first = g * group;
    const int rows = tiles_mc - first < group ? tiles_mc - first : group;
    const int r = t - g * per_group;
    tmc = first + r % rows;
    tn = r / rows;
  }
};

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

// fp8: the same staging with the scales applied pair by pair (s0, s1: the thread's two row
// scales; sbc: the column scales from the chunk's first column; columns >= N read as 0), so the
// scale values live only as long as one pair (a whole-slab pass spilled at 168 registers)
// SM = 1: sbc points into the shared column-scale slot (zero past N): one 8-byte shared load per pair
template <int NACC, int CH, int SM = 0>
__device__ __forceinline__ void stage_chunk128_scaled(const float (&acc)[NACC], unsigned char* buf, int tid_wg,
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

// Per-warp epilogue (EPI = 2): warp w of a consumer owns rows 16w..16w+15 of each 64-row slab (the
// wgmma accumulator layout), so it can stage and store them alone: a 16-row x 64-column box (2 KiB,
// 128B-swizzled; 1024-aligned, so the swizzle row is r & 7) in one of the warp's two 2 KiB halves,
// fence, __syncwarp, lane 0 issues the TMA store of a 16x64 box and moves on. No named barrier:
// before writing a half, lane 0 waits until at most one store group (the other half's) is still
// reading (wait_group.read 1), i.e. the store two boxes back has read this half. Box b of the slab
// holds accumulator columns 64b..64b+63 (acc indices 32b..32b+31); scales as stage_chunk128_scaled.
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

// grouped fp8: masked register stores with the scales applied pair by pair (acc untouched): row
// scales sa[row] for rows < mend (the expert's end; rows past it are not stored), column scales
// sbe[col] (sbe = sw + e * N: the unit's expert), columns >= N read as 0 and not stored
template <int NACC>
__device__ __forceinline__ void store_acc_scaled(const float (&acc)[NACC], bf16_t* __restrict__ C, int mend, int N,
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

template <class Cfg, int NC, int PINGPONG, int MR, int D, int CL, int SPLITK, int GROUP, int EPI, int FP8 = 0, int GROUPED = 0,
          int SSC = 0, int PAIRS = 0>
__device__ __forceinline__ void ws_gemm_body(const TmaMap* tmA, const TmaMap* tmB, const TmaMap* tmC,
                                             bf16_t* __restrict__ C, int M, int N, int K, int c_tma,
                                             float* __restrict__ ws, int* __restrict__ cnt, int S, int ks,
                                             const WsX x = WsX{nullptr, nullptr, nullptr, 0}) {
  extern __shared__ unsigned char dsmem[];
  __shared__ __align__(8) u64 full[D];
  __shared__ __align__(8) u64 empty[D];
  __shared__ __align__(8) u64 mdone[2];   // ping-pong: consumer c finished a main loop (count 4 warps)
  __shared__ int last_flag;
  __shared__ unsigned short gpre[GROUPED ? grp::MAX_E_WS + 1 : 1];   // grouped: m-tiles per expert (prefix); row ends from offs
  __shared__ __align__(8) u64 sfull[SSC ? 2 : 1];                     // SSC: unit i's column scales are in the slot
  __shared__ __align__(8) u64 sempty[SSC ? 2 : 1];                    // SSC: unit i's readers are done with it
  __shared__ __align__(16) float ssc[Cfg::SSC_FLOATS];                // SSC: the unit's column scales (0 past N)
  unsigned char* base = align1024(dsmem);
  const int tid = threadIdx.x, wg = tid >> 7, tid_wg = tid & 127;
  const u32 rank = CL > 1 ? cluster_ctarank() : 0u;
  if (tid == 0) {
    prefetch_tmap(tmA);
    prefetch_tmap(tmB);
    if (EPI && c_tma) prefetch_tmap(tmC);
#pragma unroll
    for (int s = 0; s < D; ++s) { mbar_init(&full[s], 1); mbar_init(&empty[s], Cfg::EMPTY_COUNT); }
    if (PINGPONG) { mbar_init(&mdone[0], 4); mbar_init(&mdone[1], 4); }
    if (SSC) {
#pragma unroll
      for (int p = 0; p < 2; ++p) { mbar_init(&sfull[p], 32); mbar_init(&sempty[p], 4 * (PINGPONG ? 1 : NC)); }
    }
    fence_mbar_init();
  }
  const int tiles_m = (M + Cfg::UM - 1) / Cfg::UM;
  const WsOrder order{(tiles_m + CL - 1) / CL, (N + Cfg::UN - 1) / Cfg::UN, GROUP};
  if constexpr (GROUPED) { if (tid >= 32 && tid < 64) grp::build_plan(x.offs, x.E, Cfg::UM, 1, gpre, static_cast<int*>(nullptr), tid - 32); }
  if (CL > 1) cluster_sync_all(); else __syncthreads();

  const int cid = static_cast<int>(blockIdx.x) / CL, ncl = static_cast<int>(gridDim.x) / CL;
  const int nkt = (K + Cfg::KE - 1) / Cfg::KE;
  const int ntiles = GROUPED ? static_cast<int>(gpre[GROUPED ? x.E : 0]) * order.tiles_n : order.tiles_mc * order.tiles_n;
  // tile t -> (A row0, B row0, column block, row end): dense via the grouped (L2) order; grouped:
  // expert e's tiles, m-tiles fastest (the m-tiles of one weight block run side by side: W from L2)
  auto locate = [&](int t, int& arow, int& brow, int& tn, int& mend) {
    if constexpr (GROUPED) {
      // expert e's tiles are [gpre[e] * NB, gpre[e + 1] * NB): e = the largest with gpre[e] <= t / NB
      const int e = grp::expert_of(t / order.tiles_n, gpre, x.E), beg = e ? __ldg(x.offs + e - 1) : 0, end = __ldg(x.offs + e);
      const int mt_e = (end - beg + Cfg::UM - 1) / Cfg::UM, local = t - static_cast<int>(gpre[e]) * order.tiles_n;
      tn = local / mt_e;
      arow = beg + (local - tn * mt_e) * Cfg::UM;
      brow = e * N + tn * Cfg::UN;
      mend = end;
    } else {
      int tmc;
      order.coords(t, tmc, tn);
      arow = (tmc * CL + static_cast<int>(rank)) * Cfg::UM;
      brow = tn * Cfg::UN;
      mend = M;
    }
  };
  WsWork<SPLITK, PAIRS> work{cid, ncl, ntiles, nkt, SPLITK ? S : 1, SPLITK ? ks : nkt, 0, 0};
  work.init();
  const int mine = work.count();

  if (wg == 0) {
    // ------------------------------------------------------------------ producer warpgroup
    setmaxnreg_dec<40>();
    if (SSC && tid >= 32 && tid < 64) {
      // warp 1: each unit's column scales into the slot, in unit order (loads issued before the wait
      // for the previous unit's release, so only the shared stores wait)
      const int l = tid - 32;
      for (int i = 0; i < mine; ++i) {
        const WsUnit w = work.unit(i);
        int arow, brow, tn, mend;
        locate(w.t, arow, brow, tn, mend);
        const int col0 = tn * Cfg::UN;
        const float* __restrict__ src = (GROUPED ? x.sb + (brow - col0) : x.sb) + col0;
        float v[Cfg::UN / 32];
#pragma unroll
        for (int j = 0; j < Cfg::UN / 32; ++j) v[j] = col0 + 32 * j + l < N ? __ldg(src + 32 * j + l) : 0.0f;
        if (i > 0) mbar_wait(&sempty[(i - 1) & 1], ((i - 1) >> 1) & 1);
#pragma unroll
        for (int j = 0; j < Cfg::UN / 32; ++j) ssc[32 * j + l] = v[j];
        mbar_arrive(&sfull[i & 1]);
      }
    }
    if (tid == 0) {
      int q = 0;
      for (int i = 0; i < mine; ++i) {
        const WsUnit w = work.unit(i);
        int row0, col0, tn, mend;
        locate(w.t, row0, col0, tn, mend);
        for (int kt = w.kt0; kt < w.kt1; ++kt, ++q) {
          const int s = q % D;
          if (q >= D) mbar_wait(&empty[s], ((q / D) - 1) & 1);
          unsigned char* st = base + s * Cfg::STAGE;
          mbar_arrive_expect_tx(&full[s], Cfg::STAGE);
          tma_load_2d(st, tmA, &full[s], kt * Cfg::KE, row0);
          if (CL > 1) {
            tma_load_2d_mc(st + Cfg::A_BYTES + rank * (Cfg::B_BYTES / CL), tmB, &full[s], kt * Cfg::KE,
                           col0 + static_cast<int>(rank) * (Cfg::UN / CL), static_cast<unsigned short>((1 << CL) - 1));
          } else {
            tma_load_2d(st + Cfg::A_BYTES, tmB, &full[s], kt * Cfg::KE, col0);
          }
        }
      }
    }
  } else {
    // ------------------------------------------------------------------ consumer warpgroups
    setmaxnreg_inc<232>();
    const int c = wg - 1;
    const int ct = c * 128 + tid_wg;            // consumer thread id (split-K layout)
    const int a_off = PINGPONG ? 0 : c * 64 * MR * 128;
    float acc[MR][Cfg::NACC];
    int q = 0;
    int nbox = 0;   // EPI = 2: boxes this warp has stored (its staging half alternates)
    auto release = [&](int r) {
      if ((tid & 31) == 0) {
        mbar_arrive(&empty[r % D]);
        if (CL > 1) mbar_arrive_remote(&empty[r % D], rank ^ 1u);
      }
    };
    for (int i = 0; i < mine; ++i) {
      const WsUnit w = work.unit(i);
      const int t = w.t, nk = w.kt1 - w.kt0;
      if (PINGPONG && (i & 1) != c) { q += nk; continue; }
      if (PINGPONG && i > 0) {
        // Unit i-1 is the other consumer's ((i-1)/2-th of its units). Wait until it has passed
        // every full-barrier wait of that unit: then every stage load before this unit's first
        // has completed, so each full[s] this unit waits on is at most one round ahead (a
        // parity wait cannot tell round r from round r-2), and the two main loops alternate.
        mbar_wait(&mdone[c ^ 1], ((i - 1) >> 1) & 1);
        __syncwarp();
      }
      int arow, brow, tn, mend;
      locate(t, arow, brow, tn, mend);
      for (int j = 0; j < nk; ++j, ++q) {
        const int s = q % D;
        mbar_wait(&full[s], (q / D) & 1);
        __syncwarp();   // wgmma is .aligned: the warp reconverges after the spin
        const u32 sa = smem_u32(base + s * Cfg::STAGE) + a_off;
        const u32 sb = smem_u32(base + s * Cfg::STAGE + Cfg::A_BYTES);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / WGMMA_K; ++kk) {
#pragma unroll
          for (int mr = 0; mr < MR; ++mr)
            ws_mma<Cfg::NACC, FP8>(acc[mr], make_desc_sw128(sa + mr * 64 * 128 + kk * 32),
                                   make_desc_sw128(sb + kk * 32), (j == 0 && kk == 0) ? 0 : 1);
        }
        wgmma_commit();
        wgmma_wait<1>();
        if (j > 0) release(q - 1);   // the MMA of the previous stage is complete
        __syncwarp();
      }
      if (PINGPONG && (tid & 31) == 0) mbar_arrive(&mdone[c]);   // this unit's waits are done
      wgmma_wait<0>();
      release(q - 1);
      __syncwarp();
      const int row0 = arow + (PINGPONG ? 0 : c * 64 * MR), col0 = tn * Cfg::UN;
      if (SPLITK && w.nseg > 1) {
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
        if (!last_flag) continue;
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
      }
      // fp8 column scales of this unit: dense sb [N]; grouped sw [E, N] at the unit's expert e
      // (brow - col0 = e * N), read in the epilogue whichever way the slab is stored
      const float* __restrict__ sbu = GROUPED ? x.sb + (brow - col0) : x.sb;
      if constexpr (SSC) mbar_wait(&sfull[i & 1], (i >> 1) & 1);   // this unit's column scales are in the slot
      if (FP8 && !GROUPED && !(EPI && c_tma)) {
#pragma unroll
        for (int mr = 0; mr < MR; ++mr) apply_scales<Cfg::NACC>(acc[mr], x.sa, x.sb, M, N, row0 + mr * 64, col0, tid_wg);
      }
      if (EPI == 2 && c_tma) {
        // per-warp writeback (see stage_box16): this warp's 16 rows of each slab, box by box,
        // double-buffered in its 4 KiB of the consumer's staging; no named barrier. A warp whose 16
        // rows cross the expert end (grouped) stores them from registers, masked at the end.
        const int wq = tid_wg >> 5, l = tid_wg & 31;
        unsigned char* wbuf = base + D * Cfg::STAGE + c * 16384 + wq * 4096;
#pragma unroll
        for (int mr = 0; mr < MR; ++mr) {
          const int r0 = row0 + mr * 64 + 16 * wq;   // this warp's first row
          if (r0 >= mend) continue;
          if (GROUPED && r0 + 16 > mend) {
            if constexpr (FP8) store_acc_scaled<Cfg::NACC>(acc[mr], C, mend, N, row0 + mr * 64, col0, tid_wg, x.sa, sbu);
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
      } else if (EPI == 1 && c_tma) {
        // writeback through shared memory: per 64x128 chunk, wait until the previous chunk's
        // bulk store has read the buffer, stage (st.shared, swizzled), fence to the async
        // proxy, one thread issues the two box stores (clipped at the edges) and moves on:
        // the last chunk's store drains while the next unit's MMAs run.
        unsigned char* buf = base + D * Cfg::STAGE + c * 16384;
#pragma unroll
        for (int mr = 0; mr < MR; ++mr) {
          if constexpr (FP8 && GROUPED) {
            if (row0 + mr * 64 + 64 > mend) {   // the slab crosses the expert end: scaled masked register stores, no staging
              store_acc_scaled<Cfg::NACC>(acc[mr], C, mend, N, row0 + mr * 64, col0, tid_wg, x.sa, sbu);
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
              if (ch == 0) stage_chunk128_scaled<Cfg::NACC, 0, SSC>(acc[mr], buf, tid_wg, s0, s1, sbc, N - c0);
              if constexpr (Cfg::UN > 128) { if (ch == 1) stage_chunk128_scaled<Cfg::NACC, 1, SSC>(acc[mr], buf, tid_wg, s0, s1, sbc, N - c0); }
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
      } else {
#pragma unroll
        for (int mr = 0; mr < MR; ++mr) {
          if constexpr (FP8 && GROUPED) store_acc_scaled<Cfg::NACC>(acc[mr], C, mend, N, row0 + mr * 64, col0, tid_wg, x.sa, sbu);
          else store_acc<Cfg::NACC>(acc[mr], C, mend, N, row0 + mr * 64, col0, tid_wg);
        }
      }
      if constexpr (SSC) {   // this warp's last read of the slot is behind it: release it for unit i + 1
        __syncwarp();
        if ((tid & 31) == 0) mbar_arrive(&sempty[i & 1]);
      }
    }
    if (EPI == 1 && c_tma && tid_wg == 0) tma_store_wait_all();   // smem stays valid until read
    if (EPI == 2 && c_tma && (tid & 31) == 0) tma_store_wait_all();
  }
  __syncwarp();
  if (CL > 1) cluster_sync_all();   // no CTA exits while its peer may still arrive on its barriers
}

}  // namespace ladder

// A build as named fields: a level file writes `struct L9 : ladder::WsBuild { ... }` overriding
// only what differs from these defaults (two cooperative consumers on one m64 slab each, 256-wide
// tile, 4 stages, no cluster, no split, 16-row tile groups, TMA-store epilogue, bf16, dense), and
// instantiates it with LADDER_WS_LEVEL (levels 7-10: the dense bf16 arguments) or LADDER_WS_LEVEL_X
// (levels 12-15: + fp8 scales and grouped offsets).
namespace ladder {
struct WsBuild {
  static constexpr int consumers = 2;    // consumer warpgroups (1 or 2)
  static constexpr int pingpong = 0;     // 1: consumers alternate whole units; 0: they split one tile by rows
  static constexpr int m64_slabs = 1;    // m64 slabs per consumer (unit rows = 64 x slabs, x consumers if cooperative)
  static constexpr int tile_n = 256;     // unit columns (wgmma N)
  static constexpr int stages = 4;       // pipeline stages in shared memory
  static constexpr int cluster = 1;      // CTAs per cluster (2: B multicast)
  static constexpr int splitk = 0;       // 0 none, 1 split-K, 2 stream-K tail
  static constexpr int group_rows = 16;  // rows of tiles per group in the L2-friendly order
  static constexpr int tma_store = LADDER_EPI;
  static constexpr int fp8 = 0;          // e4m3 operands, scales in the epilogue
  static constexpr int grouped = 0;      // grouped (MoE) tile list from the offsets
  static constexpr int stage_scales = 0; // fp8: 1 = the unit's column scales staged in shared memory by a producer warp
  static constexpr int unit_pairs = 0;   // grouped: 1 = a CTA takes consecutive tiles in pairs (two m-tiles of a weight block)
};
}  // namespace ladder
#define LADDER_WS_LEVEL(NAME, B)                                                                             \
  static_assert(!B::fp8 && !B::grouped, "LADDER_WS_LEVEL: dense bf16 (fp8 / grouped: LADDER_WS_LEVEL_X)");    \
  LADDER_WS_KERNEL(NAME, B::consumers, B::pingpong, B::m64_slabs, B::tile_n, B::stages, B::cluster, B::splitk, \
                   B::group_rows, B::tma_store)
#define LADDER_WS_LEVEL_X(NAME, B)                                                                            \
  LADDER_WS_KERNEL_X(NAME, B::consumers, B::pingpong, B::m64_slabs, B::tile_n, B::stages, B::cluster, B::splitk, \
                     B::group_rows, B::tma_store, B::fp8, B::grouped, B::stage_scales, B::unit_pairs)

// Levels 12-15: the same body with the fp8 scales / grouped offsets (WsX) as extra arguments.
#define LADDER_WS_KERNEL_X(NAME, NC, PP, MR, BNW, D, CL, SK, GROUP, EPI, FP8, GRP, SSC, PR)                  \
  namespace { using NAME##_cfg = ladder::WsCfg<NC, PP, MR, BNW, D, CL, SK, GROUP, EPI, FP8, GRP, SSC, PR>; } \
  static_assert(ladder::ws_matches_registry<NAME##_cfg>(), "registry tile_mnk / cluster != the build's unit tile"); \
  extern "C" __global__ void __launch_bounds__(NAME##_cfg::THREADS, 1) __cluster_dims__(CL, 1, 1)         \
  NAME(const __grid_constant__ ladder::TmaMap tmA, const __grid_constant__ ladder::TmaMap tmB,            \
       const __grid_constant__ ladder::TmaMap tmC, bf16_t* __restrict__ C, int M, int N, int K, int c_tma, \
       float* __restrict__ ws, int* __restrict__ cnt, int S, int ks, const float* __restrict__ sa,        \
       const float* __restrict__ sb, const int* __restrict__ offs, int E) {                               \
    ladder::ws_gemm_body<NAME##_cfg, NC, PP, MR, D, CL, SK, GROUP, EPI, FP8, GRP, SSC, PR>(                \
        &tmA, &tmB, &tmC, C, M, N, K, c_tma, ws, cnt, S, ks, ladder::WsX{sa, sb, offs, E});               \
  }

// One entry point per build: NAME, consumers, ping-pong, m64 slabs per consumer, BN, stages,
// cluster size, split-K, group rows, TMA-store epilogue (1; 0 = register stores).
#define LADDER_WS_KERNEL(NAME, NC, PP, MR, BNW, D, CL, SK, GROUP, EPI)                                    \
  namespace { using NAME##_cfg = ladder::WsCfg<NC, PP, MR, BNW, D, CL, SK, GROUP, EPI>; }                 \
  static_assert(ladder::ws_matches_registry<NAME##_cfg>(), "registry tile_mnk / cluster != the build's unit tile"); \
  extern "C" __global__ void __launch_bounds__(NAME##_cfg::THREADS, 1) __cluster_dims__(CL, 1, 1)         \
  NAME(const __grid_constant__ ladder::TmaMap tmA, const __grid_constant__ ladder::TmaMap tmB,            \
       const __grid_constant__ ladder::TmaMap tmC, bf16_t* __restrict__ C, int M, int N, int K, int c_tma, \
       float* __restrict__ ws, int* __restrict__ cnt, int S, int ks) {                                     \
    ladder::ws_gemm_body<NAME##_cfg, NC, PP, MR, D, CL, SK, GROUP, EPI>(&tmA, &tmB, &tmC, C, M, N, K, c_tma, \
                                                                       ws, cnt, S, ks);                   \
  }
