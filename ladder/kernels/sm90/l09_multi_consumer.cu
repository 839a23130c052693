// Level 9: two consumer warpgroups (384 threads: producer + 2 consumers), persistent, built on
// level 7 (level 8's cluster lost on the device: notes/l08.md; -DL9_CL=2 puts it back).
// Shipped: COOPERATIVE, the two consumers split a 128x256 tile by rows (64x256 each, wgmma
// m64n256k16, 128 accumulators), 4 stages of 48 KiB + 2 x 16 KiB epilogue staging.
// -DL9_PINGPONG: the consumers alternate whole 128x128 tiles (one's epilogue under the other's
// main loop), 6 stages of 32 KiB; with -DL9_PP_WIDE 64x256 tiles (m64n256, 4 stages of 40 KiB).
// -DL9_N192 / -DL9_M128 / -DL9_N96: the cooperative engine on 128x192 / 128x128 / 128x96 tiles
// (mid shapes, notes/mid.md; 128x96 with register stores).
// notes/l09.md says which was kept and why. The template: ws.cuh.
#include "common.cuh"
#include "ws.cuh"
#include "ws_cluster.cuh"
#include "ws_pingpong.cuh"
#include "ws_splitk.cuh"
#ifndef L9_CL
#define L9_CL 1
#endif
#if L9_CL == 2
#define L9_CLUSTER ladder::Multicast2   // ws_cluster.cuh
#else
#define L9_CLUSTER ladder::NoCluster
#endif
#ifdef L9_SK
#define L9_SPLIT ladder::StreamK   // -DL9_SK: the stream-K tail (ws_splitk.cuh): the last partial wave's K iterations spread over all CTAs
#else
#define L9_SPLIT ladder::NoSplit
#endif
// what level 9 adds to level 7: two consumers (WsBuild's default), cooperative on 128x256
struct L9Base : ladder::WsBuild {
  using cluster = L9_CLUSTER;
  using split = L9_SPLIT;
  static constexpr int group_rows = 16 / L9_CL;
};
#if defined(L9_N192)
// mid shapes (notes/mid.md): cooperative 128x192 (m64n192, 96 accumulators), 4 stages of 40 KiB
struct L9 : L9Base { static constexpr int tile_n = 192; };
#elif defined(L9_N96)
// mid shapes (notes/mid.md): cooperative 128x96 (m64n96, 48 accumulators), 8 stages of 28 KiB,
// register-store epilogue (96 columns are not whole 64-column TMA store boxes)
struct L9 : L9Base { static constexpr int tile_n = 96, stages = 8; using epilogue = ladder::EpiRegs; };
#elif defined(L9_M128)
// mid shapes (notes/mid.md): cooperative 128x128 (m64n128), 6 stages of 32 KiB
struct L9 : L9Base { static constexpr int tile_n = 128, stages = 6; };
#elif defined(L9_PINGPONG) && defined(L9_PP_WIDE)
struct L9 : L9Base { using consumer_mode = ladder::PingPong; using split = ladder::NoSplit; };   // ping-pong 64x256 units
#elif defined(L9_PINGPONG)
struct L9 : L9Base {   // ping-pong 128x128 (ws_pingpong.cuh)
  using consumer_mode = ladder::PingPong; using split = ladder::NoSplit;
  static constexpr int m64_slabs = 2, tile_n = 128, stages = 6;
};
#else
struct L9 : L9Base {};   // cooperative 128x256, 4 stages of 48 KiB
#endif
LADDER_WS_LEVEL(gemm_l09, L9)
#ifdef LADDER_EXPECT_DYN_SMEM
static_assert(gemm_l09_cfg::DYN_SMEM == LADDER_EXPECT_DYN_SMEM, "registry dyn_smem_bytes != kernel DYN_SMEM");
#endif
