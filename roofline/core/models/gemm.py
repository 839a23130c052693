"""Dense GEMM [M,K] x [K,N] (docs/method.md section 2)."""
from __future__ import annotations

from roofline.core.models import Candidate, ModelResult, wider
from roofline.peaks.gemm import gemm_fewest_bytes, gemm_flops


def gemm_counts(M: int, N: int, K: int, a_bytes: float, w_bytes: float, out_bytes: float,
                batch: int = 1) -> tuple[float, float]:
    """(flops, bytes) of C = A·B. NB: fewest bytes: A, B and C each cross HBM once; re-reads that
    L2 does not catch are the kernel's problem, not the model's (stage C measures them)."""
    return gemm_flops(M, N, K, batch), gemm_fewest_bytes(M, N, K, a_bytes, w_bytes, out_bytes, batch)


def model(shape: dict, dt: dict) -> ModelResult:
    M, N, K = int(shape["M"]), int(shape["N"]), int(shape["K"])
    batch = int(shape.get("batch", 1))
    flops, nbytes = gemm_counts(M, N, K, dt["act_bytes"], dt["weight_bytes"], dt["out_bytes"], batch)
    return ModelResult(candidates=[Candidate("dense", nbytes, flops)],
                       compute_dtype=wider(dt["act"], dt["weight"]),
                       info={"M": M, "N": N, "K": K, "batch": batch})
