"""GPU-side plumbing for the ladder: bf16 arrays held as raw uint16 in CuPy, launches, cuBLAS.

CuPy has no bf16 dtype, so bf16 tensors are CuPy uint16 arrays of the raw bits; conversions
are integer arithmetic (round to nearest even, NaN kept NaN). cuBLAS is reached through
PyTorch (`torch.mm` on bf16 views of the same memory, the TN call: A @ B^T with B [N,K]), which
is what the device image has; it runs on the same (legacy default) stream as CuPy's launches.
Nothing here is imported on a CPU-only machine unless called.
"""
from __future__ import annotations

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
    kern = get_kernel(level)
    kern(level.grid(m, n), (level.threads, 1, 1),
         (a, b, c, cp.int32(m), cp.int32(n), cp.int32(k)))


# ------------------------------------------------------------------ cuBLAS through torch
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
        raise RuntimeError("cuBLAS baseline needs torch with CUDA")
    at, bt, ct = as_torch_bf16(a), as_torch_bf16(b), as_torch_bf16(c)
    torch.mm(at, bt.t(), out=ct)
