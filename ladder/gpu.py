"""GPU-side plumbing for the ladder: bf16 arrays held as raw uint16 in CuPy, launches, cuBLAS.

CuPy has no bf16 dtype, so bf16 tensors are CuPy uint16 arrays of the raw bits; conversions
are integer arithmetic (round to nearest even, NaN kept NaN). cuBLAS is reached through
PyTorch (`torch.mm` on bf16 views of the same memory, the TN call: A @ B^T with B [N,K]), which
is what the device image has; it runs on the same (legacy default) stream as CuPy's launches.
Nothing here is imported on a CPU-only machine unless called.
"""
from __future__ import annotations

import ctypes
import functools

import numpy as np

from .build import get_kernel
from .registry import Level


def cupy():
    import cupy as cp
    return cp


def gpu_available() -> bool:
    try:
        cp = cupy()
        return cp.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def device_name() -> str:
    cp = cupy()
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    name = props["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


# ------------------------------------------------------------------ bf16 <-> f32, any xp
def f32_to_bf16_bits(x, xp):
    """float32 array -> uint16 bf16 bits, round to nearest even; NaN -> 0x7FC0 (sign kept)."""
    u = x.astype(xp.float32).view(xp.uint32)
    rounded = (u + xp.uint32(0x7FFF) + ((u >> xp.uint32(16)) & xp.uint32(1))) >> xp.uint32(16)
    nan = xp.isnan(x)
    out = rounded.astype(xp.uint16)
    return xp.where(nan, ((u >> xp.uint32(16)) & xp.uint32(0x8000)).astype(xp.uint16) | xp.uint16(0x7FC0), out)


def bf16_bits_to_f32(b, xp):
    return (b.astype(xp.uint32) << xp.uint32(16)).view(xp.float32)


def random_bf16(shape, seed: int, scale: float = 1.0):
    """Standard-normal bf16 (raw bits) on the device; never zeros."""
    cp = cupy()
    rs = cp.random.RandomState(seed)
    x = rs.standard_normal(shape, dtype=cp.float32) * cp.float32(scale)
    return f32_to_bf16_bits(x, cp)


POISON_BITS = 0xFFFF  # a negative NaN no kernel writes (their NaNs are canonical 0x7FFF)


def launch(level: Level, a, b, c, m: int, n: int, k: int) -> None:
    """Launch one level: a [M,K], b [N,K], c [M,N], uint16 CuPy arrays (bf16 bits)."""
    cp = cupy()
    if not level.supports(m, n, k):
        raise ValueError(f"level {level.id} does not support {m}x{n}x{k} ({level.domain_text()})")
    for arr, shape in ((a, (m, k)), (b, (n, k)), (c, (m, n))):
        if arr.shape != shape or arr.dtype != cp.uint16 or not arr.flags.c_contiguous:
            raise ValueError(f"bad operand {arr.shape} {arr.dtype}, want {shape} uint16 C-contiguous")
        if arr.data.ptr % 16:
            raise ValueError("operands must be 16-byte aligned")
    level = build_for(level, m, n, k)
    kern = get_kernel(level)
    if level.kind == "sync":
        kern(level.grid(m, n), (level.threads, 1, 1),
             (a, b, c, cp.int32(m), cp.int32(n), cp.int32(k)))
        return
    _launch_tma(level, kern, a, b, c, m, n, k)


def build_for(level: Level, m: int, n: int, k: int) -> Level:
    """The build a level launches on this shape (every contract's launcher asks here): a second
    build for larger M (`by_m`: levels 10, 14), or the mid picker's (`by_waves`: ladder/mid.py, the
    build the wave model predicts fastest)."""
    for m_above, key in level.by_m:
        if m > m_above:
            from .registry import VARIANTS
            level = VARIANTS[key]
    return _mid_level(m, n, k) if level.by_waves else level


def _target_level(key: str) -> Level:
    from .registry import VARIANTS, get_level
    return get_level(int(key)) if key.isdigit() else VARIANTS[key]


@functools.lru_cache(maxsize=1024)
def _mid_level(m: int, n: int, k: int) -> Level:
    """mid.pick_build on this device: its SM count and each cluster build's co-resident clusters
    (once per shape and process: the launch path stays free of per-call model work)."""
    from .mid import pick_build
    return _target_level(pick_build(m, n, k, sm_count(), lambda key: max_active_clusters(
        _target_level(key), get_kernel(_target_level(key)))))


# ------------------------------------------------------------------ TMA levels (4+)
# A CUtensorMap is 128 opaque bytes made on the host by cuTensorMapEncodeTiled (cuda-python's
# cuda.bindings.driver; every size wrapped in cuuint64_t / cuuint32_t) and passed BY VALUE to the
# kernel's `const __grid_constant__ TmaMap` parameter as a numpy structured scalar of 16 u64.
# Maps are 2-D, bf16, SWIZZLE_128B, zero fill out of bounds; the box is 64 columns (128 bytes,
# the swizzle span) by `box_rows` rows. Global row strides must be multiples of 16 bytes: when
# K % 8 != 0 the launcher copies A and B into K-padded buffers (stride rounded up to 8 elements;
# the map's width stays K, so the padding is never read: the TMA zero-fills past K). When
# N % 8 != 0 there is no C map and the kernels store from registers (c_tma = 0).
_TM_DTYPE = np.dtype([("opaque", np.uint64, (16,))], align=True)


@functools.lru_cache(maxsize=512)
def tensor_map_nd(ptr: int, elem_bytes: int, dims: tuple, strides_bytes: tuple, box: tuple):
    """The one tensor-map encoder (every launcher's maps): 1-3 dims, bf16 (elem_bytes 2) or uint8
    (1: e4m3 bits), dims and box innermost first, strides_bytes for dims 1.. (bytes); SWIZZLE_128B,
    zero fill out of bounds. Returned as a numpy structured scalar of 16 u64 (passed by value)."""
    from cuda.bindings import driver as drv
    dt = (drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 if elem_bytes == 2
          else drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_UINT8)
    if ptr % 16 or any(s % 16 for s in strides_bytes):
        raise ValueError("TMA needs 16-byte aligned base and strides")
    err, tm = drv.cuTensorMapEncodeTiled(
        dt, len(dims), ptr, [drv.cuuint64_t(d) for d in dims], [drv.cuuint64_t(s) for s in strides_bytes],
        [drv.cuuint32_t(b) for b in box], [drv.cuuint32_t(1)] * len(dims),
        drv.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        drv.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
        drv.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        drv.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    if err != drv.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuTensorMapEncodeTiled(dims {dims}, strides {strides_bytes}, box {box}) failed: {err}")
    val = np.zeros((), dtype=_TM_DTYPE)
    val["opaque"] = np.frombuffer(ctypes.string_at(int(tm.getPtr()), 128), dtype=np.uint64)
    return val[()]


def tensor_map(ptr: int, rows: int, cols: int, row_stride_elems: int, box_rows: int, box_cols: int = 64):
    """A 2-D bf16 tensor map (innermost dimension `cols`, box 64 columns x `box_rows` rows)."""
    return tensor_map_nd(ptr, 2, (cols, rows), (row_stride_elems * 2,), (box_cols, box_rows))


@functools.lru_cache(maxsize=None)
def sm_count() -> int:
    cp = cupy()
    return int(cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["multiProcessorCount"])


_dyn_set: set = set()


def set_dyn_smem(level: Level, kern) -> None:
    """Let the kernel take the build's dynamic shared memory (once per build and process)."""
    if level.dyn_smem_bytes and (level.name, level.defines) not in _dyn_set:
        kern.max_dynamic_shared_size_bytes = level.dyn_smem_bytes
        _dyn_set.add((level.name, level.defines))


# K % 8 != 0: A and B are copied into row strides rounded up to 8 elements (TMA needs 16-byte
# strides) by ONE kernel into buffers kept for the last shape (same pointers: the tensor maps stay
# cached). The pad columns are never read (the maps' width stays K), so they are not zeroed. ncu on
# the H200 (777x1531x263): CuPy's two strided copies cost 7.8 us beside a 13.9 us level-10 kernel.
_PAD_SRC = r"""
extern "C" __global__ void roofline_pad_k2(const unsigned short* __restrict__ a, unsigned short* __restrict__ ap,
                                           long long ma, const unsigned short* __restrict__ b,
                                           unsigned short* __restrict__ bp, long long nb, int k, int kp) {
  const long long na = ma * k, tot = na + nb * k, step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < tot; i += step) {
    if (i < na) { const long long r = i / k; ap[r * kp + (i - r * k)] = a[i]; }
    else { const long long j = i - na, r = j / k; bp[r * kp + (j - r * k)] = b[j]; }
  }
}
"""
_pad_state: dict = {}


def _pad_k2(a, b, k: int):
    """A [M, K] and B [N, K] into K-padded buffers with one launch -> (a_p, b_p, kp)."""
    cp = cupy()
    kp = (k + 7) // 8 * 8
    key = (a.shape[0], b.shape[0], kp)
    if _pad_state.get("key") != key:
        _pad_state.update(key=key, a=cp.empty((a.shape[0], kp), dtype=cp.uint16),
                          b=cp.empty((b.shape[0], kp), dtype=cp.uint16))
    if "kern" not in _pad_state:
        _pad_state["kern"] = cp.RawKernel(_PAD_SRC, "roofline_pad_k2")
    ap, bp = _pad_state["a"], _pad_state["b"]
    tot = (a.shape[0] + b.shape[0]) * k
    _pad_state["kern"]((min(-(-tot // 256), 4 * sm_count()),), (256,),
                       (a, ap, cp.int64(a.shape[0]), b, bp, cp.int64(b.shape[0]), cp.int32(k), cp.int32(kp)))
    return ap, bp, kp


def _launch_tma(level: Level, kern, a, b, c, m: int, n: int, k: int) -> None:
    cp = cupy()
    bm, bn, _ = level.tile_mnk
    if k % 8:
        a, b, ka = _pad_k2(a, b, k)
        kb = ka
    else:
        ka = kb = k
    tma = tensor_map(a.data.ptr, m, k, ka, bm)
    tmb = tensor_map(b.data.ptr, n, k, kb, bn)
    c_tma = n % 8 == 0
    tmc = tensor_map(c.data.ptr, m, n, n, 64) if c_tma else tma  # dummy when unused
    if level.kind == "ws":
        _launch_ws(level, kern, a, b, c, m, n, k, ka, kb)
        return
    grid = level.grid(m, n)
    if level.kind == "persistent":
        grid = (min(grid[0], sm_count()), 1, 1)
    set_dyn_smem(level, kern)
    kern(grid, (level.threads, 1, 1),
         (tma, tmb, tmc, c, cp.int32(m), cp.int32(n), cp.int32(k), cp.int32(int(c_tma))),
         shared_mem=level.dyn_smem_bytes)


# ------------------------------------------------------------------ cuBLAS through torch
TORCH_MISSING = ("the cuBLAS baseline needs torch with CUDA: pip install 'roofline[gpu]' (it installs torch; for "
                 "a torch built for another CUDA see https://pytorch.org/get-started/locally/)")


def torch_or_none():
    try:
        import torch
        return torch if torch.cuda.is_available() else None
    except Exception:
        return None


def as_torch_bf16(arr):
    """A zero-copy torch bf16 view of a uint16 CuPy array."""
    torch = torch_or_none()
    cp = cupy()
    return torch.from_dlpack(arr.view(cp.int16)).view(torch.bfloat16)


def cublas_tn(a, b, c) -> None:
    """c = a @ b^T through cuBLAS (torch.mm), writing into c (uint16 bf16 bits)."""
    torch = torch_or_none()
    if torch is None:
        raise RuntimeError(TORCH_MISSING)
    at, bt, ct = as_torch_bf16(a), as_torch_bf16(b), as_torch_bf16(c)
    torch.mm(at, bt.t(), out=ct)


# ------------------------------------------------------------------ warp-specialized levels (7+)
SPLITK_UNIT_COST_KTILES = 2   # fixed cost of a work unit (fill, epilogue) in K-tile steps
SPLITK_MIN_GAIN = 0.03       # a split-K plan replaces a plan with fewer splits only if its estimate is 3 % lower
STREAMK_MAX_TAIL_FILL = 0.85  # stream-K only when the last wave leaves >= 15 % of the CTAs idle
STREAMK_MIN_ITERS = 8         # a tail CTA's range is at least this many K tiles (fill must amortise)


def _partial_cost_ktiles(bm: int, bn: int, bk: int) -> float:
    """The fp32 partial of one split (written once, read once by the reducing split) in K-tile
    steps of load traffic: 2 * bm*bn*4 bytes over the (bm + bn)*bk*2 bytes one K step loads."""
    return 2 * bm * bn * 4 / ((bm + bn) * bk * 2)


def splitk_plan(level: Level, m: int, n: int, k: int, sms: int) -> tuple[int, int]:
    """-> (S, ks): the kernel's two work-list arguments for a "ws" level.

    splitk 0 or 1: no split (S = 1, ks = all K tiles). splitk n > 1: n splits (fewer if K is
    short). splitk -1 (auto): the S in 1..16 that minimises the estimated time
    ceil(units / CTAs) * (ks + 2 + partial) in K-tile steps, units = tiles * S, 2 K-tile steps of
    fixed cost per unit, `partial` (S > 1 only) the fp32 partial's write + read in K-tile steps of
    traffic (so a shape whose tiles already fill the SMs is not split), at most one split per 4 K
    tiles, and more splits only when the estimate drops by SPLITK_MIN_GAIN. splitk -2 (stream-K tail): see streamk_plan; returns (tail CTAs, data-parallel tiles)."""
    bm, bn, bk = level.tile_mnk
    nkt = (k + bk - 1) // bk
    if level.splitk == -2:
        return streamk_plan(level, m, n, k, sms)
    if level.splitk in (0, 1):
        return 1, nkt
    tiles = ((m + bm - 1) // bm) * ((n + bn - 1) // bn)
    if level.splitk > 1:
        cands = [level.splitk]
    else:
        cands = [s for s in range(1, 17) if s == 1 or nkt >= 4 * s]
    partial = _partial_cost_ktiles(bm, bn, bk)
    best = None
    for s in cands:
        ks = -(-nkt // s)
        s_eff = -(-nkt // ks)               # no empty split
        units = tiles * s_eff
        est = -(-units // sms) * (ks + SPLITK_UNIT_COST_KTILES + (partial if s_eff > 1 else 0.0))
        # a split must win by SPLITK_MIN_GAIN: the model is coarse and a split costs a workspace
        if best is None or est < best[0] * (1 - SPLITK_MIN_GAIN):
            best = (est, s_eff, ks)
    return best[1], best[2]


def streamk_plan(level: Level, m: int, n: int, k: int, ctas: int) -> tuple[int, int]:
    """-> (S, dp) for a stream-K-tail build (ws.cuh SPLITK = 2): the first dp tiles (whole waves,
    a multiple of `ctas`) run whole; the K iterations of the other tiles are spread over S CTAs.
    (0, tiles) = no tail split: the last wave fills the CTAs well enough (>= 85 %), or spreading
    it would give a CTA fewer than STREAMK_MIN_ITERS K tiles, or no more CTAs than tiles."""
    bm, bn, bk = level.tile_mnk
    nkt = (k + bk - 1) // bk
    tiles = ((m + bm - 1) // bm) * ((n + bn - 1) // bn)
    full = tiles // ctas
    tail = tiles - full * ctas
    if tail == 0 or tail > STREAMK_MAX_TAIL_FILL * ctas:
        return 0, tiles
    s = min(ctas, (tail * nkt) // STREAMK_MIN_ITERS)
    if s <= tail:
        return 0, tiles
    return s, full * ctas


def _streamk_lmax(iters: int, s: int, nkt: int) -> int:
    """The most tiles one tail CTA's range of ceil(iters / s) K tiles touches (ws.cuh WsWork.lmax)."""
    return -(-(-(-iters // s)) // nkt) + 1 if s else 0


def streamk_slots(level: Level, m: int, n: int, k: int, s: int, dp: int) -> int:
    """Workspace slots (one fp32 tile each) the stream-K tail needs: S CTAs x lmax."""
    bm, bn, bk = level.tile_mnk
    nkt = (k + bk - 1) // bk
    tiles = ((m + bm - 1) // bm) * ((n + bn - 1) // bn)
    return s * _streamk_lmax((tiles - dp) * nkt, s, nkt)


def streamk_work(tiles: int, nkt: int, ctas: int, s: int, dp: int) -> list[list[tuple]]:
    """ws.cuh's WsWork (SPLITK = 2) in Python, CTA by CTA: for CTA p the list of its units
    (tile, kt0, kt1, nseg, own, slot, [slots of the tile's other segments]). The same integer
    arithmetic as the kernel, so tests can check on a CPU that the units cover every tile's K
    tiles exactly once and that the segments of a tile agree on their count and slots."""
    iters = (tiles - dp) * nkt
    lmax = _streamk_lmax(iters, s, nkt)
    start = (lambda p: (p * iters) // s)
    owner = (lambda x: ((x + 1) * s + iters - 1) // iters - 1)

    def seg_slot(t, o):
        p = owner((t - dp) * nkt) + o
        return p * lmax + (t - dp) - start(p) // nkt

    out = []
    for cid in range(ctas):
        units = [(t, 0, nkt, 1, 0, 0, []) for t in range(cid, dp, ctas)]
        if s and cid < s and start(cid + 1) > start(cid):
            x0, x1 = start(cid), start(cid + 1)
            for li, j in enumerate(range(x0 // nkt, (x1 - 1) // nkt + 1)):
                a = j * nkt
                pf = owner(a)
                nseg = owner(a + nkt - 1) - pf + 1
                own = cid - pf
                t = dp + j
                units.append((t, max(x0, a) - a, min(x1, a + nkt) - a, nseg, own, cid * lmax + li,
                              [seg_slot(t, o) for o in range(nseg) if o != own]))
        out.append(units)
    return out


_ws_cache: dict = {}


def _ws_buffers(nfloats: int, ncounters: int):
    """Workspace (fp32 partials) and tile counters, kept between launches; counters start at 0
    and every launch leaves them at 0 (the last split of a tile resets its counter)."""
    cp = cupy()
    ws = _ws_cache.get("ws")
    if ws is None or ws.size < nfloats:
        ws = _ws_cache["ws"] = cp.empty(max(nfloats, 4), dtype=cp.float32)
    cnt = _ws_cache.get("cnt")
    if cnt is None or cnt.size < ncounters:
        cnt = _ws_cache["cnt"] = cp.zeros(max(ncounters, 1024), dtype=cp.int32)
    return ws, cnt


CLUSTER_RESIDENCY: dict = {}   # (level name, defines) -> (max co-resident clusters or None, how it was found)


def max_active_clusters(level: Level, kern) -> int | None:
    """How many clusters of this build can be resident at once (cuOccupancyMaxActiveClusters with
    the build's block size and dynamic shared memory; its compile-time cluster shape). With
    ~200 KiB of shared memory per CTA a cluster needs `cluster` free SMs of one GPC, so this can
    be below #SMs / cluster; a persistent grid larger than it runs its last clusters in a second
    round. None when the query is not available (then the grid is #SMs / cluster)."""
    key = (level.name, level.defines)
    if key in CLUSTER_RESIDENCY:
        return CLUSTER_RESIDENCY[key][0]
    val, how = None, ""
    try:
        from cuda.bindings import driver as drv
        ptr = int(kern.kernel.ptr)
        cfg = drv.CUlaunchConfig()
        cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = sm_count(), 1, 1
        cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = level.threads, 1, 1
        cfg.sharedMemBytes = level.dyn_smem_bytes
        cfg.numAttrs = 0
        err, nclu = drv.cuOccupancyMaxActiveClusters(drv.CUfunction(ptr), cfg)
        if err == drv.CUresult.CUDA_SUCCESS and int(nclu) > 0:
            val, how = int(nclu), "cuOccupancyMaxActiveClusters"
        else:
            how = f"cuOccupancyMaxActiveClusters: {err}, {nclu}"
    except Exception as exc:  # no handle / no binding: fall back to #SMs / cluster
        how = f"query failed: {type(exc).__name__}: {exc}"[:200]
    CLUSTER_RESIDENCY[key] = (val, how)
    return val


def ws_grid(level: Level, kern, m: int, n: int, k: int):
    """The persistent grid of a tile-engine ("ws") build on M x N x K and its split plan, for every
    dense contract's launcher -> (CTAs, s, ks, workspace, counters): units = cluster tiles x splits,
    at most one CTA per SM (cluster builds: the co-resident clusters), `grid_balance` builds on the
    fewest CTAs that keep the number of rounds (the idle SMs draw no power); a stream-K tail
    (splitk -2): s tail clusters beside ks data-parallel cluster tiles (in a 2-CTA cluster, round 6's
    `l13_sk`, both CTAs walk the same units: workspace slots and tile counters per CTA rank)."""
    bm, bn, _ = level.tile_mnk
    cl = level.cluster
    sms = sm_count()
    s, ks = splitk_plan(level, m, n, k, sms)
    tiles = -(-(-(-m // bm)) // cl) * -(-n // bn)
    units = tiles * s
    set_dyn_smem(level, kern)
    slots = sms // cl
    if cl > 1:
        slots = min(slots, max_active_clusters(level, kern) or slots)
    if level.splitk == -2:
        mc = -(-(-(-m // bm)) // cl) * bm   # the rows of the cluster tiles: the plan counts cluster tiles over the clusters
        s, ks = streamk_plan(level, mc, n, k, slots)
        ws, cnt = _ws_buffers(streamk_slots(level, mc, n, k, s, ks) * cl * bm * bn, tiles * cl if s else 0)
        return cl * min(slots, max(s, ks)), s, ks, ws, cnt
    ctas = min(units, slots)
    if level.grid_balance:
        ctas = -(-units // -(-units // slots))
    ws, cnt = _ws_buffers(units * bm * bn, tiles) if s > 1 else _ws_buffers(0, 0)
    return cl * ctas, s, ks, ws, cnt


def _launch_ws(level: Level, kern, a, b, c, m: int, n: int, k: int, ka: int, kb: int) -> None:
    cp = cupy()
    bm, bn, _ = level.tile_mnk
    tma = tensor_map(a.data.ptr, m, k, ka, bm)
    tmb = tensor_map(b.data.ptr, n, k, kb, bn // level.cluster)
    grid, s, ks, ws, cnt = ws_grid(level, kern, m, n, k)
    c_tma = n % 8 == 0   # the C map needs 16-byte row strides; else register stores
    tmc = tensor_map(c.data.ptr, m, n, n, 64) if c_tma else tma
    kern((grid, 1, 1), (level.threads, 1, 1),
         (tma, tmb, tmc, c, cp.int32(m), cp.int32(n), cp.int32(k), cp.int32(int(c_tma)),
          ws, cnt, cp.int32(s), cp.int32(ks)), shared_mem=level.dyn_smem_bytes)
