// ws_pingpong.cuh: the ping-pong consumer policy of ws.cuh (`using consumer_mode = ladder::PingPong;`,
// two consumers). Consumer c takes the CTA's units i with i % 2 == c, each a whole 64*MR x BN tile (the
// unit tile is one consumer's: ws.cuh UM = 64*MR, and a stage is released by one consumer's 4 warps);
// the ring's order (unit i's stages before unit i+1's) makes the two main loops alternate, so one
// consumer's epilogue runs under the other's MMA. An mbarrier per consumer (mdone[c], one phase per
// finished main loop) makes consumer c start unit i only after the other consumer passed all its waits
// of unit i-1 (ordering, and the at-most-one-round-ahead rule of parity waits). The default, ws.cuh
// Cooperative, splits one unit tile by rows between the consumers.
#pragma once

namespace ladder {

struct PingPong {
  static constexpr int on = 1;
  static __device__ __forceinline__ void init(u64* mdone) { mbar_init(&mdone[0], 4); mbar_init(&mdone[1], 4); }
  static __device__ __forceinline__ bool skip(int i, int c) { return (i & 1) != c; }   // unit i is the other consumer's
  static __device__ __forceinline__ void wait_turn(u64* mdone, int c, int i) {
    if (i > 0) {
      // Unit i-1 is the other consumer's ((i-1)/2-th of its units). Wait until it has passed
      // every full-barrier wait of that unit: then every stage load before this unit's first
      // has completed, so each full[s] this unit waits on is at most one round ahead (a
      // parity wait cannot tell round r from round r-2), and the two main loops alternate.
      mbar_wait(&mdone[c ^ 1], ((i - 1) >> 1) & 1);
      __syncwarp();
    }
  }
  // this unit's waits are done
  static __device__ __forceinline__ void done(u64* mdone, int c, int tid) { if ((tid & 31) == 0) mbar_arrive(&mdone[c]); }
};

}  // namespace ladder
