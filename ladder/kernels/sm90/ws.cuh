// ws.cuh: the warp-specialized persistent GEMM of levels 7-15 and their variants (one template, one
// build = one `struct LN : ladder::WsBuild` in a level file). This file is level 7's engine; each idea a
// later level adds is a named policy in a header of its own, which the level's file includes and names
// in its build (the defaults below are the policies' level-7 forms, with the same hooks):
//   consumer_mode  Cooperative (default) | PingPong             ws_pingpong.cuh   (level 9 variants, 12, 15)
//   cluster        NoCluster (default)   | Multicast2           ws_cluster.cuh    (level 8, 9, 13)
//   split          NoSplit (default)     | SplitK | StreamK     ws_splitk.cuh     (level 10, 14; stream-K variants)
//   tiles          DenseTiles (default)  | GroupedTiles | GroupedPairs  ws_grouped.cuh (level 12, 15)
//   numerics       Bf16 (default)        | Fp8 | Fp8StagedScales     ws_fp8.cuh, ws_fp8_ssc.cuh (level 13-15)
//   epilogue       EpiTmaStore (default; EpiRegs with -DLADDER_REG_STORE) ws_epilogue.cuh | EpiPerWarp ws_epi_warp.cuh
// Unit tile N (tile_n): 128, 192 or 256 (wgmma m64n128 / m64n192 / m64n256; the mid-shape builds of
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
// Cooperative consumers (default): the NC consumers split one unit tile by rows: consumer c owns
//   rows [64*MR*c, 64*MR*(c+1)); every consumer reads every stage (empty count 4*NC*CL).
// Work list: units u = cluster_id + i * #clusters (persistent: #clusters <= #SMs / CL and <=
//   cuOccupancyMaxActiveClusters, gpu.max_active_clusters); u -> (tile t = u / S, split u % S) (S = 1
//   without split-K); t -> (cluster-row, column) in GROUP-row grouped order (level 6's L2-friendly
//   order), row tile = cluster-row * CL + rank. Tails of M, N, K: TMA zero-fill on the loads,
//   clipping / masks on the stores.
#pragma once
#include "mma_small.cuh"

namespace ladder {

template <int R>
__device__ __forceinline__ void setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R)); }
template <int R>
__device__ __forceinline__ void setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R)); }

template <int NACC>
__device__ __forceinline__ void wgmma_k16(float (&d)[NACC], u64 da, u64 db, int scale_d);
template <>
__device__ __forceinline__ void wgmma_k16<64>(float (&d)[64], u64 da, u64 db, int scale_d) { wgmma_m64n128k16_bf16(d, da, db, scale_d); }
template <>
__device__ __forceinline__ void wgmma_k16<48>(float (&d)[48], u64 da, u64 db, int scale_d) { wgmma_m64n96k16_bf16(d, da, db, scale_d); }
template <>
__device__ __forceinline__ void wgmma_k16<96>(float (&d)[96], u64 da, u64 db, int scale_d) { wgmma_m64n192k16_bf16(d, da, db, scale_d); }
template <>
__device__ __forceinline__ void wgmma_k16<128>(float (&d)[128], u64 da, u64 db, int scale_d) { wgmma_m64n256k16_bf16(d, da, db, scale_d); }

// What levels 12-15 add to the kernel's arguments: fp8 scales (rowwise sa [M], colwise sb [N]:
// C = acc * sa[row] * sb[col], applied after any split-K reduction) and the grouped offsets.
struct WsX { const float* sa; const float* sb; const int* offs; int E; };

// Which units a CTA owns and what each covers (one definition, read by producer and consumers):
// data-parallel tiles, each in S K-splits (S = 1 without split-K). ws_splitk.cuh: the stream-K list;
// ws_grouped.cuh: the paired list (same fields).
struct WsUnit { int t, kt0, kt1, nseg, own, slot; };
struct WsWork {
  int cid, ncl, tiles, nkt, S, ks;   // split-K: S splits of ks K tiles
  long long iters;                   // (stream-K only)
  int lmax;                          // (stream-K only)
  __device__ __forceinline__ void init() {}
  __device__ __forceinline__ int count() const {
    const int units = tiles * S;
    return cid < units ? (units - cid + ncl - 1) / ncl : 0;
  }
  __device__ __forceinline__ WsUnit unit(int i) const {
    WsUnit w;
    const int u = cid + i * ncl;
    w.t = u / S; w.own = u - w.t * S; w.nseg = S; w.slot = u;
    w.kt0 = w.own * ks; w.kt1 = w.kt0 + ks < nkt ? w.kt0 + ks : nkt;
    return w;
  }
  // workspace slot of segment o of tile t (o != the caller's own)
  __device__ __forceinline__ int seg_slot(int t, int o) const { return t * S + o; }
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

// ---------------------------------------------------------------- the level-7 policies (defaults)
struct Cooperative {
  static constexpr int on = 0;
  static __device__ __forceinline__ void init(u64*) {}
  static __device__ __forceinline__ bool skip(int, int) { return false; }
  static __device__ __forceinline__ void wait_turn(u64*, int, int) {}
  static __device__ __forceinline__ void done(u64*, int, int) {}
};
struct NoCluster {
  static constexpr int size = 1;
  static __device__ __forceinline__ u32 rank() { return 0u; }
  static __device__ __forceinline__ void sync_start() { __syncthreads(); }
  static __device__ __forceinline__ void sync_exit() {}
  static __device__ __forceinline__ void release_peer(u64*, u32) {}
  template <class Cfg>
  static __device__ __forceinline__ void load_b(unsigned char* st, const TmaMap* tmB, u64* bar, int kc, int col0, u32) {
    tma_load_2d(st + Cfg::A_BYTES, tmB, bar, kc, col0);
  }
};
struct NoSplit { static constexpr int mode = 0; using work = WsWork; };
struct Bf16 {
  static constexpr int fp8 = 0, ssc = 0, KE = 64;
  template <int NACC>
  static __device__ __forceinline__ void mma(float (&d)[NACC], u64 da, u64 db, int scale_d) { wgmma_k16<NACC>(d, da, db, scale_d); }
};
struct DenseTiles {
  static constexpr int grouped = 0, pairs = 0, PLAN = 1;
  using work = WsWork;
  template <class Cfg>
  static __device__ __forceinline__ void plan(const WsX&, unsigned short*, int) {}
  static __device__ __forceinline__ int ntiles(const WsOrder& order, const unsigned short*, const WsX&) {
    return order.tiles_mc * order.tiles_n;
  }
  template <class Cfg>
  static __device__ __forceinline__ void locate(int t, int& arow, int& brow, int& tn, int& mend, const WsOrder& order,
                                                const unsigned short*, const WsX&, u32 rank, int M, int) {
    int tmc;
    order.coords(t, tmc, tn);
    arow = (tmc * Cfg::CL + static_cast<int>(rank)) * Cfg::UM;
    brow = tn * Cfg::UN;
    mend = M;
  }
};

}  // namespace ladder
#include "ws_epilogue.cuh"

namespace ladder {
// A build as named fields: a level file writes `struct L9 : ladder::WsBuild { ... }` overriding only
// what differs from these defaults (two cooperative consumers on one m64 slab each, 256-wide tile, 4
// stages, 16-row tile groups, and the level-7 policies above) and instantiates it with LADDER_WS_LEVEL
// (dense bf16 arguments) or LADDER_WS_LEVEL_X (+ fp8 scales and grouped offsets).
struct WsBuild {
  static constexpr int consumers = 2;    // consumer warpgroups (1 or 2)
  static constexpr int m64_slabs = 1;    // m64 slabs per consumer (unit rows = 64 x slabs, x consumers if cooperative)
  static constexpr int tile_n = 256;     // unit columns (wgmma N)
  static constexpr int stages = 4;       // pipeline stages in shared memory
  static constexpr int group_rows = 16;  // rows of tiles per group in the L2-friendly order
  using consumer_mode = Cooperative;
  using cluster = NoCluster;
  using split = NoSplit;
  using tiles = DenseTiles;
  using numerics = Bf16;
  using epilogue = typename WsEpiOf<LADDER_EPI>::type;
};

template <bool C, class A, class B> struct WsPick { using type = A; };
template <class A, class B> struct WsPick<false, A, B> { using type = B; };

template <class B>
struct WsCfg {
  using Pp = typename B::consumer_mode;
  using Cl = typename B::cluster;
  using Sp = typename B::split;
  using Tl = typename B::tiles;
  using Num = typename B::numerics;
  using Epi = typename B::epilogue;
  using Work = typename WsPick<Tl::pairs != 0, typename Tl::work, typename Sp::work>::type;
  static constexpr int NC = B::consumers, PINGPONG = Pp::on, MR = B::m64_slabs, BNW = B::tile_n, D = B::stages;
  static constexpr int CL = Cl::size, SPLITK = Sp::mode, GROUP = B::group_rows, EPI = Epi::mode;
  static constexpr int FP8 = Num::fp8, GROUPED = Tl::grouped, SSC = Num::ssc, PAIRS = Tl::pairs;
  static constexpr int KE = Num::KE;                             // K elements per stage: 128 bytes per row either way
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

template <class Cfg>
__device__ __forceinline__ void ws_gemm_body(const TmaMap* tmA, const TmaMap* tmB, const TmaMap* tmC,
                                             bf16_t* __restrict__ C, int M, int N, int K, int c_tma,
                                             float* __restrict__ ws, int* __restrict__ cnt, int S, int ks,
                                             const WsX x = WsX{nullptr, nullptr, nullptr, 0}) {
  using Pp = typename Cfg::Pp;
  using Cl = typename Cfg::Cl;
  using Tl = typename Cfg::Tl;
  using Num = typename Cfg::Num;
  constexpr int NC = Cfg::NC, PINGPONG = Cfg::PINGPONG, MR = Cfg::MR, D = Cfg::D, CL = Cfg::CL, SPLITK = Cfg::SPLITK;
  constexpr int GROUP = Cfg::GROUP, EPI = Cfg::EPI, FP8 = Cfg::FP8, GROUPED = Cfg::GROUPED, SSC = Cfg::SSC;
  extern __shared__ unsigned char dsmem[];
  __shared__ __align__(8) u64 full[D];
  __shared__ __align__(8) u64 empty[D];
  __shared__ __align__(8) u64 mdone[2];   // ping-pong: consumer c finished a main loop (count 4 warps)
  __shared__ int last_flag;
  __shared__ unsigned short gpre[Tl::PLAN];                           // grouped: m-tiles per expert (prefix); row ends from offs
  __shared__ __align__(8) u64 sfull[SSC ? 2 : 1];                     // SSC: unit i's column scales are in the slot
  __shared__ __align__(8) u64 sempty[SSC ? 2 : 1];                    // SSC: unit i's readers are done with it
  __shared__ __align__(16) float ssc[Cfg::SSC_FLOATS];                // SSC: the unit's column scales (0 past N)
  unsigned char* base = align1024(dsmem);
  const int tid = threadIdx.x, wg = tid >> 7, tid_wg = tid & 127;
  const u32 rank = Cl::rank();
  if (tid == 0) {
    prefetch_tmap(tmA);
    prefetch_tmap(tmB);
    if (EPI && c_tma) prefetch_tmap(tmC);
#pragma unroll
    for (int s = 0; s < D; ++s) { mbar_init(&full[s], 1); mbar_init(&empty[s], Cfg::EMPTY_COUNT); }
    Pp::init(mdone);
    if (SSC) {
#pragma unroll
      for (int p = 0; p < 2; ++p) { mbar_init(&sfull[p], 32); mbar_init(&sempty[p], 4 * (PINGPONG ? 1 : NC)); }
    }
    fence_mbar_init();
  }
  const int tiles_m = (M + Cfg::UM - 1) / Cfg::UM;
  const WsOrder order{(tiles_m + CL - 1) / CL, (N + Cfg::UN - 1) / Cfg::UN, GROUP};
  Tl::template plan<Cfg>(x, gpre, tid);
  Cl::sync_start();

  const int cid = static_cast<int>(blockIdx.x) / CL, ncl = static_cast<int>(gridDim.x) / CL;
  const int nkt = (K + Cfg::KE - 1) / Cfg::KE;
  const int ntiles = Tl::ntiles(order, gpre, x);
  // tile t -> (A row0, B row0, column block, row end)
  auto locate = [&](int t, int& arow, int& brow, int& tn, int& mend) {
    Tl::template locate<Cfg>(t, arow, brow, tn, mend, order, gpre, x, rank, M, N);
  };
  typename Cfg::Work work{cid, ncl, ntiles, nkt, SPLITK ? S : 1, SPLITK ? ks : nkt, 0, 0};
  work.init();
  const int mine = work.count();

  if (wg == 0) {
    // ------------------------------------------------------------------ producer warpgroup
    setmaxnreg_dec<40>();
    if constexpr (SSC) {
      if (tid >= 32 && tid < 64) Num::template produce<Cfg>(work, mine, locate, x, N, ssc, sfull, sempty, tid - 32);
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
          Cl::template load_b<Cfg>(st, tmB, &full[s], kt * Cfg::KE, col0, rank);
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
    int nbox = 0;   // per-warp epilogue: boxes this warp has stored (its staging half alternates)
    auto release = [&](int r) {
      if ((tid & 31) == 0) {
        mbar_arrive(&empty[r % D]);
        Cl::release_peer(&empty[r % D], rank);
      }
    };
    for (int i = 0; i < mine; ++i) {
      const WsUnit w = work.unit(i);
      const int t = w.t, nk = w.kt1 - w.kt0;
      if (Pp::skip(i, c)) { q += nk; continue; }
      Pp::wait_turn(mdone, c, i);
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
            Num::template mma<Cfg::NACC>(acc[mr], make_desc_sw128(sa + mr * 64 * 128 + kk * 32),
                                         make_desc_sw128(sb + kk * 32), (j == 0 && kk == 0) ? 0 : 1);
        }
        wgmma_commit();
        wgmma_wait<1>();
        if (j > 0) release(q - 1);   // the MMA of the previous stage is complete
        __syncwarp();
      }
      Pp::done(mdone, c, tid);
      wgmma_wait<0>();
      release(q - 1);
      __syncwarp();
      const int row0 = arow + (PINGPONG ? 0 : c * 64 * MR), col0 = tn * Cfg::UN;
      if constexpr (SPLITK != 0) {
        if (w.nseg > 1 && !Cfg::Sp::template reduce<Cfg>(acc, ws, cnt, last_flag, w, work, t, rank, ct)) continue;
      }
      // fp8 column scales of this unit: dense sb [N]; grouped sw [E, N] at the unit's expert e
      // (brow - col0 = e * N), read in the epilogue whichever way the slab is stored
      const float* __restrict__ sbu = GROUPED ? x.sb + (brow - col0) : x.sb;
      if constexpr (SSC) mbar_wait(&sfull[i & 1], (i >> 1) & 1);   // this unit's column scales are in the slot
      if constexpr (FP8 && !GROUPED) {
        if (!(EPI && c_tma)) {
#pragma unroll
          for (int mr = 0; mr < MR; ++mr) Num::template apply<Cfg::NACC>(acc[mr], x.sa, x.sb, M, N, row0 + mr * 64, col0, tid_wg);
        }
      }
      nbox = Cfg::Epi::template store<Cfg>(acc, tmC, C, M, N, mend, row0, col0, c, tid_wg, c_tma, x, sbu, ssc, base, nbox);
      if constexpr (SSC) {   // this warp's last read of the slot is behind it: release it for unit i + 1
        __syncwarp();
        if ((tid & 31) == 0) mbar_arrive(&sempty[i & 1]);
      }
    }
    Cfg::Epi::drain(c_tma, tid, tid_wg);
  }
  __syncwarp();
  Cl::sync_exit();   // no CTA exits while its peer may still arrive on its barriers
}

}  // namespace ladder

// One entry point per build: LADDER_WS_LEVEL (levels 7-10: the dense bf16 arguments) or LADDER_WS_LEVEL_X
// (levels 12-15: + the fp8 scales / grouped offsets, WsX).
#define LADDER_WS_LEVEL(NAME, B)                                                                             \
  static_assert(!B::numerics::fp8 && !B::tiles::grouped, "LADDER_WS_LEVEL: dense bf16 (fp8 / grouped: LADDER_WS_LEVEL_X)"); \
  namespace { using NAME##_cfg = ladder::WsCfg<B>; }                                                         \
  static_assert(ladder::ws_matches_registry<NAME##_cfg>(), "registry tile_mnk / cluster != the build's unit tile"); \
  extern "C" __global__ void __launch_bounds__(NAME##_cfg::THREADS, 1) __cluster_dims__(NAME##_cfg::CL, 1, 1) \
  NAME(const __grid_constant__ ladder::TmaMap tmA, const __grid_constant__ ladder::TmaMap tmB,            \
       const __grid_constant__ ladder::TmaMap tmC, bf16_t* __restrict__ C, int M, int N, int K, int c_tma, \
       float* __restrict__ ws, int* __restrict__ cnt, int S, int ks) {                                     \
    ladder::ws_gemm_body<NAME##_cfg>(&tmA, &tmB, &tmC, C, M, N, K, c_tma, ws, cnt, S, ks);               \
  }
#define LADDER_WS_LEVEL_X(NAME, B)                                                                           \
  namespace { using NAME##_cfg = ladder::WsCfg<B>; }                                                         \
  static_assert(ladder::ws_matches_registry<NAME##_cfg>(), "registry tile_mnk / cluster != the build's unit tile"); \
  extern "C" __global__ void __launch_bounds__(NAME##_cfg::THREADS, 1) __cluster_dims__(NAME##_cfg::CL, 1, 1) \
  NAME(const __grid_constant__ ladder::TmaMap tmA, const __grid_constant__ ladder::TmaMap tmB,            \
       const __grid_constant__ ladder::TmaMap tmC, bf16_t* __restrict__ C, int M, int N, int K, int c_tma, \
       float* __restrict__ ws, int* __restrict__ cnt, int S, int ks, const float* __restrict__ sa,        \
       const float* __restrict__ sb, const int* __restrict__ offs, int E) {                               \
    ladder::ws_gemm_body<NAME##_cfg>(&tmA, &tmB, &tmC, C, M, N, K, c_tma, ws, cnt, S, ks,                 \
                                     ladder::WsX{sa, sb, offs, E});                                      \
  }
