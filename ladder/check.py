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

The other contracts (contracts.CONTRACTS: each record holds its check from here), by the same rules:
Grouped (levels 11-12): random bf16 A [R,K] and W, offsets from a routing (routing.py), output
poisoned, the level launched; every row the offsets cover must be written, and against a float64
reference per expert (A_e . W_e^T on the same bf16 inputs) the norm-wise relative error is within
check.REL_TOL and every element within check.ELEM_REL |ref| + check.ELEM_ABS (|A_e| |W_e|^T);
with specials, NaN/+Inf/-Inf planted in A and W: the non-finite pattern equals the reference's;
beside torch._grouped_mm on the same inputs (relative error within REL_TOL).
fp8 (levels 13-14, the grouped fp8 variant): e4m3 inputs, fp32 scales; the reference is float64
on the dequantised inputs with the scales applied after the product (the contract of
torch._scaled_mm: C = (A B^T) * sa * sb). Stated tolerance: norm-wise FP8_REL_TOL, per element
ELEM_REL |ref| + FP8_ELEM_ABS (|A| |B|^T |sa| |sb|): the bf16 output rounding plus one fp32
tensor-core accumulation (Hopper's fp8 accumulation keeps fewer mantissa bits than fp32; the
bound is what use_fast_accum accepts). e4m3 has no Inf: specials are a NaN in A and an Inf scale.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from . import gpu, gpu_moe_fp8
from .registry import Level
from .routing import edge_routings, uniform_counts

REL_TOL = 1e-2          # bf16 operands band (METHOD.md: between 1e-3 and 1e-2)
ELEM_REL = 2.0 ** -7    # two bf16 half-ulps
ELEM_ABS = 2.0 ** -14   # times (|A||B|^T): fp32 accumulation slack
FP8_REL_TOL = 1e-2
FP8_ELEM_ABS = 2.0 ** -7


@dataclass
class CheckResult:
    """One checked case of one build, for every contract: `case` names it ("MxNxK", or the routing
    and N, K of a grouped case; m, n, k are set for the dense contracts), `rel_err_lib` is the
    relative error against the contract's library op on the same inputs (None where it was not
    compared: no torch, or the library refuses the shape)."""
    level: int
    name: str
    case: str
    ok: bool
    rel_err_ref: float
    rel_err_lib: float | None
    unwritten: int
    bad_elements: int
    nonfinite_mismatch: int
    specials: bool
    reason: str = ""
    m: int | None = None
    n: int | None = None
    k: int | None = None

    def to_dict(self):
        return asdict(self)


def _f64(cp, bits):
    """bf16 bits (uint16 CuPy) -> float64 on the device."""
    return gpu.bf16_bits_to_f32(bits, cp).astype(cp.float64)


def _poisoned(cp, shape):
    """An output buffer filled with the NaN pattern no kernel writes."""
    return cp.full(shape, gpu.POISON_BITS, dtype=cp.uint16)


def _vs_library(cp, c, run_library, refusable: bool = False) -> float | None:
    """Relative error of the level's output bits `c` against the library's output bits
    (`run_library()`, on the same inputs), over the elements finite in both. refusable: a
    RuntimeError from the library (torch refuses a shape: alignment) means no comparison (None)."""
    try:
        lib = run_library()
        cp.cuda.runtime.deviceSynchronize()
    except RuntimeError:
        if not refusable:
            raise
        return None
    out, ref = _f64(cp, c), _f64(cp, lib)
    both = cp.isfinite(out) & cp.isfinite(ref)
    den = float(cp.linalg.norm(cp.where(both, ref, 0.0)))
    return float(cp.linalg.norm(cp.where(both, out - ref, 0.0))) / den if den > 0 else 0.0


def verdict(level: Level, case: str, xp, out, ref, absref, unwritten: int, rel_lib, specials: bool,
            rel_tol: float = REL_TOL, elem_abs: float = ELEM_ABS, shape=(None, None, None)) -> CheckResult:
    """The one comparison of every contract: `out` against the float64 reference `ref` (`absref`:
    the same product on absolute values, the accumulation-error scale), on `xp` (numpy or CuPy):
    every element written, norm-wise relative error <= rel_tol, every finite element within
    ELEM_REL |ref| + elem_abs absref, the same non-finite pattern (NaN, +Inf, -Inf) as the
    reference, and (when compared) the library within rel_tol."""
    fin = xp.isfinite(ref)
    mism = int(((xp.isnan(out) != xp.isnan(ref)) | ((out == xp.inf) != (ref == xp.inf))
                | ((out == -xp.inf) != (ref == -xp.inf))).sum())
    d = xp.where(fin, out - ref, 0.0)
    r = xp.where(fin, ref, 0.0)
    den = float(xp.linalg.norm(r))
    rel = float(xp.linalg.norm(d)) / den if den > 0 else float(xp.linalg.norm(d))
    tol = ELEM_REL * xp.abs(r) + elem_abs * xp.where(fin, absref, 0.0)
    bad = int((fin & ~(xp.abs(d) <= tol)).sum())
    reasons = [f"{unwritten} elements unwritten" if unwritten else "",
               "" if rel <= rel_tol else f"rel err {rel:.3g} > {rel_tol}",
               f"{bad} elements outside tolerance" if bad else "",
               f"{mism} non-finite mismatches" if mism else "",
               "" if rel_lib is None or rel_lib <= rel_tol else f"rel err vs library {rel_lib:.3g} > {rel_tol}"]
    reason = "; ".join(x for x in reasons if x)
    return CheckResult(level.id, level.name, case, not reason, rel, rel_lib, unwritten, bad, mism, specials,
                       reason, *shape)


def check_shape(level: Level, m: int, n: int, k: int, *, seed: int = 0, specials: bool = False,
                host_ref: bool = False, with_cublas: bool = True) -> CheckResult:
    """The dense bf16 contract on one shape (host_ref: the float64 reference on the host, numpy)."""
    cp = gpu.cupy()
    a = gpu.random_bf16((m, k), seed=2 * seed + 1)
    b = gpu.random_bf16((n, k), seed=2 * seed + 2)
    if specials:
        rng = np.random.default_rng(seed)
        a[int(rng.integers(m)), int(rng.integers(k))] = 0x7FC0   # NaN
        a[int(rng.integers(m)), int(rng.integers(k))] = 0x7F80   # +Inf
        b[int(rng.integers(n)), int(rng.integers(k))] = 0xFF80   # -Inf
    c = _poisoned(cp, (m, n))
    gpu.launch(level, a, b, c, m, n, k)
    cp.cuda.runtime.deviceSynchronize()
    unwritten = int((c == gpu.POISON_BITS).sum())
    xp = np if host_ref else cp
    to64 = (lambda x: cp.asnumpy(_f64(cp, x))) if host_ref else (lambda x: _f64(cp, x))
    a64, b64 = to64(a), to64(b)
    with np.errstate(invalid="ignore", over="ignore"):
        ref = a64 @ b64.T
        absref = xp.abs(a64) @ xp.abs(b64).T

    def cublas():
        cb = _poisoned(cp, (m, n))
        gpu.cublas_tn(a, b, cb)
        return cb
    rel_lib = _vs_library(cp, c, cublas) if with_cublas and gpu.torch_or_none() is not None else None
    return verdict(level, f"{m}x{n}x{k}", xp, to64(c), ref, absref, unwritten, rel_lib, specials, shape=(m, n, k))


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


# ------------------------------------------------------------------ grouped (MoE) and fp8 contracts
def grouped_operands(counts, N: int, K: int, layout: str, seed: int, fp8: bool = False, specials: bool = False):
    cp = gpu.cupy()
    E, R = len(counts), int(sum(counts))
    wshape = (E, N, K) if layout == "enk" else (E, K, N)
    if fp8:
        a, w = gpu_moe_fp8.random_fp8((max(R, 1), K), seed), gpu_moe_fp8.random_fp8(wshape, seed + 1)
        a = a[:R]
    else:
        a, w = gpu.random_bf16((R, K), seed=seed), gpu.random_bf16(wshape, seed=seed + 1)
    if specials and R:
        rng = np.random.default_rng(seed)
        if fp8:
            a[int(rng.integers(R)), int(rng.integers(K))] = 0x7F
        else:
            a[int(rng.integers(R)), int(rng.integers(K))] = 0x7FC0
            a[int(rng.integers(R)), int(rng.integers(K))] = 0x7F80
            w.reshape(-1)[int(rng.integers(w.size))] = 0xFF80
    offs = cp.asarray(gpu_moe_fp8.offsets_from_counts(counts))
    return a, w, offs


def check_grouped(level: Level, counts, N: int, K: int, *, layout: str = "enk", seed: int = 0,
                  specials: bool = False, with_lib: bool = True, case: str = "") -> CheckResult:
    """The grouped contracts (bf16 and fp8) on one routing (`counts` rows per expert)."""
    cp = gpu.cupy()
    fp8 = level.contract == "grouped-fp8"
    E, R = len(counts), int(sum(counts))
    a, w, offs = grouped_operands(counts, N, K, layout, seed, fp8, specials)
    sa = sw = None
    if fp8:
        rs = cp.random.RandomState(seed)
        sa = (rs.random_sample(R, dtype=cp.float32) + 0.5).astype(cp.float32)
        sw = (rs.random_sample((E, N), dtype=cp.float32) + 0.5).astype(cp.float32)
        if specials and R:
            sw[0, 0] = cp.inf
    c = _poisoned(cp, (R, N))
    gpu_moe_fp8.launch_grouped(level, a, w, offs, c, E, N, K, layout, sa, sw)
    cp.cuda.runtime.deviceSynchronize()
    unwritten = int((c == gpu.POISON_BITS).sum())
    conv = gpu_moe_fp8.fp8_bits_to_f64 if fp8 else (lambda x: _f64(cp, x))
    ref, absref = _grouped_reference(cp, conv(a), w, conv, counts, N, layout, sa, sw)
    rel_lib = None
    if with_lib and gpu.torch_or_none() is not None and R and (fp8 or K % 8 == 0 and N % 8 == 0) and (
            not fp8 or (K % 16 == 0 and N % 16 == 0 and layout == "enk")):
        rel_lib = _vs_library(cp, c, lambda: gpu_moe_fp8.bits_of(
            gpu_moe_fp8.torch_scaled_grouped(a, w, offs, sa, sw) if fp8 else gpu_moe_fp8.torch_grouped(a, w, offs, layout)),
            refusable=True)
    tol, eabs = (FP8_REL_TOL, FP8_ELEM_ABS) if fp8 else (REL_TOL, ELEM_ABS)
    return verdict(level, case or f"E{E} R{R} N{N} K{K} {layout}", cp, _f64(cp, c), ref, absref, unwritten,
                   rel_lib, specials, tol, eabs)


def _grouped_reference(cp, a64, w, conv, counts, N: int, layout: str, sa=None, sw=None):
    """float64 A_e W_e^T per expert (and the same on absolute values), scaled by sa[row] sw[e, n]
    in fp8; one expert's weights converted at a time (float64 copies of all of them can be GBs)."""
    ref, absref = cp.zeros((a64.shape[0], N)), cp.zeros((a64.shape[0], N))
    ends = np.cumsum(counts)
    for e in range(len(counts)):
        r0, r1 = int(ends[e] - counts[e]), int(ends[e])
        if r1 <= r0:
            continue
        we = conv(w[e])
        we = we.T if layout == "ekn" else we
        ref[r0:r1] = a64[r0:r1] @ we.T
        absref[r0:r1] = cp.abs(a64[r0:r1]) @ cp.abs(we).T
        if sa is not None:
            s = sa[r0:r1, None].astype(cp.float64) * sw[e][None, :].astype(cp.float64)
            ref[r0:r1] *= s
            absref[r0:r1] *= cp.abs(s)
    return ref, absref


def check_fp8(level: Level, m: int, n: int, k: int, *, seed: int = 0, specials: bool = False,
              with_lib: bool = True) -> CheckResult:
    """The fp8 dense contract (torch._scaled_mm, rowwise scales) on one shape."""
    cp = gpu.cupy()
    a, b = gpu_moe_fp8.random_fp8((m, k), seed), gpu_moe_fp8.random_fp8((n, k), seed + 1)
    rs = cp.random.RandomState(seed)
    sa = (rs.random_sample(m, dtype=cp.float32) + 0.5).astype(cp.float32)
    sb = (rs.random_sample(n, dtype=cp.float32) + 0.5).astype(cp.float32)
    if specials:
        rng = np.random.default_rng(seed)
        a[int(rng.integers(m)), int(rng.integers(k))] = 0x7F   # NaN (e4m3 has no Inf)
        sb[int(rng.integers(n))] = cp.inf
    c = _poisoned(cp, (m, n))
    gpu_moe_fp8.launch_fp8(level, a, b, sa, sb, c, m, n, k)
    cp.cuda.runtime.deviceSynchronize()
    unwritten = int((c == gpu.POISON_BITS).sum())
    a64, b64 = gpu_moe_fp8.fp8_bits_to_f64(a), gpu_moe_fp8.fp8_bits_to_f64(b)
    s = sa[:, None].astype(cp.float64) * sb[None, :].astype(cp.float64)
    ref = (a64 @ b64.T) * s
    absref = (cp.abs(a64) @ cp.abs(b64).T) * cp.abs(s)
    rel_lib = None
    if with_lib and gpu.torch_or_none() is not None and k % 16 == 0 and n % 16 == 0:
        rel_lib = _vs_library(cp, c, lambda: gpu_moe_fp8.bits_of(gpu_moe_fp8.torch_scaled(a, b, sa, sb)), refusable=True)
    return verdict(level, f"{m}x{n}x{k}", cp, _f64(cp, c), ref, absref, unwritten, rel_lib, specials,
                   FP8_REL_TOL, FP8_ELEM_ABS, shape=(m, n, k))


def grouped_cases(level: Level, n_random: int, seed: int) -> list[tuple]:
    """(counts, N, K, layout, name): the edge routings and shapes, then random ones."""
    layouts = (gpu_moe_fp8.grouped_layout(level),)   # each build reads one layout (l11_wkn: [E, K, N])
    big = level.kind != "grouped"
    out = []
    for name, counts in edge_routings(big=big):
        for N, K in ((256, 128), (200, 77), (64, 1), (131, 1000)):
            for lay in layouts:
                out.append((counts, N, K, lay, f"{name} N{N} K{K} {lay}"))
    rng = np.random.default_rng(seed)
    for i in range(n_random):
        E = int(rng.choice([1, 2, 8, 16, 64, 128]))
        rows = int(rng.integers(1, 4000 if big else 400))
        N = int(rng.integers(1, 1500)); K = int(rng.integers(1, 700))
        if i % 3 == 0:
            N, K = 64 * int(rng.integers(1, 24)), 64 * int(rng.integers(1, 12))
        out.append((uniform_counts(rows, E, seed + i), N, K, layouts[i % len(layouts)], f"random{i}"))
    return out


def check_grouped_level(level: Level, n_random: int = 40, seed: int = 0, specials_every: int = 7) -> list[CheckResult]:
    res = []
    for i, (counts, N, K, lay, name) in enumerate(grouped_cases(level, n_random, seed)):
        res.append(check_grouped(level, counts, N, K, layout=lay, seed=seed + i, specials=(i % specials_every == 3),
                                 case=name))
    return res


def fp8_shapes(n_random: int, seed: int) -> list[tuple[int, int, int]]:
    out = [(128, 256, 128), (1, 1, 16), (1, 16, 1), (100, 37, 40), (128, 128, 17), (300, 200, 272),
           (16, 4096, 4096), (64, 1024, 8192), (129, 33000, 144), (2048, 2048, 512), (1500, 2900, 77)]
    rng = np.random.default_rng(seed)
    for _ in range(n_random):
        out.append((int(rng.integers(1, 3000)), int(rng.integers(1, 3000)), int(rng.integers(1, 800))))
    return out


def check_fp8_level(level: Level, n_random: int = 40, seed: int = 0, specials_every: int = 7) -> list[CheckResult]:
    return [check_fp8(level, *s, seed=seed + i, specials=(i % specials_every == 3))
            for i, s in enumerate(fp8_shapes(n_random, seed))]


# ------------------------------------------------------------------ sanitize mode (every contract)
# Small cases, no library op (under compute-sanitizer only the ladder's kernels should run); the
# dense contract's float64 reference on the host. Each contract's record names its function.
def sanitize_gemm(level: Level) -> list[CheckResult]:
    shapes = [(128, 128, 64), (100, 37, 40), (129, 130, 200)]
    if level.kind in ("persistent", "ws"):
        shapes.append((1600, 4400, 72))   # 13 x 18 = 234 tiles > 132 CTAs: the ledger crosses tiles
    if level.splitk == -2:
        shapes += [(1792, 2560, 1024), (512, 2560, 1024)]   # stream-K: whole waves + split tail, all split
    if level.splitk:
        shapes.append((64, 512, 2048))   # split-K: 8 tiles, several splits, the reduction
    return [check_shape(level, *s, seed=9, host_ref=True, with_cublas=False) for s in shapes if level.supports(*s)]


def sanitize_fp8(level: Level) -> list[CheckResult]:
    return [check_fp8(level, *s, seed=9, with_lib=False) for s in ((128, 256, 128), (100, 37, 40), (64, 512, 2048))]


def sanitize_grouped(level: Level) -> list[CheckResult]:
    lay = gpu_moe_fp8.grouped_layout(level)
    return [check_grouped(level, c, n, k, layout=lay, seed=9, with_lib=False)
            for c, n, k in (([0, 1, 0, 3, 17, 0, 40, 2], 200, 72), ([5, 0, 130], 64, 256))]
