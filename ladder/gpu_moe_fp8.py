"""Launches of levels 11-15 (the grouped MoE and fp8 contracts) and their library baselines.

Operands are CuPy arrays of raw bits: bf16 as uint16, fp8 e4m3 as uint8; offsets int32 [E]
(cumulative row ends, the torch._grouped_mm contract), scales float32. The library side is
PyTorch on zero-copy views of the same memory: torch._grouped_mm (bf16), torch._scaled_mm with
rowwise scales and torch._scaled_grouped_mm (fp8), each with use_fast_accum=True where it has
the switch (one fp32 wgmma accumulation, like levels 11-15). Tensor maps: gpu.tensor_map_nd (the
one encoder) for 2-D and 3-D, bf16 or uint8, SWIZZLE_128B with a 128-byte inner box; the fp8 dense
launcher shares the dense tile engine's build choice, grid and split plan (gpu.build_for, gpu.ws_grid).
"""
from __future__ import annotations

import numpy as np

from . import gpu
from .build import get_kernel
from .gpu import tensor_map_nd
from .registry import Level

MAX_E_DECODE = 512   # grouped.cuh MAX_E
MAX_E_PREFILL = 512  # grouped.cuh MAX_E_WS (384 until round 6: the plan held int32 tile counts)
MAX_PLAN_MTILES = 65535   # grouped.cuh: the tile engine's plan holds the m-tile prefix as uint16


def c_box_rows(level: Level) -> int:
    """Rows of the C map's store box: 16 for the per-warp epilogue (ws.cuh EPI = 2: -DL13_WEPI,
    -DL15_WEPI, each warp stores its own 16 rows), else 64 (one consumer's 64-row slab)."""
    return 16 if any(d.endswith("_WEPI") for d in level.defines) else 64


def _map2(x, rows: int, cols: int, stride: int, box_rows: int, eb: int):
    return tensor_map_nd(x.data.ptr, eb, (cols, rows), (stride * eb,), (128 // eb, box_rows))


def _pad_last(x, k: int, mult: int):
    """Copy x [..., k] into a buffer whose last dim is rounded up to `mult` (TMA strides)."""
    cp = gpu.cupy()
    kp = -(-k // mult) * mult
    out = cp.zeros(x.shape[:-1] + (kp,), dtype=x.dtype)
    out[..., :k] = x
    return out, kp


_NULL = None


def _null():
    global _NULL
    if _NULL is None:
        _NULL = gpu.cupy().zeros(4, dtype=gpu.cupy().float32)
    return _NULL


# ------------------------------------------------------------------ grouped (levels 11, 12)
LAYOUT_TEXT = {"enk": "[E, N, K] (K contiguous)", "ekn": "[E, K, N] (N contiguous)"}


def grouped_layout(level: Level) -> str:
    """The one weight layout a grouped build reads: "ekn" (W [E, K, N], a 3-D map) for the
    L11_WKN=1 build, "enk" (W [E, N, K], a 2-D map over E*N rows) for every other."""
    return "ekn" if "L11_WKN=1" in level.defines else "enk"


def launch_grouped(level: Level, a, w, offs, c, E: int, N: int, K: int, layout: str = "enk", sa=None, sw=None) -> None:
    """C[R,N] = A_e . W_e^T per expert. a [R,K], w [E,N,K] (layout enk) or [E,K,N] (ekn), offs [E]
    int32, c [R,N] uint16; fp8 levels: a, w uint8 and sa [R], sw [E,N] float32."""
    if layout != grouped_layout(level):
        # a 3-D weight map handed to a 2-D TMA build (or the reverse) faults as an illegal
        # instruction on the device: refused here, before any launch
        raise ValueError(f"{level.name} reads W {LAYOUT_TEXT[grouped_layout(level)]}, not {LAYOUT_TEXT.get(layout, layout)}")
    cp = gpu.cupy()
    R = a.shape[0]
    fp8 = level.contract == "grouped-fp8"
    eb = 1 if fp8 else 2
    if R == 0:
        return
    if E > (MAX_E_DECODE if level.kind == "grouped" else MAX_E_PREFILL):
        raise ValueError(f"{level.name}: at most {MAX_E_DECODE if level.kind == 'grouped' else MAX_E_PREFILL} experts")
    keep = []
    mult = 16 // eb
    if K % mult:
        a, _ = _pad_last(a, K, mult)
        keep.append(a)
    if layout == "enk" and K % mult:
        w, _ = _pad_last(w, K, mult)
        keep.append(w)
    if layout == "ekn" and N % mult:
        w, _ = _pad_last(w, N, mult)
        keep.append(w)
    ka = a.shape[1]
    kern = get_kernel(level)
    gpu.set_dyn_smem(level, kern)
    if level.kind == "grouped":
        _launch_l11(level, kern, a, w, offs, c, E, N, K, ka, layout, eb, sa, sw)
    else:
        _launch_l12(level, kern, a, w, offs, c, E, N, K, ka, eb, sa, sw)
    del keep


def _need_scales(level, eb, sa, sw, R, E, N) -> None:
    """The fp8 grouped kernels read sa[row] and sw[e * N + n] unchecked: a missing or short scale is
    refused before the launch."""
    if eb == 1 and (sa is None or sw is None or tuple(sa.shape) != (R,) or tuple(sw.shape) != (E, N)):
        raise ValueError(f"{level.name}: the grouped-fp8 contract needs sa [{R}] and sw [{E}, {N}] float32 scales, "
                         f"got {None if sa is None else tuple(sa.shape)} and {None if sw is None else tuple(sw.shape)}")


def _launch_l11(level, kern, a, w, offs, c, E, N, K, ka, layout, eb, sa, sw):
    cp = gpu.cupy()
    R = a.shape[0]
    _need_scales(level, eb, sa, sw, R, E, N)
    tn = next((int(d.split("=")[1]) for d in level.defines if d.startswith("L11_TN=")), 16)
    tma = _map2(a, R, K, ka, tn, eb)
    if layout == "enk":
        tmw = _map2(w, E * N, K, w.shape[-1], 64, eb)
    else:   # [E, K, N]: dims {N, K, E}
        npad = w.shape[-1]
        tmw = tensor_map_nd(w.data.ptr, 2, (N, K, E), (npad * 2, K * npad * 2), (64, 64, 1))
    nul = _null()
    kern((gpu.sm_count(), 1, 1), (level.threads, 1, 1),
         (tma, tmw, c, offs, cp.int32(E), cp.int32(N), cp.int32(K), sa if sa is not None else nul,
          sw if sw is not None else nul), shared_mem=level.dyn_smem_bytes)


def _launch_l12(level, kern, a, w, offs, c, E, N, K, ka, eb=2, sa=None, sw=None):
    """The ws engine over the grouped tile list; fp8 (eb = 1, l12_fp8_pingpong): uint8 maps with
    128-byte inner boxes (128 e4m3 = one K tile), sa [R] and sw [E, N] to the kernel's WsX."""
    cp = gpu.cupy()
    R = a.shape[0]
    bm, bn, bk = level.tile_mnk
    _need_scales(level, eb, sa, sw, R, E, N)
    if -(-R // bm) + E > MAX_PLAN_MTILES:
        raise ValueError(f"{level.name}: {R} rows in {E} experts exceed the plan's {MAX_PLAN_MTILES} m-tiles")
    tma = _map2(a, R, K, ka, bm, eb)
    tmb = _map2(w, E * N, K, w.shape[-1], bn, eb)
    c_tma = N % 8 == 0
    tmc = gpu.tensor_map(c.data.ptr, R, N, N, c_box_rows(level)) if c_tma else tma
    nkt = -(-K // bk)
    # tiles are listed on the device; at most (R / bm + E) m-tiles x the column blocks
    bound = (-(-R // bm) + E) * -(-N // bn)
    nul = _null()
    ws, cnt = gpu._ws_buffers(0, 0)
    kern((min(gpu.sm_count(), bound), 1, 1), (level.threads, 1, 1),
         (tma, tmb, tmc, c, cp.int32(R), cp.int32(N), cp.int32(K), cp.int32(int(c_tma)), ws, cnt,
          cp.int32(1), cp.int32(nkt), nul if sa is None else sa, nul if sw is None else sw, offs, cp.int32(E)),
         shared_mem=level.dyn_smem_bytes)


# ------------------------------------------------------------------ fp8 dense (levels 13, 14)
def launch_fp8(level: Level, a, b, sa, sb, c, m: int, n: int, k: int) -> None:
    """C[M,N] = (A . B^T) * sa[:, None] * sb[None, :]: a [M,K], b [N,K] uint8 (e4m3 bits), sa [M],
    sb [N] float32, c [M,N] uint16 (bf16 bits). The dense tile engine's grid and split plan
    (gpu.ws_grid) with uint8 maps and the scales in the kernel's WsX slots."""
    cp = gpu.cupy()
    level = gpu.build_for(level, m, n, k)
    kern = get_kernel(level)
    keep = []
    if k % 16:
        a, _ = _pad_last(a, k, 16)
        b, _ = _pad_last(b, k, 16)
        keep += [a, b]
    ka = a.shape[1]
    bm, bn, _ = level.tile_mnk
    tma = _map2(a, m, k, ka, bm, 1)
    tmb = _map2(b, n, k, ka, bn // level.cluster, 1)
    grid, s, ks, ws, cnt = gpu.ws_grid(level, kern, m, n, k)
    c_tma = n % 8 == 0
    tmc = gpu.tensor_map(c.data.ptr, m, n, n, c_box_rows(level)) if c_tma else tma
    kern((grid, 1, 1), (level.threads, 1, 1),
         (tma, tmb, tmc, c, cp.int32(m), cp.int32(n), cp.int32(k), cp.int32(int(c_tma)), ws, cnt,
          cp.int32(s), cp.int32(ks), sa, sb, _null(), cp.int32(0)), shared_mem=level.dyn_smem_bytes)
    del keep


# ------------------------------------------------------------------ library baselines (torch)
def _t(x, dtype):
    torch = gpu.torch_or_none()
    if torch is None:
        raise RuntimeError(gpu.TORCH_MISSING)
    cp = gpu.cupy()
    if dtype == "bf16":
        return torch.from_dlpack(x.view(cp.int16)).view(torch.bfloat16)
    if dtype == "fp8":
        return torch.from_dlpack(x).view(torch.float8_e4m3fn)
    return torch.from_dlpack(x)


def torch_grouped(a, w, offs, layout: str = "enk"):
    """torch._grouped_mm on the same memory -> the bf16 output tensor [R, N]."""
    torch = gpu.torch_or_none()
    wt = _t(w, "bf16")
    mat_b = wt.transpose(1, 2) if layout == "enk" else wt
    return torch._grouped_mm(_t(a, "bf16"), mat_b, offs=_t(offs, None))


def torch_scaled_grouped(a, w, offs, sa, sw):
    """torch._scaled_grouped_mm (rowwise scales, fast accumulation), W [E, N, K] as [E, K, N] column-major."""
    torch = gpu.torch_or_none()
    return torch._scaled_grouped_mm(_t(a, "fp8"), _t(w, "fp8").transpose(1, 2), _t(sa, None), _t(sw, None),
                                    offs=_t(offs, None), out_dtype=torch.bfloat16, use_fast_accum=True)


def torch_scaled(a, b, sa, sb):
    """torch._scaled_mm with rowwise A / colwise B scales, bf16 out, fast accumulation."""
    torch = gpu.torch_or_none()
    m, n = a.shape[0], b.shape[0]
    return torch._scaled_mm(_t(a, "fp8"), _t(b, "fp8").t(), scale_a=_t(sa, None).view(m, 1),
                            scale_b=_t(sb, None).view(1, n), out_dtype=torch.bfloat16, use_fast_accum=True)


def bits_of(out):
    """A torch bf16 result as a zero-copy uint16 CuPy view (bf16 bits)."""
    torch = gpu.torch_or_none()
    return gpu.cupy().from_dlpack(out.contiguous().view(torch.int16)).view(gpu.cupy().uint16)


# ------------------------------------------------------------------ operands
def _e4m3_table() -> np.ndarray:
    """float64 value of each e4m3fn bit pattern (1 sign, 4 exponent bits biased 7, 3 mantissa bits;
    subnormals at exponent 0; S.1111.111 is NaN; no Inf)."""
    b = np.arange(256)
    sign = np.where(b & 0x80, -1.0, 1.0)
    e, mnt = (b >> 3) & 0xF, b & 7
    val = np.where(e == 0, mnt / 8.0 * 2.0 ** -6, (1 + mnt / 8.0) * 2.0 ** (e - 7.0))
    val = sign * val
    val[(b & 0x7F) == 0x7F] = np.nan
    return val


E4M3 = _e4m3_table()


def random_fp8(shape, seed: int):
    """e4m3 bits (uint8 CuPy): random sign and mantissa, exponent field 4..9 (|x| in [1/8, 7.5]):
    never zero, never NaN; made without torch (compute-sanitizer runs see only the ladder's kernels)."""
    cp = gpu.cupy()
    rs = cp.random.RandomState(seed)
    sign = rs.randint(0, 2, size=shape, dtype=cp.int32) << 7
    exp = rs.randint(4, 10, size=shape, dtype=cp.int32) << 3
    mnt = rs.randint(0, 8, size=shape, dtype=cp.int32)
    return (sign | exp | mnt).astype(cp.uint8)


def fp8_bits_to_f64(x):
    """e4m3 bits -> float64, exactly (a table lookup)."""
    cp = gpu.cupy()
    return cp.asarray(E4M3)[x.astype(cp.int32)]


def offsets_from_counts(counts) -> "np.ndarray":
    """Rows per expert -> int32 cumulative row ends (the offs argument)."""
    return np.cumsum(np.asarray(counts, dtype=np.int64)).astype(np.int32)
