// ws_cluster.cuh: the cluster policy of ws.cuh (level 8; `using cluster = ladder::Multicast2;`).
// Cluster (__cluster_dims__(2,1,1)): the two CTAs of a cluster compute the two M-adjacent tiles of a
// cluster tile; they share the B tile. CTA rank r loads rows [r*BN/2, (r+1)*BN/2) of the B tile with
// a TMA multicast to both CTAs (same smem offset), so B is read from L2 once per cluster; A is loaded
// by each CTA for itself. A stage may be refilled only when the consumers of BOTH CTAs released it:
// each consumer warp arrives on its own empty[s] and, through mapa + mbarrier.arrive.shared::cluster,
// on the peer's (ws.cuh's EMPTY_COUNT counts both CTAs). A cluster barrier after mbarrier init (before
// any remote access) and one before exit (so no CTA leaves while the peer may still arrive on its
// barriers). The default, ws.cuh NoCluster, has the same hooks for one CTA.
#pragma once

namespace ladder {

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

struct Multicast2 {
  static constexpr int size = 2;
  static __device__ __forceinline__ u32 rank() { return cluster_ctarank(); }
  static __device__ __forceinline__ void sync_start() { cluster_sync_all(); }
  static __device__ __forceinline__ void sync_exit() { cluster_sync_all(); }
  // a consumer warp's release of a stage, on the peer CTA's empty barrier (after its own)
  static __device__ __forceinline__ void release_peer(u64* bar, u32 rank) { mbar_arrive_remote(bar, rank ^ 1u); }
  // this CTA's half of the stage's B tile, multicast to both CTAs
  template <class Cfg>
  static __device__ __forceinline__ void load_b(unsigned char* st, const TmaMap* tmB, u64* bar, int kc, int col0, u32 rank) {
    constexpr int CL = size;
    tma_load_2d_mc(st + Cfg::A_BYTES + rank * (Cfg::B_BYTES / CL), tmB, bar, kc,
                   col0 + static_cast<int>(rank) * (Cfg::UN / CL), static_cast<unsigned short>((1 << CL) - 1));
  }
};

}  // namespace ladder
