// grouped.cuh: the device-side plan of the grouped (MoE) levels 11-12, read from the offsets
// alone (no host sync, the torch._grouped_mm contract): offs [E] int32 cumulative row ends,
// expert e owns rows [offs[e-1], offs[e]) (offs[-1] = 0). Each expert with m_e > 0 rows gets
// ceil(m_e / RG) * NB work units (row groups x column blocks); warp 0 writes the exclusive
// prefix of units per expert (pre[0..E], pre[E] = total) and (endr != nullptr) the experts' row
// ends to shared memory; every CTA builds the same plan and walks units u = blockIdx + i * gridDim.
#pragma once

namespace ladder {
namespace grp {

constexpr int MAX_E = 512;      // level 11 (the launcher refuses more experts)
// levels 12 and 15 (the tile engine): the plan sits beside up to 225 KiB of stages. It holds the
// m-tile prefix per expert as uint16 (513 x 2 B; tiles = m-tiles x column blocks at lookup), so the
// launcher requires ceil(R / UM) + E <= 65535; as int32 tile counts only 384 experts fitted (round 5)
constexpr int MAX_E_WS = 512;

__device__ __forceinline__ int units_of(int m, int RG, int NB) { return m > 0 ? ((m + RG - 1) / RG) * NB : 0; }

template <class P>
__device__ __forceinline__ void build_plan(const int* __restrict__ offs, int E, int RG, int NB,
                                           P* pre, int* endr, int lane) {
  const int per = (E + 31) / 32, e0 = lane * per;
  int sum = 0;
  for (int i = 0; i < per; ++i) {
    const int e = e0 + i;
    if (e >= E) break;
    sum += units_of(offs[e] - (e ? offs[e - 1] : 0), RG, NB);
  }
  int inc = sum;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int v = __shfl_up_sync(0xffffffffu, inc, d);
    if (lane >= d) inc += v;
  }
  int run = inc - sum;
  for (int i = 0; i < per; ++i) {
    const int e = e0 + i;
    if (e >= E) break;
    const int end = offs[e];
    pre[e] = static_cast<P>(run);
    if (endr) endr[e] = end;
    run += units_of(end - (e ? offs[e - 1] : 0), RG, NB);
  }
  if (lane == 31) pre[E] = static_cast<P>(inc);
}

// the expert that owns unit u: the largest e with pre[e] <= u (experts without units have
// pre[e] == pre[e + 1], so the largest such e is the one with units)
template <class P>
__device__ __forceinline__ int expert_of(int u, const P* pre, int E) {
  int lo = 0, hi = E - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (static_cast<int>(pre[mid]) <= u) lo = mid; else hi = mid - 1;
  }
  return lo;
}

}  // namespace grp
}  // namespace ladder
