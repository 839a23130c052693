"""Where the time goes: one launch each of a ladder level and the library op it is measured against,
at the shapes whose targets a level missed (ladder/notes/l11.md .. l14.md), for ncu:

    ncu --profile-from-start off --set full --cache-control all --clock-control none -f -o where \
        python3 tools/device/ncu_where.py [CASE ...]
    ncu --import where.ncu-rep --csv --page raw --print-units base > where_raw.csv
    python3 tools/device/ncu_where.py --summarize where_raw.csv      # on any machine: the table

Every launch is compiled and warmed outside the profiled range (cudaProfilerStart/Stop), then
launched once inside it, preceded by a one-thread marker kernel `mark_NNN` whose number is the
launch's index in the printed plan (WHERE_PLAN lines): the kernels between two markers belong to
that launch (a library op can launch more than one kernel). Operands as the benches build them
(ladder/bench_moe_fp8.py: routing topk_counts seed 0; random bf16 / e4m3), ncu flushes the caches
before each kernel (--cache-control all), as the benches flush L2 before each timed launch."""
from __future__ import annotations

import csv
import json
import sys

MID = ((200, 6144, 4096), (1000, 3000, 7000), (512, 4096, 4096), (777, 1531, 263))


def _plan(cases):
    """(label, fn) pairs, built lazily on the GPU machine. A case names its builds after a colon,
    joined by "+" ("qwen3moe-decode64-down:l12_pingpong"; an "-fp8" suffix on an MoE case: its
    fp8 form; "fp8-MxNxK" and "bf16-MxNxK": dense); the library op runs first in every case."""
    import cupy as cp

    from roofline.ladder import bench_moe_fp8, check, gpu, gpu_moe_fp8
    from roofline.ladder.registry import get_level
    from roofline.ladder.routing import topk_counts

    out = []
    for spec in cases:
        case, _, named = spec.partition(":")
        levels = [get_level(t) for t in named.split("+") if t]
        if not levels:
            raise SystemExit(f"{spec!r}: name the builds after a colon")
        fp8 = case.endswith("-fp8")
        case = case[:-4] if fp8 else case
        if case in bench_moe_fp8.MOE_CASES:
            E, tokens, top_k, N, K = bench_moe_fp8.MOE_CASES[case]
            counts = topk_counts(tokens, E, top_k, seed=0)
            R = sum(counts)
            a, w, offs = check.grouped_operands(counts, N, K, "enk", seed=1, fp8=fp8)
            sa = cp.ones(R, dtype=cp.float32) if fp8 else None
            sw = cp.ones((E, N), dtype=cp.float32) if fp8 else None
            c = cp.empty((R, N), dtype=cp.uint16)
            lib = ((lambda a=a, w=w, o=offs, sa=sa, sw=sw: gpu_moe_fp8.torch_scaled_grouped(a, w, o, sa, sw)) if fp8
                   else (lambda a=a, w=w, o=offs: gpu_moe_fp8.torch_grouped(a, w, o)))
            run = lambda lv, a=a, w=w, o=offs, c=c, sa=sa, sw=sw, E=E, N=N, K=K: \
                gpu_moe_fp8.launch_grouped(lv, a, w, o, c, E, N, K, "enk", sa, sw)  # noqa: E731
            tag = f"{case}{'-fp8' if fp8 else ''}"
        elif case.startswith(("fp8-", "bf16-")):
            m, n, k = (int(x) for x in case.split("-", 1)[1].split("x"))
            c = cp.empty((m, n), dtype=cp.uint16)
            if case.startswith("fp8-"):
                a, b = gpu_moe_fp8.random_fp8((m, k), 1), gpu_moe_fp8.random_fp8((n, k), 2)
                sa, sb = cp.ones(m, dtype=cp.float32), cp.ones(n, dtype=cp.float32)
                lib = lambda a=a, b=b, sa=sa, sb=sb: gpu_moe_fp8.torch_scaled(a, b, sa, sb)  # noqa: E731
                run = lambda lv, a=a, b=b, sa=sa, sb=sb, c=c, m=m, n=n, k=k: \
                    gpu_moe_fp8.launch_fp8(lv, a, b, sa, sb, c, m, n, k)  # noqa: E731
            else:
                a, b = gpu.random_bf16((m, k), 1), gpu.random_bf16((n, k), 2)
                lib = lambda a=a, b=b, c=c: gpu.cublas_tn(a, b, c)  # noqa: E731
                run = lambda lv, a=a, b=b, c=c, m=m, n=n, k=k: gpu.launch(lv, a, b, c, m, n, k)  # noqa: E731
            tag = case
        else:
            raise SystemExit(f"unknown case {case!r}")
        out.append((f"{tag} {'cublas' if case.startswith('bf16-') else 'library'}", lib))
        out += [(f"{tag} {lv.name}", lambda lv=lv, run=run: run(lv)) for lv in levels]
    return out


# the first round's plan (start3_where): the builds of that time where a target was missed
DEFAULT = (["qwen3moe-prefill4096-gate_up:12+l12_m128n128", "qwen3moe-prefill4096-down:12+l12_m128n128"]
           + [spec for c in ("qwen3moe-decode64-gate_up", "qwen3moe-decode64-down", "qwen3moe-decode256-gate_up",
                             "mixtral-decode64-gate_up") for spec in (f"{c}:12", f"{c}-fp8:l11_fp8")]
           + ["fp8-8192x8192x8192:13"] + [f"bf16-{m}x{n}x{k}:9+l09_streamk+10+l10_n256" for m, n, k in MID])


# the third round's plan: the builds the dispatch tables name now, where a target is still missed
# round 5 (notes/l15.md): the fp8 grouped prefill builds beside torch._scaled_grouped_mm
ROUND5 = ["qwen3moe-prefill4096-gate_up-fp8:l15_pp_m128+15", "qwen3moe-prefill4096-down-fp8:l15_pp_m128+15"]
# round 7 (notes/l13.md, l15.md): level 13 and l15_pp_m128 beside their per-warp (round 6) and staged-scale (round 7)
# twins, with the library op first in each case
ROUND7 = ["fp8-8192x8192x8192:13+l13_wepi+l13_ssc",
          "qwen3moe-prefill4096-gate_up-fp8:l15_pp_m128+l15_pp_m128_wepi+l15_pp_m128_ssc",
          "qwen3moe-prefill4096-down-fp8:l15_pp_m128+l15_pp_m128_wepi+l15_pp_m128_ssc"]
# what round 7 left for the next call: the paired-unit tile order beside l15_pp_m128 (DRAM reads, notes/l15.md)
ROUND7_NEXT = ["qwen3moe-prefill4096-gate_up-fp8:l15_pp_m128+l15_pp_m128_pairs",
               "qwen3moe-prefill4096-down-fp8:l15_pp_m128+l15_pp_m128_pairs"]
# round 8 (notes/l11.md .. l15.md, H100): the decode cases whose HBM targets were missed (call 1), then the prefill
# and fp8 dense cases (call 3)
ROUND8 = ["qwen35moe-decode64-down-fp8:l11_fp8_tn32+l12_fp8_pingpong", "olmoe-decode64-down-fp8:l11_fp8_tn32+l12_fp8_pingpong",
          "gptoss20b-decode64-gate_up-fp8:l11_fp8_tn32+l12_fp8_pingpong", "granite4h-decode16-down:11+l12_pingpong",
          "olmoe-decode64-down:11+l12_pingpong"]
ROUND8_PREFILL_DENSE = ["qwen35moe-prefill4096-gate_up-fp8:l15_pp_m128+15", "olmoe-prefill4096-gate_up:12+l12_pingpong_m128",
                        "gptoss20b-decode64-down-fp8:l11_fp8_tn32", "fp8-256x7168x2048:l13_pingpong+14",
                        "fp8-512x7168x2048:l13_ssc+13"]
ROUND3 = ["qwen3moe-decode64-down:l12_pingpong", "qwen3moe-decode256-down:l12_pingpong",
          "qwen3moe-decode64-down-fp8:l11_fp8_tn32+l12_fp8_pingpong",
          "qwen3moe-decode64-gate_up-fp8:l11_fp8_tn32+l12_fp8_pingpong",
          "qwen3moe-prefill4096-gate_up:l12_pingpong_m128+12",
          "bf16-200x6144x4096:l09_mid+l09_m128_cl2", "bf16-1000x3000x7000:9+l09_mid",
          "bf16-512x4096x4096:l09_mid+l09_m128_cl2"]


def run(cases) -> None:
    import cupy as cp

    marks = cp.RawModule(code="\n".join(f'extern "C" __global__ void mark_{i:03d}() {{}}' for i in range(200)))
    plan = _plan(cases)
    for label, fn in plan:        # compile, heuristics, module loads: outside the profiled range
        fn(); fn()
    cp.cuda.runtime.deviceSynchronize()
    for i, (label, _) in enumerate(plan):
        print(f"WHERE_PLAN {i:03d} {label}", flush=True)
    cp.cuda.runtime.profilerStart()
    for i, (label, fn) in enumerate(plan):
        marks.get_function(f"mark_{i:03d}")((1,), (1,), ())
        fn()
        cp.cuda.runtime.deviceSynchronize()
    cp.cuda.runtime.profilerStop()


KEEP = {
    "t_us": "gpu__time_duration.sum", "dram_read": "dram__bytes_read.sum", "dram_write": "dram__bytes_write.sum",
    "dram_pct": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "sm_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "l2_hit": "lts__t_sector_hit_rate.pct", "grid": "launch__grid_size", "regs": "launch__registers_per_thread",
    "waves": "launch__waves_per_multiprocessor",
}
STALLS = "smsp__average_warps_issue_stalled_"


def summarize(path: str, plan_log: str | None = None) -> list[dict]:
    """Rows of the raw CSV grouped by the markers: per launch, its kernels' summed time and DRAM
    bytes, the heaviest kernel's throughputs and its top warp-stall reasons (per issued instruction)."""
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    rows = [r for r in rows if r.get("Kernel Name") and not r["Kernel Name"].startswith("(")]
    labels = {}
    if plan_log:
        for ln in open(plan_log):
            if ln.startswith("WHERE_PLAN "):
                _, i, label = ln.rstrip("\n").split(" ", 2)
                labels[int(i)] = label
    out, cur = [], None

    def num(r, k):
        try:
            return float(str(r.get(k, "")).replace(",", ""))
        except ValueError:
            return None
    for r in rows:
        name = r["Kernel Name"]
        if name.startswith("mark_"):
            i = int(name[5:8])
            cur = {"launch": i, "label": labels.get(i, str(i)), "kernels": []}
            out.append(cur)
            continue
        if cur is None:
            continue
        stalls = {k[len(STALLS):].replace("_per_issue_active.ratio", "").replace("_per_warp_active.ratio", ""): num(r, k)
                  for k in r if k.startswith(STALLS) and k.endswith("_per_issue_active.ratio")}
        tens = [k for k in r if "pipe_tensor" in k and "pct_of_peak_sustained_active" in k and num(r, k) is not None]
        cur["kernels"].append({"name": name[:80], **{k: num(r, v) for k, v in KEEP.items()},
                               "tensor_pct": max((num(r, k) for k in tens), default=None),
                               "tensor_ops": num(r, "sm__ops_path_tensor_src_bf16_dst_fp32.sum") or num(r, "sm__ops_path_tensor_src_fp8.sum"),
                               "stalls_top": sorted(((v, k) for k, v in stalls.items() if v), reverse=True)[:4]})
    for o in out:
        ks = o["kernels"]
        o["t_us"] = sum(k["t_us"] or 0 for k in ks) / 1e3   # gpu__time_duration.sum is in ns (base units)
        o["dram_bytes"] = sum((k["dram_read"] or 0) + (k["dram_write"] or 0) for k in ks)
    return out


def _source_blocks(text: str) -> list[tuple[str, list[tuple[int, str, int]]]]:
    """`ncu --import R --csv --page source --print-source sass` -> (kernel name, [(address offset, SASS, warp-stall
    samples)]) per profiled kernel, in launch order; the markers' own blocks included (each kernel's block may be
    printed twice: kept once per marker)."""
    out, seen, mark = [], set(), None
    for blk in text.split('"Kernel Name","')[1:]:
        name = blk.split('"', 1)[0]
        rows = list(csv.reader(blk.split("\n", 1)[1].splitlines()))
        hdr, data = rows[0], [r for r in rows[1:] if len(r) == len(rows[0])]
        if name.startswith("mark_"):
            mark = name
        if (mark, name) in seen or not data:
            continue
        seen.add((mark, name))
        i_s = hdr.index("Warp Stall Sampling (All Samples)")
        base = int(data[0][0], 16)
        out.append((name, [(int(r[0], 16) - base, r[1].strip(), int(r[i_s])) for r in data]))
    return out


def regions(ins: list[tuple[int, str, int]]) -> dict:
    """Warp-stall samples of one ws.cuh kernel by where its warps were (samples are proportional to warp time):
    - setup: before the consumers' `setmaxnreg.inc` (USETMAXREG.TRY_ALLOC);
    - the consumer branch [TRY_ALLOC, the producer's USETMAXREG.DEALLOC): its K loop ("main": from the last
      mbarrier wait (SYNCS.PHASECHK) before the first GMMA to the first `WARPGROUP.DEPBAR.LE gsb0, 0x0`, the
      full-barrier waits included), what comes before it in a unit ("unit_start": ping-pong's wait for the
      other consumer's main loop, the tile's coordinates) and after it ("epilogue": scales, staging, stores,
      releases, up to the next unit);
    - "producer": the producer warpgroup's branch (the TMA thread, the scale-copy warp of SSC builds, idle warps);
    - "exit": the cluster barrier every warp waits at before exit (UCGABAR), wherever it lies.
    epilogue_share = epilogue / (unit_start + main + epilogue): the consumers' warp time outside their K loop
    that is spent on the output."""
    names = [t for _, t, _ in ins]
    alloc = next(i for i, t in enumerate(names) if "USETMAXREG.TRY_ALLOC" in t)
    dealloc = next(i for i, t in enumerate(names) if "USETMAXREG.DEALLOC" in t)
    first = next(i for i in range(alloc, dealloc) if "GMMA" in names[i])
    st = max(i for i in range(alloc, first) if "SYNCS.PHASECHK" in names[i])
    en = next(i for i in range(first, dealloc) if "WARPGROUP.DEPBAR.LE gsb0, 0x0" in names[i])
    cat = {"setup": 0, "unit_start": 0, "main": 0, "epilogue": 0, "producer": 0, "exit": 0}
    for i, (_, t, n) in enumerate(ins):
        k = ("exit" if "UCGABAR" in t else "setup" if i < alloc else "unit_start" if i < st else "main" if i <= en
             else "epilogue" if i < dealloc else "producer")
        cat[k] += n
    cons = cat["unit_start"] + cat["main"] + cat["epilogue"]
    return {**cat, "total": sum(cat.values()), "epilogue_share": cat["epilogue"] / cons if cons else None,
            "top_epilogue": sorted(((n, t) for i, (_, t, n) in enumerate(ins) if en < i < dealloc and "UCGABAR" not in t),
                                   reverse=True)[:3]}


def render(out: list[dict]) -> str:
    lines = ["| launch | us | DRAM MB | TB/s | heaviest kernel: DRAM %, SM %, tensor %, grid, regs, waves | top stalls (warps per issue) |",
             "|---|---|---|---|---|---|"]
    for o in out:
        if not o["kernels"]:
            continue
        k = max(o["kernels"], key=lambda x: x["t_us"] or 0)
        st = ", ".join(f"{n} {v:.2f}" for v, n in k["stalls_top"])
        f = lambda v, p=0: "-" if v is None else f"{v:.{p}f}"  # noqa: E731
        lines.append(f"| {o['label']} | {o['t_us']:.1f} | {o['dram_bytes'] / 1e6:.1f} | "
                     f"{o['dram_bytes'] / (o['t_us'] * 1e-6) / 1e12 if o['t_us'] else 0:.2f} | "
                     f"{k['name'][:40]}: {f(k['dram_pct'])}, {f(k['sm_pct'])}, {f(k['tensor_pct'])}, {f(k['grid'])}, "
                     f"{f(k['regs'])}, {f(k['waves'], 2)} | {st} |")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover - a device tool
    if len(sys.argv) >= 3 and sys.argv[1] == "--summarize":
        res = summarize(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
        print(render(res))
        if len(sys.argv) > 4:
            open(sys.argv[4], "w").write(json.dumps(res, indent=1))
    elif sys.argv[1:] == ["--round3"]:
        run(ROUND3)
    elif len(sys.argv) >= 3 and sys.argv[1] == "--regions":   # python3 ncu_where.py --regions where_src.csv.gz
        import gzip
        with (gzip.open if sys.argv[2].endswith(".gz") else open)(sys.argv[2], "rt") as fh:
            for name, ins in _source_blocks(fh.read()):
                if name.startswith("gemm_"):   # ws.cuh kernels (the library kernels lay their branches out otherwise)
                    r = regions(ins)
                    print(name, {k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items() if k != "top_epilogue"})
    elif sys.argv[1:] == ["--round5"]:
        run(ROUND5)
    elif sys.argv[1:] == ["--round8"]:
        run(ROUND8)
    elif sys.argv[1:] == ["--round8-prefill-dense"]:
        run(ROUND8_PREFILL_DENSE)
    elif sys.argv[1:] == ["--round7"]:
        run(ROUND7)
    elif sys.argv[1:] == ["--round7-next"]:
        run(ROUND7_NEXT)
    else:
        run(sys.argv[1:] or DEFAULT)
