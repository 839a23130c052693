"""The ladder's contracts (level.Contract), one record each, holding the functions that serve them:
launcher, library op, check, sanitize-mode cases, bench and report. Built here, not in level.py, because
these functions live in modules that import the registry (level.py is below all of them); importing
this module imports them (numpy only: CuPy and torch are imported inside the functions, on use)."""
from __future__ import annotations

from . import bench, bench_moe_fp8, check, gpu, gpu_moe_fp8
from .level import CONTRACT_TABLES, Contract

_GROUPED = dict(launcher=gpu_moe_fp8.launch_grouped, check=check.check_grouped_level, sanitize=check.sanitize_grouped,
                bench=bench_moe_fp8.bench_moe, report=bench_moe_fp8.report, command="bench-moe")

CONTRACTS: dict[str, Contract] = {c.name: c for c in (
    Contract("gemm-bf16", "C[M,N] = A[M,K] B[N,K]^T, bf16 in, fp32 acc, bf16 out",
             "a [M,K], b [N,K], c [M,N] uint16 (bf16 bits)", launcher=gpu.launch, library=CONTRACT_TABLES["gemm-bf16"][0],
             library_fn=gpu.cublas_tn, check=check.check_level, sanitize=check.sanitize_gemm, bench=bench.bench_set,
             report=bench.report, command="bench", dispatch_table=CONTRACT_TABLES["gemm-bf16"][1],
             table_builder="--build-dispatch"),
    Contract("gemm-fp8", "C[M,N] = (A[M,K] B[N,K]^T) * sa[M] * sb[N], e4m3 in, fp32 acc, bf16 out (torch._scaled_mm rowwise)",
             "a [M,K], b [N,K] uint8 (e4m3 bits), sa [M], sb [N] float32, c [M,N] uint16", launcher=gpu_moe_fp8.launch_fp8,
             library=CONTRACT_TABLES["gemm-fp8"][0], library_fn=gpu_moe_fp8.torch_scaled, check=check.check_fp8_level,
             sanitize=check.sanitize_fp8, bench=bench_moe_fp8.bench_fp8, report=bench_moe_fp8.report, command="bench-fp8",
             dispatch_table=CONTRACT_TABLES["gemm-fp8"][1], table_builder="--build-fp8-dispatch"),
    Contract("grouped-bf16", "C[R,N] = A_e[rows of e] W_e^T per expert, offs[E] int32 row ends, W [E,N,K] or [E,K,N] "
             "(torch._grouped_mm), bf16 in, fp32 acc, bf16 out",
             "a [R,K], w [E,N,K] (or [E,K,N]: l11_wkn), offs [E] int32, c [R,N] uint16", library=CONTRACT_TABLES["grouped-bf16"][0],
             library_fn=gpu_moe_fp8.torch_grouped, dispatch_table=CONTRACT_TABLES["grouped-bf16"][1],
             table_builder="--build-grouped-dispatch", **_GROUPED),
    Contract("grouped-fp8", "grouped-bf16 in e4m3, C = (A_e W_e^T) * sa[row] * sw[e,n] (torch._scaled_grouped_mm rowwise)",
             "a [R,K], w [E,N,K] uint8 (e4m3 bits), offs [E] int32, sa [R], sw [E,N] float32, c [R,N] uint16",
             library=CONTRACT_TABLES["grouped-fp8"][0], library_fn=gpu_moe_fp8.torch_scaled_grouped,
             dispatch_table=CONTRACT_TABLES["grouped-fp8"][1], table_builder="--build-grouped-fp8-dispatch",
             **_GROUPED),
)}


def contract_fn(contract: str, role: str):
    """The function a contract's record holds for `role` ("launcher", "library_fn", "check", "sanitize",
    "bench", "report"), read when called (so a replaced record is what runs)."""
    return getattr(CONTRACTS[contract], role)
