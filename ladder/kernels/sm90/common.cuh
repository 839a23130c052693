// common.cuh: shared pieces of the sm_90a GEMM ladder (levels 1-6).
//
// Problem contract (every level):
//   C[M,N] = A[M,K] . B[N,K]^T      ("TN": both operands K-contiguous)
//   A: row-major M x K, bf16.  B: row-major N x K, bf16 (an nn.Linear weight).
//   C: row-major M x N, bf16.  Accumulation in fp32 (wgmma .f32), one round to bf16 at the end.
//
// Shared-memory operand layout (every level): a tile is ROWS x 64 bf16, one 128-byte line per
// row (64 bf16 = 128 B), rows packed back to back, and the eight 16-byte chunks of row r stored
// at chunk position (c ^ (r & 7)): the hardware's 128-byte swizzle. That is the layout a TMA
// load with CU_TENSOR_MAP_SWIZZLE_128B writes, so level 4 can replace the synchronous copy by TMA
// without touching the MMA side. The swizzle needs each tile to start 1024-byte aligned (the XOR
// pattern repeats every 8 rows x 128 B).
//
// Built with NVRTC (CuPy RawModule) and with nvcc; it includes no headers at all.
#pragma once

// Levels 7+: epilogue through shared memory + TMA store (1) or register stores (0, variants)
#ifndef LADDER_EPI
#ifdef LADDER_REG_STORE
#define LADDER_EPI 0
#else
#define LADDER_EPI 1
#endif
#endif

typedef unsigned short bf16_t;        // raw bf16 bits; no cuda_bf16.h needed under NVRTC
typedef unsigned int u32;
typedef unsigned long long u64;

namespace ladder {

struct __align__(16) U32x4 { u32 x, y, z, w; };

constexpr int BM = 128;   // CTA tile rows (M)
constexpr int BN = 128;   // CTA tile columns (N)
constexpr int BK = 64;    // K per shared-memory tile: 64 bf16 = one 128-byte swizzle line
constexpr int WGMMA_K = 16;          // K of one wgmma (bf16)
constexpr int THREADS = 256;         // two warpgroups; warpgroup g owns rows [64g, 64g+64)
constexpr int ACC_REGS = 64;         // m64n128 f32 accumulator: 64*128/128 threads

__device__ __forceinline__ u32 smem_u32(const void* p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}

// --- global -> shared, synchronous, masked ---------------------------------------------------
// Copy rows [row0, row0+ROWS) x cols [k0, k0+64) of a row-major matrix with `rows` rows and `K`
// columns into a 128B-swizzled tile. Out-of-range elements are written as +0.0 so that the MMA
// over a padded tile adds nothing. Chunk id = tid + i*THREADS: eight consecutive threads read
// one 128-byte row (coalesced). Two phases: global -> registers for every chunk of A and B
// first, then registers -> shared, so all of a thread's loads are in flight together (one
// memory round trip per K tile instead of one per chunk; notes/l03.md, v1 -> v2).
template <int ROWS>
struct TileRegs {
  static constexpr int N = ROWS * 8 / THREADS;   // 16-byte chunks per thread
  static_assert(ROWS * 8 % THREADS == 0, "tile must split evenly over the CTA");
  U32x4 v[N];
};

template <int ROWS>
__device__ __forceinline__ void tile_g2r(TileRegs<ROWS>& t, const bf16_t* __restrict__ g,
                                         int rows, int K, int row0, int k0, int tid) {
  // Whole tile in range and rows 16-byte aligned (K % 8 == 0): plain 16-byte loads, no masks.
  const bool whole = ((K & 7) == 0) && (row0 + ROWS <= rows) && (k0 + BK <= K);
  if (whole) {
#pragma unroll
    for (int i = 0; i < TileRegs<ROWS>::N; ++i) {
      const int id = tid + i * THREADS, r = id >> 3, c = id & 7;
      t.v[i] = *reinterpret_cast<const U32x4*>(g + static_cast<size_t>(row0 + r) * K + k0 + c * 8);
    }
    return;
  }
  const bool vec_ok = (K & 7) == 0;
#pragma unroll
  for (int i = 0; i < TileRegs<ROWS>::N; ++i) {
    const int id = tid + i * THREADS, r = id >> 3, c = id & 7;
    const int gr = row0 + r, gk = k0 + c * 8;
    U32x4 v = {0u, 0u, 0u, 0u};
    if (gr < rows) {
      const bf16_t* src = g + static_cast<size_t>(gr) * K + gk;
      if (vec_ok && gk + 8 <= K) {
        v = *reinterpret_cast<const U32x4*>(src);
      } else {
        u32 e[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) e[j] = (gk + j < K) ? static_cast<u32>(src[j]) : 0u;
        v.x = e[0] | (e[1] << 16); v.y = e[2] | (e[3] << 16);
        v.z = e[4] | (e[5] << 16); v.w = e[6] | (e[7] << 16);
      }
    }
    t.v[i] = v;
  }
}

template <int ROWS>
__device__ __forceinline__ void tile_r2s(bf16_t* tile, const TileRegs<ROWS>& t, int tid) {
#pragma unroll
  for (int i = 0; i < TileRegs<ROWS>::N; ++i) {
    const int id = tid + i * THREADS, r = id >> 3, c = id & 7;
    *reinterpret_cast<U32x4*>(reinterpret_cast<char*>(tile) + r * 128 + ((c ^ (r & 7)) << 4)) = t.v[i];
  }
}

#ifdef LADDER_COPY_SERIAL
// v1 of the copy, kept to re-measure it: per chunk, load (vector or masked) then store at once.
template <int ROWS>
__device__ __forceinline__ void load_tile_serial_v1(bf16_t* tile, const bf16_t* __restrict__ g,
                                                    int rows, int K, int row0, int k0, int tid) {
  const bool vec_ok = (K & 7) == 0;
#pragma unroll
  for (int i = 0; i < ROWS * 8 / THREADS; ++i) {
    const int id = tid + i * THREADS, r = id >> 3, c = id & 7;
    const int gr = row0 + r, gk = k0 + c * 8;
    U32x4 v = {0u, 0u, 0u, 0u};
    if (gr < rows) {
      const bf16_t* src = g + static_cast<size_t>(gr) * K + gk;
      if (vec_ok && gk + 8 <= K) {
        v = *reinterpret_cast<const U32x4*>(src);
      } else {
        u32 e[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) e[j] = (gk + j < K) ? static_cast<u32>(src[j]) : 0u;
        v.x = e[0] | (e[1] << 16); v.y = e[2] | (e[3] << 16);
        v.z = e[4] | (e[5] << 16); v.w = e[6] | (e[7] << 16);
      }
    }
    *reinterpret_cast<U32x4*>(reinterpret_cast<char*>(tile) + r * 128 + ((c ^ (r & 7)) << 4)) = v;
  }
}
#endif

// One K tile of A (rows a_row0.., M rows) and B (rows b_row0.., N rows) into shared memory.
// LADDER_COPY_SERIAL rebuilds the first measured version (v1): load and store chunk by chunk,
// A then B, which the compiler turned into eight dependent global round trips per K tile.
__device__ __forceinline__ void load_ab_tiles(bf16_t* sA, const bf16_t* __restrict__ A, int M, int a_row0,
                                              bf16_t* sB, const bf16_t* __restrict__ B, int N, int b_row0,
                                              int K, int k0, int tid) {
#ifdef LADDER_COPY_SERIAL
  load_tile_serial_v1<BM>(sA, A, M, K, a_row0, k0, tid);
  load_tile_serial_v1<BN>(sB, B, N, K, b_row0, k0, tid);
#else
  TileRegs<BM> ta; TileRegs<BN> tb;
  tile_g2r<BM>(ta, A, M, K, a_row0, k0, tid);
  tile_g2r<BN>(tb, B, N, K, b_row0, k0, tid);
  tile_r2s<BM>(sA, ta, tid);
  tile_r2s<BN>(sB, tb, tid);
#endif
}

// Generic-proxy stores to shared memory become visible to the async proxy (wgmma's operand
// reads) only after this fence, executed by every writing thread before the CTA barrier.
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// --- wgmma shared-memory matrix descriptor --------------------------------------------------
// bits  0-13 start address >> 4      bits 16-29 leading-dim byte offset >> 4
// bits 32-45 stride-dim byte offset >> 4   bits 49-51 base offset   bits 62-63 swizzle (1 = 128B)
// K-major operand in the 128B-swizzle layout above: the 8-row x 16-byte core matrices of one
// 8-row group sit in one 1024-byte swizzle atom; the next 8-row group (M or N direction) is
// 1024 bytes on (SBO = 1024). The K extent of one wgmma (16 bf16 = 32 B) stays inside the
// 128-byte line, so LBO is not used by the hardware here (set to 1 by convention). Stepping K by
// 16 inside the line = adding 32 bytes to the start address; the swizzle XOR is applied by the
// hardware to the final address bits, which is why the tile base must be 1024-aligned
// (base offset field 0).
__device__ __forceinline__ u64 make_desc_sw128(u32 smem_addr) {
  u64 d = 0;
  d |= static_cast<u64>((smem_addr & 0x3FFFF) >> 4);
  d |= static_cast<u64>(1) << 16;                 // LBO (unused for swizzled K-major)
  d |= static_cast<u64>(1024 >> 4) << 32;         // SBO: 8 rows x 128 B
  d |= static_cast<u64>(1) << 62;                 // 128-byte swizzle
  return d;
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }

// d[64] += A(64x16, smem desc) . B(128x16, smem desc)^T ; both K-major (no transpose).
// scale_d = 0 makes the instruction ignore the old accumulator (D = A.B).
__device__ __forceinline__ void wgmma_m64n128k16_bf16(float (&d)[ACC_REGS], u64 desc_a, u64 desc_b, int scale_d) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// One BK=64 tile of K for this warpgroup: four k16 steps, each moving the descriptors 32 bytes
// along the 128-byte line. sA_wg points at this warpgroup's 64 rows of the A tile.
__device__ __forceinline__ void mma_ktile(float (&acc)[ACC_REGS], const bf16_t* sA_wg, const bf16_t* sB, int first) {
  const u32 a = smem_u32(sA_wg), b = smem_u32(sB);
#pragma unroll
  for (int kk = 0; kk < BK / WGMMA_K; ++kk) {
    wgmma_m64n128k16_bf16(acc, make_desc_sw128(a + kk * 32), make_desc_sw128(b + kk * 32),
                          (first && kk == 0) ? 0 : 1);
  }
}

// --- accumulators -> global ------------------------------------------------------------------
// m64nN f32 accumulator layout, thread t of the warpgroup (warp w = t/32, lane l):
//   d[i] is element (row, col) with row = 16w + l/4 + 8*((i>>1)&1), col = 8*(i>>2) + 2*(l&3) + (i&1).
// Pairs (d[i], d[i+1]), i even, are adjacent columns: one 4-byte bf16x2 store when both are in
// range and N is even (then the address is 4-byte aligned), element stores otherwise.
__device__ __forceinline__ u32 pack_bf16x2(float lo, float hi) {
  u32 r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));  // first source -> upper half
  return r;
}

template <int NACC>
__device__ __forceinline__ void store_acc(const float (&acc)[NACC], bf16_t* __restrict__ C, int M, int N,
                                          int row0, int col0, int tid_wg) {
  const int w = tid_wg >> 5, l = tid_wg & 31;
  const bool n_even = (N & 1) == 0;
#pragma unroll
  for (int i = 0; i < NACC; i += 2) {
    const int row = row0 + 16 * w + (l >> 2) + 8 * ((i >> 1) & 1);
    const int col = col0 + 8 * (i >> 2) + 2 * (l & 3);
    if (row >= M) continue;
    const u32 p = pack_bf16x2(acc[i], acc[i + 1]);
    bf16_t* dst = C + static_cast<size_t>(row) * N + col;
    if (n_even && col + 1 < N) {
      *reinterpret_cast<u32*>(dst) = p;
    } else {
      if (col < N) dst[0] = static_cast<bf16_t>(p & 0xFFFFu);
      if (col + 1 < N) dst[1] = static_cast<bf16_t>(p >> 16);
    }
  }
}


// d[128] += A(64x16) . B(256x16)^T, both K-major, 128B-swizzled (levels 5-6: 128x256 CTA tile).
__device__ __forceinline__ void wgmma_m64n256k16_bf16(float (&d)[128], u64 desc_a, u64 desc_b, int scale_d) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
      "%128, %129, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// One BK=64 tile of K, N = 256: four m64n256k16 steps (levels 5-6).
__device__ __forceinline__ void mma_ktile_n256(float (&acc)[128], const bf16_t* sA_wg, const bf16_t* sB, int first) {
  const u32 a = smem_u32(sA_wg), b = smem_u32(sB);
#pragma unroll
  for (int kk = 0; kk < BK / WGMMA_K; ++kk) {
    wgmma_m64n256k16_bf16(acc, make_desc_sw128(a + kk * 32), make_desc_sw128(b + kk * 32),
                          (first && kk == 0) ? 0 : 1);
  }
}

// ============================================================================================
// Levels 4+: TMA and mbarriers.
//
// A tensor map (CUtensorMap, 128 opaque bytes) is encoded on the host by cuTensorMapEncodeTiled
// (ladder/gpu.py) and passed by value as a `const __grid_constant__ TmaMap` kernel
// parameter; its generic address is what cp.async.bulk.tensor takes. Maps used here:
//   A: dims {K, M}, row stride K*2 B, box {64, 128}, SWIZZLE_128B  -> one 128x64 operand tile
//   B: dims {K, N}, row stride K*2 B, box {64, BN},  SWIZZLE_128B  -> one BNx64 operand tile
//   C: dims {N, M}, row stride N*2 B, box {64, 64},  SWIZZLE_128B  -> a 64x64 output sub-tile
// The box lands in shared memory in exactly the layout of the synchronous copy of levels 1-3
// (row r, 16-byte chunk c at c ^ (r & 7)), so the wgmma descriptors are unchanged. Reads out of
// bounds (M, N, K tails) are zero-filled by the TMA unit and still count in the transaction
// bytes; stores out of bounds are clipped. Global strides must be multiples of 16 bytes: K % 8
// (A, B) and N % 8 (C); the launcher pads K otherwise and falls back to register stores for N.
// ============================================================================================
struct __align__(64) TmaMap { u64 opaque[16]; };

__device__ __forceinline__ u64 gaddr(const void* p) { return reinterpret_cast<u64>(p); }

__device__ __forceinline__ void prefetch_tmap(const TmaMap* m) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(gaddr(m)) : "memory");
}

// mbarrier: a 64-bit shared-memory object with an arrival count and a transaction count; a phase
// completes when both reach zero, and waiters poll the parity of the completed phase.
__device__ __forceinline__ void mbar_init(u64* bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void fence_mbar_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// one arrival + announce `bytes` of transactions (the TMA loads that follow complete them)
__device__ __forceinline__ void mbar_arrive_expect_tx(u64* bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(u64* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}
// spin until the phase with this parity has completed
__device__ __forceinline__ void mbar_wait(u64* bar, u32 parity) {
  u32 done;
  do {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done) : "r"(smem_u32(bar)), "r"(parity) : "memory");
  } while (!done);
}

// 2-D TMA load of one box at coordinates (c0 = innermost = K, c1 = rows) into shared memory,
// completing `bar`'s transaction count.
__device__ __forceinline__ void tma_load_2d(void* dst, const TmaMap* map, u64* bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n"
      ::"r"(smem_u32(dst)), "l"(gaddr(map)), "r"(smem_u32(bar)), "r"(c0), "r"(c1) : "memory");
}
// 2-D TMA store of one box from shared memory to (c0 = column, c1 = row); clipped at the edges.
__device__ __forceinline__ void tma_store_2d(const TmaMap* map, const void* src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n"
               ::"l"(gaddr(map)), "r"(smem_u32(src)), "r"(c0), "r"(c1) : "memory");
}
__device__ __forceinline__ void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// all committed stores have finished reading shared memory (the buffer may be rewritten)
__device__ __forceinline__ void tma_store_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
// all committed stores are complete
__device__ __forceinline__ void tma_store_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

// barrier among `count` threads on named barrier `id` (0 is __syncthreads)
__device__ __forceinline__ void named_bar_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

// Accumulators of one warpgroup (64 rows x NACC*2 columns, NACC = 64 or 128) -> bf16 in shared
// memory as NACC/32 boxes of 64 rows x 64 columns, each 8 KiB, 128B-swizzled (the layout the C
// map's SWIZZLE_128B store reads). Within a warp one store instruction covers 8 rows x 16 bytes;
// the swizzle puts the 8 rows in 8 different 16-byte bank groups, so it is conflict-free.
template <int NACC>
__device__ __forceinline__ void stage_acc_sw128(const float (&acc)[NACC], unsigned char* stage, int tid_wg) {
  const int w = tid_wg >> 5, l = tid_wg & 31;
#pragma unroll
  for (int i = 0; i < NACC; i += 2) {
    const int r = 16 * w + (l >> 2) + 8 * ((i >> 1) & 1);
    const int j = i >> 2;                  // 8-column group
    const int box = j >> 3, ch = j & 7;    // 64-column box, 16-byte chunk in the 128-byte row
    *reinterpret_cast<u32*>(stage + box * 8192 + r * 128 + ((ch ^ (r & 7)) << 4) + 4 * (l & 3)) =
        pack_bf16x2(acc[i], acc[i + 1]);
  }
}

// One warpgroup's epilogue through TMA: stage (above), make the generic-proxy writes visible to
// the async proxy, sync the warpgroup on named barrier `bar_id`, then one thread issues the
// stores of the boxes that start inside C and waits until they are complete.
template <int NACC>
__device__ __forceinline__ void tma_store_acc(const float (&acc)[NACC], unsigned char* stage, const TmaMap* mapC,
                                              int M, int N, int row0, int col0, int tid_wg, int bar_id) {
  stage_acc_sw128<NACC>(acc, stage, tid_wg);
  fence_proxy_async_smem();
  named_bar_sync(bar_id, 128);
  if (tid_wg == 0 && row0 < M) {
#pragma unroll
    for (int box = 0; box < NACC / 32; ++box)
      if (col0 + 64 * box < N) tma_store_2d(mapC, stage + box * 8192, col0 + 64 * box, row0);
    tma_store_commit();
    tma_store_wait_all();
  }
}

__device__ __forceinline__ unsigned char* align1024(unsigned char* p) {
  const u32 a = smem_u32(p);
  return p + (((a + 1023u) & ~1023u) - a);
}

}  // namespace ladder
