// Level 12: grouped GEMM for MoE prefill (hundreds of rows per expert): level 9's engine (ws.cuh:
// producer warpgroup + two cooperative consumers on a 128x256 tile, 4 stages, TMA-store epilogue)
// over a grouped tile list. Contract as level 11 with W [E, N, K] (K contiguous): the B map is
// 2-D over the E*N weight rows; expert e's tiles are (ceil(m_e / 128) m-tiles) x (ceil(N / 256)
// column blocks), m-tiles fastest, listed from the offsets on the device (grouped.cuh; experts
// with no rows have no tiles). A tile's rows past the expert's end belong to the next expert:
// computed and discarded (the 64-row slab that crosses the end is stored from registers with a
// row mask; whole slabs go through the TMA store). No cluster (a multicast pair would have to
// stay inside one expert), persistent on the fewest CTAs that keep the rounds.
// -DL12_PINGPONG: ping-pong consumers (ws_pingpong.cuh), each on whole 64x256 units (the
// m-tile of the list is 64 rows: an expert's tail pads < 64 rows), 4 stages of 40 KiB; with
// -DL12_PP_M128 128x128 units (2 x m64n128), 6 stages of 32 KiB.
// -DL12_PINGPONG -DL12_FP8: the same 64x256 ping-pong units in fp8 e4m3 (ws_fp8.cuh: QGMMA
// m64n256k32, K tiles of 128 one-byte elements, uint8 maps, 4 stages of 40 KiB), contract
// grouped-fp8: C = (A_e W_e^T) * sa[row] * sw[e, n], the scales applied in the epilogue (the TMA
// store's staging for whole slabs, the masked register stores for the slab crossing the expert
// end). notes/l12.md.
#include "common.cuh"
#include "ws.cuh"
#include "ws_grouped.cuh"
#include "ws_pingpong.cuh"
#include "ws_fp8.cuh"
// level 9's build without the cluster (cooperative 128x256, 4 stages) + what level 12 adds: the grouped tile list
struct L12Base : ladder::WsBuild { using tiles = ladder::GroupedTiles; };   // ws_grouped.cuh
#if defined(L12_PINGPONG) && defined(L12_FP8)
struct L12 : L12Base { using consumer_mode = ladder::PingPong; using numerics = ladder::Fp8; };   // fp8 ping-pong, 64x256 units, 4 stages
#elif defined(L12_PINGPONG) && defined(L12_PP_M128)
struct L12 : L12Base { using consumer_mode = ladder::PingPong; static constexpr int m64_slabs = 2, tile_n = 128, stages = 6; };   // ping-pong, 128x128 units, 6 stages
#elif defined(L12_PINGPONG)
struct L12 : L12Base { using consumer_mode = ladder::PingPong; };                                 // ping-pong, 64x256 units, 4 stages
#elif defined(L12_PP)
struct L12 : L12Base { static constexpr int tile_n = 128, stages = 6; };                           // -DL12_PP: 128x128 tiles, 6 stages
#else
struct L12 : L12Base {};
#endif
LADDER_WS_LEVEL_X(gemm_l12, L12)
#ifdef LADDER_EXPECT_DYN_SMEM
static_assert(gemm_l12_cfg::DYN_SMEM == LADDER_EXPECT_DYN_SMEM, "registry dyn_smem_bytes != kernel DYN_SMEM");
#endif
