#!/usr/bin/env python3
"""Make the stage-C Nsight Compute fixtures on the device machine (H200, ncu 2025.3.1, torch).

Runs kernels whose work is known (cuBLAS GEMMs of a few shapes, elementwise ops, a decode SDPA),
profiles them with `ncu --clock-control none` and exports the raw page as CSV. Usage, on the
device (the `run` tool), from the repository root:

    python3 tools/device/make_ncu_fixtures.py --out $OUT

What it writes under --out (copied by hand into fixtures/ncu/, see fixtures/ncu/README.md):
    known.json              ops, shapes, known useful FLOPs / fewest bytes, kernel names per op
                            (from a torch.profiler pass without ncu), versions
    known.ncu-rep           the ncu report (only the kernels of the measured region)
    known_raw.csv           ncu --import known.ncu-rep --csv --page raw --print-units base
                                --print-kernel-base demangled
    known_raw_autounits.csv the same without --print-units base (auto-scaled units, separators)
    known_raw_default.csv   plain `ncu --import known.ncu-rep --csv --page raw`
    log.txt                 every command and its output

Internally the same file is the workload (`--workload`): tensors are made and every op is run
twice for warm-up BEFORE cudaProfilerStart, so the report (ncu --profile-from-start off) holds
only the measured launches, in the order of OPS below.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

# Hopper metric names, each checked against `ncu --query-metrics --chip gh100`
# (`ncu --query-metrics --chip gh100`); suffixes .sum/.avg/.peak_sustained/.per_second are
# ncu's standard roll-ups.
METRICS = [
    "gpu__time_duration.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "dram__bytes.sum",
    "dram__bytes.sum.peak_sustained",
    "dram__cycles_elapsed.avg.per_second",
    "sm__cycles_elapsed.avg.per_second",
    "lts__t_bytes.sum",
    "l1tex__t_bytes.sum",
    "sm__ops_path_tensor_src_bf16_dst_fp32.sum",
    "sm__ops_path_tensor_src_fp16.sum",
    "sm__ops_path_tensor_src_fp8.sum",
    "sm__ops_path_tensor_src_tf32_dst_fp32.sum",
    "sm__ops_path_tensor_src_fp64.sum",
    "sm__ops_path_tensor_src_int8.sum",
    "sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32_sparsity_off.sum",
    "sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32_sparsity_off.sum.peak_sustained",
    "sm__ops_path_tensor_op_hgmma_src_fp16_sparsity_off.sum.peak_sustained",
    "sm__ops_path_tensor_src_fp8_sparsity_off.sum.peak_sustained",
    "sm__sass_thread_inst_executed_op_hadd_pred_on.sum",
    "sm__sass_thread_inst_executed_op_hmul_pred_on.sum",
    "sm__sass_thread_inst_executed_op_hfma_pred_on.sum",
    "sm__sass_thread_inst_executed_op_fadd_pred_on.sum",
    "sm__sass_thread_inst_executed_op_fmul_pred_on.sum",
    "sm__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "sm__sass_thread_inst_executed_op_dadd_pred_on.sum",
    "sm__sass_thread_inst_executed_op_dmul_pred_on.sum",
    "sm__sass_thread_inst_executed_op_dfma_pred_on.sum",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
]
# fallback if ncu rejects a roll-up suffix: plain counters only (peaks then absent)
SAFE_METRICS = [m for m in METRICS if m.count(".") == 1 and m.endswith(".sum")]


# ----------------------------------------------------------------------------- workload
def build_ops(torch):
    """(key, fn, repeats, known) for every measured op. known: useful FLOPs and fewest bytes."""
    F = torch.nn.functional
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(0)
    ops = []

    def gemm(M, N, K, repeats):
        a = torch.randn(M, K, device=dev, dtype=torch.bfloat16, generator=g)
        b = torch.randn(K, N, device=dev, dtype=torch.bfloat16, generator=g)
        c = torch.empty(M, N, device=dev, dtype=torch.bfloat16)
        known = dict(kind="gemm", dtype="bf16", M=M, N=N, K=K, layout="A[M,K] row-major @ B[K,N] row-major -> C[M,N] bf16 (torch.matmul out=)",
                     useful_flops=2 * M * N * K, fewest_bytes=2 * (M * K + K * N + M * N))
        ops.append((f"gemm_bf16_{M}x{N}x{K}", lambda: torch.matmul(a, b, out=c), repeats, known))

    gemm(4096, 4096, 4096, 2)
    gemm(64, 8192, 8192, 2)
    gemm(1000, 3000, 2000, 1)

    n = 1 << 26
    x = torch.randn(n, device=dev, dtype=torch.bfloat16, generator=g)
    y = torch.randn(n, device=dev, dtype=torch.bfloat16, generator=g)
    z = torch.empty_like(x)
    ops.append(("add_bf16_64Mi", lambda: torch.add(x, y, out=z), 1,
                dict(kind="elementwise", dtype="bf16", elems=n, useful_flops=n, fewest_bytes=3 * 2 * n,
                     note="z = x + y, bf16, computed in fp32 by PyTorch (opmath)")))

    nf = 1 << 24
    xf = torch.randn(nf, device=dev, dtype=torch.float32, generator=g)
    yf = torch.randn(nf, device=dev, dtype=torch.float32, generator=g)
    zf = torch.empty_like(xf)
    ops.append(("mul_fp32_16Mi", lambda: torch.mul(xf, yf, out=zf), 1,
                dict(kind="elementwise", dtype="fp32", elems=nf, useful_flops=nf, fewest_bytes=3 * 4 * nf,
                     note="z = x * y, fp32: one FMUL per element expected")))

    b_, hq, hkv, s, d = 8, 32, 8, 2048, 128
    q = torch.randn(b_, hq, 1, d, device=dev, dtype=torch.bfloat16, generator=g)
    k = torch.randn(b_, hkv, s, d, device=dev, dtype=torch.bfloat16, generator=g)
    v = torch.randn(b_, hkv, s, d, device=dev, dtype=torch.bfloat16, generator=g)
    ops.append(("sdpa_decode_b8_hq32_hkv8_s2048_d128",
                lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), 1,
                dict(kind="attention_decode", dtype="bf16", batch=b_, n_q_heads=hq, n_kv_heads=hkv, seq_len=s,
                     head_dim=d, useful_flops=2 * 2 * b_ * hq * s * d,
                     fewest_bytes=2 * b_ * hkv * s * d * 2 + 2 * b_ * hq * d * 2,
                     note="F.scaled_dot_product_attention(q[b,hq,1,d], k/v[b,hkv,s,d], enable_gqa=True); "
                          "fewest bytes = K + V + q + out")))

    # fp8 e4m3 GEMM through torch._scaled_mm (B must be column-major)
    try:
        M = N = K = 4096
        a8 = torch.randn(M, K, device=dev, generator=g).to(torch.float8_e4m3fn)
        b8 = torch.randn(N, K, device=dev, generator=g).to(torch.float8_e4m3fn).t()
        one = torch.ones((), device=dev, dtype=torch.float32)
        fn = lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        fn()
        ops.append((f"gemm_fp8_{M}x{N}x{K}", fn, 1,
                    dict(kind="gemm", dtype="fp8_e4m3", M=M, N=N, K=K, useful_flops=2 * M * N * K,
                         fewest_bytes=M * K + K * N + 2 * M * N,
                         note="torch._scaled_mm, A fp8 row-major, B fp8 column-major, C bf16")))
    except Exception as e:  # noqa: BLE001 - the other ops still count
        print(f"fp8 GEMM skipped: {e!r}", file=sys.stderr)
    return ops


def workload(names_json: str | None) -> None:
    import torch

    ops = build_ops(torch)
    for _ in range(2):                       # warm-up: cuBLAS heuristics, allocator, module loads
        for _key, fn, _r, _k in ops:
            fn()
    torch.cuda.synchronize()

    if names_json:                            # plain pass (no ncu): kernel names and times per op
        from torch.profiler import ProfilerActivity, profile

        out = dict(torch=torch.__version__, device=torch.cuda.get_device_name(), ops=[])
        for key, fn, repeats, known in ops:
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(repeats):
                    fn()
                torch.cuda.synchronize()
            names = [e.name for e in prof.events()
                     if e.device_type == torch.autograd.DeviceType.CUDA
                     and not e.name.startswith(("Memcpy", "Memset"))]
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(20):
                fn()
            end.record()
            torch.cuda.synchronize()
            out["ops"].append(dict(key=key, repeats=repeats, known=known, kernels=names,
                                   t_ms_cuda_event_mean20=start.elapsed_time(end) / 20))
        with open(names_json, "w") as f:
            json.dump(out, f, indent=1)
        return

    cudart = torch.cuda.cudart()
    cudart.cudaProfilerStart()
    for key, fn, repeats, _known in ops:
        for _ in range(repeats):
            torch.cuda.nvtx.range_push(key)
            fn()
            torch.cuda.nvtx.range_pop()
            torch.cuda.synchronize()
    cudart.cudaProfilerStop()


# ----------------------------------------------------------------------------- driver
def driver(out: str) -> int:
    os.makedirs(out, exist_ok=True)
    logf = open(os.path.join(out, "log.txt"), "w")
    me = os.path.abspath(__file__)

    def sh(cmd, stdout_path=None, timeout=300):
        t0 = time.time()
        logf.write(f"$ {' '.join(cmd)}" + (f" > {os.path.basename(stdout_path)}" if stdout_path else "") + "\n")
        logf.flush()
        try:
            if stdout_path:
                with open(stdout_path, "w") as so:
                    p = subprocess.run(cmd, stdout=so, stderr=subprocess.PIPE, text=True, timeout=timeout)
                logf.write(p.stderr)
            else:
                p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
                logf.write(p.stdout)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            rc = 124
        except OSError as e:              # e.g. the tool is not on PATH
            logf.write(f"{e!r}\n")
            rc = 127
        logf.write(f"[rc={rc}, {time.time() - t0:.1f} s]\n")
        logf.flush()
        print(f"rc={rc} {time.time() - t0:.1f}s: {' '.join(cmd)[:160]}", flush=True)
        return rc

    sh(["ncu", "--version"])
    sh(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.mem", "--format=csv"])
    sh([sys.executable, me, "--workload", "--names", os.path.join(out, "known.json")], timeout=150)
    rep = os.path.join(out, "known")
    base = ["ncu", "--clock-control", "none", "--profile-from-start", "off", "--nvtx", "-f", "-o", rep]
    rc = sh(base + ["--metrics", ",".join(METRICS), sys.executable, me, "--workload"], timeout=270)
    if rc != 0 or not os.path.exists(rep + ".ncu-rep"):
        logf.write("full metric list failed; retrying with SAFE_METRICS\n")
        sh(base + ["--metrics", ",".join(SAFE_METRICS), sys.executable, me, "--workload"], timeout=200)
    r = rep + ".ncu-rep"
    imp = ["ncu", "--import", r, "--csv", "--page", "raw"]
    sh(imp + ["--print-units", "base", "--print-kernel-base", "demangled"], os.path.join(out, "known_raw.csv"), 120)
    sh(imp + ["--print-kernel-base", "demangled"], os.path.join(out, "known_raw_autounits.csv"), 120)
    sh(imp, os.path.join(out, "known_raw_default.csv"), 120)
    sh(["ls", "-l", out])
    logf.close()
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="output folder (driver mode)")
    ap.add_argument("--workload", action="store_true", help="run the kernels (internal)")
    ap.add_argument("--names", help="with --workload: no ncu; write kernel names per op to this JSON")
    a = ap.parse_args()
    if a.workload:
        workload(a.names)
        return 0
    if not a.out:
        ap.error("--out is required")
    return driver(a.out)


if __name__ == "__main__":
    sys.exit(main())
