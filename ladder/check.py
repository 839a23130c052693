"""Correctness check of a ladder level (run before any timing).

For one shape: fresh random bf16 inputs (never zeros), output poisoned with a NaN pattern no
kernel writes, the level launched, then
  * every element written (no poison left),
  * relative error ||out - ref|| / ||ref|| against a float64 reference computed from the same
    bf16 inputs, within the bf16 band (<= REL_TOL; expected ~2e-3, the output rounding),
  * every element within |out - ref| <= 2^-7 |ref| + 2^-14 (|A| |B|^T) (bf16 output rounding
    plus fp32 accumulation error), so a single wrong tile cannot hide in the norm,
  * the same relative error against cuBLAS (when torch is there),
  * with specials=True, NaN/+Inf/-Inf planted in A and B: the non-finite pattern of out equals
    the reference's exactly (NaN where NaN, +Inf where +Inf, -Inf where -Inf).
The float64 reference is computed on the GPU (cupy float64 matmul) or, with host_ref=True, with
numpy on the host (used under compute-sanitizer, where only our kernels should run).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from . import gpu
from .registry import Level

REL_TOL = 1e-2          # bf16 operands band (METHOD.md: between 1e-3 and 1e-2)
ELEM_REL = 2.0 ** -7    # two bf16 half-ulps
ELEM_ABS = 2.0 ** -14   # times (|A||B|^T): fp32 accumulation slack


@dataclass
class CheckResult:
    level: int
    m: int
    n: int
    k: int
    ok: bool
    rel_err_ref: float
    rel_err_cublas: float | None
    unwritten: int
    bad_elements: int
    nonfinite_mismatch: int
    specials: bool
    reason: str = ""

    def to_dict(self):
        return asdict(self)


def _rel_vs_cublas(cp, a, b, c, m: int, n: int) -> float:
    """Relative error of the level's output c against cuBLAS on the same inputs (finite elements
    of both only)."""
    cb = cp.full((m, n), gpu.POISON_BITS, dtype=cp.uint16)
    gpu.cublas_tn(a, b, cb)
    cp.cuda.runtime.deviceSynchronize()
    cbf = gpu.bf16_bits_to_f32(cb, cp).astype(cp.float64)
    outg = gpu.bf16_bits_to_f32(c, cp).astype(cp.float64)
    both = cp.isfinite(cbf) & cp.isfinite(outg)
    dn = float(cp.linalg.norm(cp.where(both, cbf, 0.0)))
    return float(cp.linalg.norm(cp.where(both, outg - cbf, 0.0))) / dn if dn > 0 else 0.0


def check_shape(level: Level, m: int, n: int, k: int, *, seed: int = 0, specials: bool = False,
                host_ref: bool = False, with_cublas: bool = True) -> CheckResult:
    cp = gpu.cupy()
    a = gpu.random_bf16((m, k), seed=2 * seed + 1)
    b = gpu.random_bf16((n, k), seed=2 * seed + 2)
    if specials:
        rng = np.random.default_rng(seed)
        a[int(rng.integers(m)), int(rng.integers(k))] = 0x7FC0   # NaN
        a[int(rng.integers(m)), int(rng.integers(k))] = 0x7F80   # +Inf
        b[int(rng.integers(n)), int(rng.integers(k))] = 0xFF80   # -Inf
    c = cp.full((m, n), gpu.POISON_BITS, dtype=cp.uint16)
    gpu.launch(level, a, b, c, m, n, k)
    cp.cuda.runtime.deviceSynchronize()

    unwritten = int((c == gpu.POISON_BITS).sum())
    if host_ref:
        a64 = cp.asnumpy(gpu.bf16_bits_to_f32(a, cp)).astype(np.float64)
        b64 = cp.asnumpy(gpu.bf16_bits_to_f32(b, cp)).astype(np.float64)
        xp = np
        with np.errstate(invalid="ignore", over="ignore"):
            ref = a64 @ b64.T
            absref = np.abs(a64) @ np.abs(b64).T
        out = cp.asnumpy(gpu.bf16_bits_to_f32(c, cp)).astype(np.float64)
    else:
        xp = cp
        a64 = gpu.bf16_bits_to_f32(a, cp).astype(cp.float64)
        b64 = gpu.bf16_bits_to_f32(b, cp).astype(cp.float64)
        ref = a64 @ b64.T
        absref = cp.abs(a64) @ cp.abs(b64).T
        out = gpu.bf16_bits_to_f32(c, cp).astype(cp.float64)

    fin = xp.isfinite(ref)
    mism = (xp.isnan(out) != xp.isnan(ref)) | ((out == xp.inf) != (ref == xp.inf)) \
        | ((out == -xp.inf) != (ref == -xp.inf))
    nonfinite_mismatch = int(mism.sum())
    d = xp.where(fin, out - ref, 0.0)
    r = xp.where(fin, ref, 0.0)
    denom = float(xp.linalg.norm(r))
    rel = float(xp.linalg.norm(d)) / denom if denom > 0 else float(xp.linalg.norm(d))
    tol = ELEM_REL * xp.abs(r) + ELEM_ABS * xp.where(fin, absref, 0.0)
    bad = int((fin & ~(xp.abs(d) <= tol)).sum())

    rel_cublas = _rel_vs_cublas(cp, a, b, c, m, n) if with_cublas and gpu.torch_or_none() is not None else None
    reasons = []
    if unwritten:
        reasons.append(f"{unwritten} elements unwritten")
    if not rel <= REL_TOL:
        reasons.append(f"rel err {rel:.3g} > {REL_TOL}")
    if bad:
        reasons.append(f"{bad} elements outside tolerance")
    if nonfinite_mismatch:
        reasons.append(f"{nonfinite_mismatch} non-finite mismatches")
    if rel_cublas is not None and not rel_cublas <= REL_TOL:
        reasons.append(f"rel err vs cuBLAS {rel_cublas:.3g} > {REL_TOL}")
    return CheckResult(level.id, m, n, k, not reasons, rel, rel_cublas, unwritten, bad,
                       nonfinite_mismatch, specials, "; ".join(reasons))


def edge_shapes(level: Level) -> list[tuple[int, int, int]]:
    """Hand-picked cases: one tile, K = 1, K < tile, K tails, M/N tails, 1-wide."""
    cands = [(128, 128, 64), (1, 1, 1), (128, 128, 1), (128, 128, 17), (127, 129, 63),
             (1, 128, 64), (128, 1, 64), (64, 128, 64), (100, 37, 40), (128, 128, 65),
             (128, 128, 128), (128, 128, 1000), (5, 7, 4097), (129, 129, 65), (256, 256, 128),
             (300, 200, 72), (1, 4096, 257), (4096, 1, 64), (257, 383, 191), (1024, 1024, 1024)]
    if level.kind in ("persistent", "ws"):
        # more 128x256 tiles than SMs (132 on the H200): CTAs walk several tiles, the pipeline
        # ledger crosses tile boundaries, tails in M, N and K on the last tiles
        cands += [(1500, 2900, 77), (4096, 4096, 320), (3001, 5003, 130), (2048, 8192, 64),
                  (129, 33000, 72), (20000, 300, 136)]
    if level.kind == "ws":
        # decode and K-heavy shapes: split-K (level 10) splits these; odd cluster-tile counts
        cands += [(16, 4096, 4096), (64, 1024, 14336), (256, 2048, 4096), (130, 700, 3000),
                  (1, 300, 5000), (383, 1531, 263)]
    if level.splitk == -2:
        # stream-K tail: whole waves + a split tail (128x256: 140 and 306 tiles; 64x128: 160),
        # every tile split (72 tiles of 16 K tiles), a tail whose ranges straddle tile edges
        cands += [(1792, 2560, 1024), (2304, 4352, 2048), (512, 2560, 1024), (1152, 2048, 1024), (1000, 3000, 2000)]
    return [s for s in cands if level.supports(*s)]


def random_shapes(level: Level, count: int, seed: int) -> list[tuple[int, int, int]]:
    """Random shapes inside the level's domain, biased to tails and small K."""
    rng = np.random.default_rng(seed)
    out = []
    mm = level.max_m or 1100
    nn = level.max_n or 1100
    kk = level.max_k or 1100
    while len(out) < count:
        kind = rng.integers(4)
        m = int(rng.integers(1, mm + 1))
        n = int(rng.integers(1, nn + 1))
        if kind == 0:
            k = int(rng.integers(1, min(kk, 64) + 1))          # K within one tile
        elif kind == 1:
            k = 64 * int(rng.integers(1, max(1, kk // 64) + 1))  # whole K tiles
            k = min(k, kk)
        else:
            k = int(rng.integers(1, kk + 1))
        if level.kind in ("persistent", "ws") and len(out) % 4 == 0:
            # every 4th shape large enough for several tiles per CTA (tails everywhere)
            m, n, k = int(rng.integers(1, 4097)), int(rng.integers(1, 6001)), int(rng.integers(1, 400))
        if level.supports(m, n, k):
            out.append((m, n, k))
    return out


def check_level(level: Level, n_random: int = 200, seed: int = 0, specials_every: int = 10,
                with_cublas: bool = True) -> list[CheckResult]:
    shapes = edge_shapes(level) + random_shapes(level, n_random, seed + 1000 * level.id)
    results = []
    for i, (m, n, k) in enumerate(shapes):
        results.append(check_shape(level, m, n, k, seed=seed + i,
                                   specials=(i % specials_every == 3), with_cublas=with_cublas))
    return results
