"""One ladder build (`Level`): a CUDA file under kernels/sm90/ built with its -D switches, and
what the registry (registry.py: LEVELS, WRONG, VARIANTS) promises about it. The numbers are promises that
tests/test_ladder_build.py checks against ptxas's resource report (registers at most
`regs_max`, static shared memory exactly `smem_bytes`, zero spill bytes when `no_spills`) and
that static + dynamic shared memory (`dyn_smem_bytes`, given at launch) fits the 227 KiB limit;
the test build passes -DLADDER_EXPECT_DYN_SMEM=dyn_smem_bytes and the kernel static_asserts that
it equals its own DYN_SMEM.

Launch kinds: "sync" (levels 1-3: pointer arguments, grid of tiles), "tma" (levels 4-5: tensor
maps made on the host by cuTensorMapEncodeTiled, passed by value; grid of tiles), "persistent"
(level 6: tensor maps; grid = min(#tiles, #SMs of the device)), "ws" (levels 7-10, the
warp-specialized template kernels/sm90/ws.cuh: tensor maps + a split-K workspace and counters;
grid = min(#work units, #SMs) rounded to the cluster size; `cluster` CTAs per cluster,
`splitk` -1 = split count chosen per shape by gpu.splitk_plan). For "ws" levels `tile_mnk` is
the tile of one work unit (one consumer's tile in ping-pong builds), the A box; the B box is
tile N / cluster rows (the multicast half); the test build passes tile_mnk and `cluster` too and
ws.cuh static_asserts them against the build's unit tile (UM x UN x KE) and cluster size.

Problem contract, all levels: C[M,N] = A[M,K] . B[N,K]^T, A row-major (K contiguous), B given
as [N,K] row-major ("TN", K contiguous, the layout of an nn.Linear weight and cuBLAS's fastest
path), bf16 in, fp32 accumulate, bf16 out.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

KERNEL_DIR = Path(__file__).resolve().parent / "kernels" / "sm90"
ARCH = "sm_90a"

# Each contract's library op (as reports name it) and its dispatch table (package data under roofline/data/): plain
# data, for the readers that need no launcher (the dispatch lookup, stage C's timing) and so import no numpy.
# contracts.py builds the full records from these.
CONTRACT_TABLES: dict[str, tuple[str, str]] = {
    "gemm-bf16": ("cuBLAS (torch.mm)", "ladder_dispatch_sm90a_bf16.json"),
    "gemm-fp8": ("torch._scaled_mm", "ladder_dispatch_sm90a_fp8.json"),
    "grouped-bf16": ("torch._grouped_mm", "ladder_dispatch_sm90a_grouped_bf16.json"),
    "grouped-fp8": ("torch._scaled_grouped_mm", "ladder_dispatch_sm90a_grouped_fp8.json"),
}


@dataclass(frozen=True)
class Contract:
    """One problem the ladder solves, and everything that serves it, in one record: the operands a
    launch takes, the launcher, the library op a level is measured beside (in the same process, on
    the same memory), the correctness check of one build and its sanitize-mode cases, the bench
    that times builds beside the library op and its report, the device driver's subcommand that
    runs that bench, and the dispatch table `roofline rerun` reads for it. The functions are the
    functions themselves (contracts.py builds the records, importing the modules that define them);
    the device driver (device_suite.py) reads them from there, never by contract name."""
    name: str
    formula: str
    operands: str
    launcher: Callable    # (level, ...) -> launch one build
    library: str          # the baseline op, as reports name it
    library_fn: Callable  # the baseline op on the same operands
    check: Callable       # (level, n_random, seed) -> [check.CheckResult]: the correctness suite of one build
    sanitize: Callable    # (level) -> [check.CheckResult]: small cases, no library op (for compute-sanitizer)
    bench: Callable       # (levels, set name, min_reps, log) -> result dict: the builds timed beside the library op
    report: Callable      # (result dict) -> markdown: the bench's table and summary
    command: str          # the device_suite subcommand that runs `bench` (python3 -m roofline.ladder.device_suite ...)
    dispatch_table: str   # package data under roofline/data/
    table_builder: str    # python -m roofline.rerun FLAG BENCH... OUT


@dataclass(frozen=True)
class Level:
    id: int
    name: str
    file: str                      # under kernels/sm90/
    kernel: str                    # extern "C" entry point
    description: str               # one line
    adds: str                      # what this level adds over the previous one
    tile_mnk: tuple[int, int, int]  # CTA tile (BM, BN, BK)
    threads: int
    smem_bytes: int                # static shared memory per CTA
    regs_max: int                  # register budget; <= 128 lets two 256-thread CTAs share an SM
    no_spills: bool                # promise: 0 spill bytes, 0 stack frame
    max_m: int | None = None       # shape domain; None = any
    max_n: int | None = None
    max_k: int | None = None
    defines: tuple[str, ...] = field(default=())  # extra -D for this build (wrong variants)
    kind: str = "sync"             # "sync" | "tma" | "persistent" | "ws" (how gpu.launch calls it)
    dyn_smem_bytes: int = 0        # dynamic shared memory requested at launch (incl. 1 KiB align slack)
    cluster: int = 1               # CTAs per cluster (compile-time __cluster_dims__; "ws" levels)
    splitk: int = 0                # 0: no split-K; -1: split count chosen per shape (gpu.splitk_plan); n: n splits; -2: stream-K tail (gpu.streamk_plan)
    by_m: tuple[tuple[int, str], ...] = ()  # ((m_above, VARIANTS key), ...): for M > m_above launch that build
    by_waves: bool = False         # "ws": launch the build of mid.MID_BUILDS the wave model picks for the shape
    grid_balance: bool = False     # "ws": launch the fewest CTAs that keep the same number of rounds (idle SMs save power)
    contract: str = "gemm-bf16"    # CONTRACTS: which problem the level solves (the dense bf16 GEMM for levels 1-10)

    @property
    def total_smem_bytes(self) -> int:
        return self.smem_bytes + self.dyn_smem_bytes

    @property
    def path(self) -> Path:
        return KERNEL_DIR / self.file

    def supports(self, m: int, n: int, k: int) -> bool:
        if min(m, n, k) < 1:
            return False
        return all(lim is None or v <= lim for v, lim in
                   ((m, self.max_m), (n, self.max_n), (k, self.max_k)))

    def grid(self, m: int, n: int) -> tuple[int, int, int]:
        bm, bn, _ = self.tile_mnk
        if self.kind in ("persistent", "ws"):
            return (((m + bm - 1) // bm) * ((n + bn - 1) // bn), 1, 1)  # #tiles; gpu.launch caps at #SMs
        if self.max_m is not None and self.max_n is not None:
            return (1, 1, 1)  # single-tile levels
        return ((n + bn - 1) // bn, (m + bm - 1) // bm, 1)

    def domain_text(self) -> str:
        def lim(v):
            return "any" if v is None else f"<= {v}"
        return f"M {lim(self.max_m)}, N {lim(self.max_n)}, K {lim(self.max_k)}"
