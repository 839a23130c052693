"""The peak measurement of the GPU in hand (`roofline peaks measure`): the two ceilings of
METHOD.md.

- HBM: a device-to-device copy of large buffers (default 4 GiB each, far over L2), counting bytes
  read + written, timed with CUDA events after warm-up; median with p20/p80. `copy_benchmark` is
  the one copy benchmark: the ladder's bench (CuPy) times its ceiling with it too.
- Dense GEMM per dtype through the vendor library (torch -> cuBLAS): bf16, fp16, fp8 e4m3
  (torch._scaled_mm), tf32, fp32, on random data (never zeros: zeros run faster, METHOD.md), one
  event pair per product after warm-up; the dtypes are timed round-robin so that clock and thermal
  drift falls on all of them alike (the bf16-vs-fp16 check compares like with like).
- The SM clock seen while measuring: `nvidia-smi --query-gpu=clocks.sm` sampled in a thread
  (read-only; the card's clocks are never changed).

One call is one *run*. It writes the raw samples (`OUT.raw.json`, every shape's per-call times and
clock readings) and a peak table in the schema of peaks/h200.yaml: the device's
existing table (datasheet figures kept) with each `measured` block rebuilt as an ENVELOPE
(peaks/envelope.py): `{value, source, date, spread: {p20, p80}, sm_clock_mhz, envelope_of,
runs: [...]}`, value = the highest median over the shapes of this run, or with `--merge TABLE`
over the runs TABLE records and this one. `roofline peaks envelope RAW.raw.json... -o OUT` rebuilds
a table from raw runs alone. The table text and the checks are peaks/render.py.

Importable without torch (torch is imported inside `measure()`). The front end is the CLI's
`roofline peaks measure` (also `python3 -m roofline.commands.peaks_measure`): exit 2 with one line
when no GPU is visible (NoGPU).
"""
from __future__ import annotations

import datetime as _dt
import json
import statistics
import time
from pathlib import Path
from typing import Any

from roofline.peaks.gemm import gemm_flops
from roofline.io.errors import PeaksError, RooflineError
from roofline.peaks import envelope as pe, find_table
from roofline.peaks.envelope import build_envelope, quantiles
from roofline.peaks.render import checks, envelope_lines, envelope_text
from roofline.peaks.clocks import BurstClock, ClockSampler, _burst, assign_samples  # noqa: F401  (re-exported)

GEMM_DTYPES = ("bf16", "fp16", "fp8", "tf32", "fp32")
# large shapes: two cubes-ish and Llama-8B/70B-class serving GEMMs (prefill of 8k-16k tokens); the
# roof is the best median over them (one cube under-reads what cuBLAS sustains on the device)
DEFAULT_SHAPES = ((8192, 8192, 8192), (2048, 4096, 14336), (8192, 4096, 4096),
                  (16384, 4096, 14336), (16384, 14336, 4096), (8192, 28672, 4096))
DEFAULT_SHAPES_TEXT = ",".join("x".join(map(str, s)) for s in DEFAULT_SHAPES)
# operand layouts timed per shape: "nn" (a @ b) and "linear" (a @ w.t(), nn.Linear's form, which
# serving GEMMs run: cuBLAS "TN" kernels). cuBLAS picks different kernels for them; the ladder
# benches of 2026-11-29 read TN 8192^3 at 785-802 TFLOP/s where this command's "nn" runs of the same
# day never passed 779 in any sample: both are timed, side by side, and the envelope takes the best
LAYOUTS = ("nn", "linear")
# "burst": short bursts after an idle gap (what a prefill's GEMMs see); "sustained": long blocks
METHODS = ("burst", "sustained")
DEFAULT_HBM_GIB = 4.0               # copy buffer size
DEFAULT_ROUNDS = 5                  # round-robin rounds over the dtypes
DEFAULT_REPS = 20                   # timed products per dtype per round
DEFAULT_WARMUP = 10


class NoGPU(RooflineError, RuntimeError):
    """No CUDA GPU is usable here (one line saying why); the CLI exits 2 on it."""


def parse_shapes(text: str) -> list[tuple[int, int, int]]:
    """'MxNxK,MxNxK' -> [(M, N, K), ...]; ValueError unless every item is three positive integers."""
    out = []
    for item in text.split(","):
        if not item.strip():
            continue
        dims = tuple(int(v) for v in item.strip().lower().split("x"))
        if len(dims) != 3 or min(dims) <= 0:
            raise ValueError(item)
        out.append(dims)
    if not out:
        raise ValueError(text)
    return out


def gpu_unavailable_reason() -> str | None:
    """None when a CUDA GPU is usable through torch, else one line saying why not."""
    try:
        import torch  # noqa: F401
    except Exception as exc:  # pragma: no cover - depends on the machine
        return (f"torch is not importable here ({exc.__class__.__name__}): pip install 'roofline[gpu]' (it installs "
                "torch), on a machine with a CUDA GPU")
    import torch

    if not torch.cuda.is_available():
        return "no GPU: torch.cuda.is_available() is False; run it on a machine with a CUDA GPU"
    return None


# --------------------------------------------------------------------------------------------
# measurement (torch imported lazily)

def _time_events(torch, fn, reps: int) -> list[float]:
    """Per-call milliseconds from CUDA events; fn already warmed up."""
    out = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        out.append(s.elapsed_time(e))
    return out


def copy_benchmark(copy, nbytes: int, time_ms, reps: int) -> dict[str, Any]:
    """The HBM copy benchmark (the one both `peaks measure` and the ladder's bench time): `copy()`
    copies `nbytes` device to device, `time_ms(fn, reps)` returns per-call milliseconds from CUDA
    events (after the caller's warm-up). Bandwidth counts the bytes read + the bytes written.
    -> {bytes_per_copy: read + written, ms: per call, bytes_s: per call}."""
    ms = list(time_ms(copy, reps))
    moved = 2.0 * nbytes  # read + write
    return {"bytes_per_copy": moved, "ms": ms, "bytes_s": [moved / (t * 1e-3) for t in ms]}


def measure_hbm(torch, nbytes: int, warmup: int, reps: int, log=print) -> dict[str, Any]:
    n = nbytes // 2
    src = torch.randn(n, device="cuda", dtype=torch.float32).to(torch.bfloat16)  # random, not zeros
    dst = torch.empty_like(src)
    real_bytes = src.numel() * src.element_size()
    fn = lambda: dst.copy_(src)  # noqa: E731
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    with ClockSampler(period_s=0.05) as clk:
        res = copy_benchmark(fn, real_bytes, lambda f, r: _time_events(torch, f, r), reps)
    if not torch.equal(dst[:1024], src[:1024]) or not torch.equal(dst[-1024:], src[-1024:]):
        raise RuntimeError("HBM copy check failed: destination differs from source")
    del src, dst
    torch.cuda.empty_cache()
    q = quantiles(res["bytes_s"])
    log(f"hbm copy {real_bytes / 2**30:.1f} GiB x{reps}: median {q['median'] / 1e12:.3f} TB/s "
        f"(p20 {q['p20'] / 1e12:.3f}, p80 {q['p80'] / 1e12:.3f})")
    return {"bytes_per_copy": res["bytes_per_copy"], "ms": res["ms"], "q": q, "sm_clock_mhz": clk.summary()}


def _gemm_fn(torch, dtype: str, m: int, n: int, k: int, layout: str = "nn"):
    """A closure doing one m x n x k product of `dtype` on random data, and a correctness check.

    layout "nn": `a @ b`, b (k, n) row-major. layout "linear": `a @ w.t()`, w (n, k) row-major, the
    nn.Linear / F.linear form that serving GEMMs run (cuBLAS "TN": kernel names end in _TNT/_TNN).
    fp8 (`torch._scaled_mm`) exists in the linear form only (cuBLASLt fp8 wants B column-major)."""
    if layout not in LAYOUTS:
        raise ValueError(layout)
    g = torch.Generator(device="cuda").manual_seed(1234 + sum(map(ord, dtype)))

    def operands(td):
        a = torch.randn(m, k, device="cuda", generator=g).to(td)
        if layout == "linear":
            w = torch.randn(n, k, device="cuda", generator=g).to(td)
            return a, w.t()                      # a (k, n) view of the (n, k) weight: no copy
        return a, torch.randn(k, n, device="cuda", generator=g).to(td)

    if dtype in ("bf16", "fp16"):
        a, b = operands(torch.bfloat16 if dtype == "bf16" else torch.float16)
        fn = lambda: torch.matmul(a, b)  # noqa: E731
        tol = 2e-2
    elif dtype == "fp8":
        f8 = torch.float8_e4m3fn
        a = torch.randn(m, k, device="cuda", generator=g).to(f8)
        # _scaled_mm wants B column-major: make it (n, k) row-major and transpose
        b = torch.randn(n, k, device="cuda", generator=g).to(f8).t()
        one = torch.tensor(1.0, device="cuda")
        fn = lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)  # noqa: E731
        tol = 2e-2
    elif dtype in ("tf32", "fp32"):
        a, b = operands(torch.float32)
        prec = "high" if dtype == "tf32" else "highest"  # "high" lets cuBLAS use tf32

        def fn():
            torch.set_float32_matmul_precision(prec)
            return torch.matmul(a, b)

        tol = 3e-3 if dtype == "tf32" else 1e-4
    else:
        raise ValueError(dtype)
    ref = lambda: a[:64].double() @ b[:, :64].double()  # noqa: E731
    sl = lambda c: c[:64, :64]  # noqa: E731

    def check():
        c = sl(fn()).double()
        r = ref()
        err = (torch.linalg.norm(c - r) / torch.linalg.norm(r)).item()
        if not (err < tol):  # NaN fails too
            raise RuntimeError(f"{dtype} GEMM check failed: relative error {err:.3g} >= {tol}")
        return err

    return fn, check


def measure_gemms_burst(torch, dtypes, size, warmup: int, rounds: int, reps_per_round: int,
                        log=print, layout: str = "nn", cool_s: float = 0.25) -> dict[str, dict]:
    """The compute roof as short bursts reach it (the default method): per dtype `rounds` bursts of
    `reps_per_round` products after an idle gap, round-robin over the dtypes, the SM clock of every
    burst recorded. A long sustained block (`measure_gemms`) lets the card fall to its power-limited
    clock (1.5-1.8 GHz seen for fp8), below what the short GEMM bursts of a real prefill hold
    (~1.98 GHz), so the sustained figure under-reads the roof those kernels run against."""
    m, n, k = (size, size, size) if isinstance(size, int) else size
    flops = gemm_flops(m, n, k)
    fns, res = {}, {}
    clock = BurstClock()
    for d in dtypes:
        fn, check = _gemm_fn(torch, d, m, n, k, layout)
        err = check()
        for _ in range(warmup):
            fn()
        fns[d] = fn
        res[d] = {"ms": [], "rel_err": err, "clk": []}
    for _ in range(rounds):
        for d in dtypes:
            ms, mhz = _burst(torch, fns[d], reps_per_round, clock, cool_s)
            res[d]["ms"] += ms[1:] if len(ms) > 1 else ms   # the burst's first product re-warms
            if mhz is not None:
                res[d]["clk"].append(mhz)
    return _summarize(dtypes, res, flops, (m, n, k), layout, log, method="burst")


def _summarize(dtypes, res, flops, mnk, layout, log, method: str) -> dict[str, dict]:
    m, n, k = mnk
    out = {}
    for d in dtypes:
        rates = [flops / (t * 1e-3) for t in res[d]["ms"]]
        q = quantiles(rates)
        cs = res[d]["clk"]
        clk = ({"median": statistics.median(cs), "min": min(cs), "max": max(cs), "n": len(cs)} if cs else None)
        out[d] = {"q": q, "ms": res[d]["ms"], "rel_err": res[d]["rel_err"], "sm_clock_mhz": clk,
                  "shape": [m, n, k], "layout": "linear" if d == "fp8" else layout, "flops_per_call": flops,
                  "method": method}
        log(f"gemm {d:5s} {m}x{n}x{k} {layout:6s} {method:9s} x{len(rates)}: median {q['median'] / 1e12:7.1f} TFLOP/s "
            f"(p20 {q['p20'] / 1e12:.1f}, p80 {q['p80'] / 1e12:.1f}); rel err {res[d]['rel_err']:.2e}; "
            f"SM clock {clk['median'] if clk else '?'} MHz")
    return out


def measure_gemms(torch, dtypes, size, warmup: int, rounds: int, reps_per_round: int,
                  log=print, layout: str = "nn") -> dict[str, dict]:
    m, n, k = (size, size, size) if isinstance(size, int) else size
    flops = gemm_flops(m, n, k)
    fns, res = {}, {}
    prev_prec = torch.get_float32_matmul_precision()
    try:
        for d in dtypes:
            fn, check = _gemm_fn(torch, d, m, n, k, layout)
            err = check()
            for _ in range(warmup):
                fn()
            torch.cuda.synchronize()
            fns[d] = fn
            res[d] = {"ms": [], "rel_err": err, "clk": []}
        # round-robin so drift (clocks, heat) is shared by every dtype; one clock sampler over the
        # whole phase, its samples assigned to the dtype whose block was running at that moment
        windows: list[tuple[float, float, str]] = []
        with ClockSampler(period_s=0.05) as clk:
            for _ in range(rounds):
                for d in dtypes:
                    fns[d]()  # re-warm after the switch
                    torch.cuda.synchronize()
                    t0 = time.monotonic()
                    res[d]["ms"] += _time_events(torch, fns[d], reps_per_round)
                    windows.append((t0, time.monotonic(), d))
        for d, mhz in assign_samples(clk.stamped, windows):
            res[d]["clk"].append(mhz)
    finally:
        torch.set_float32_matmul_precision(prev_prec)
    return _summarize(dtypes, res, flops, (m, n, k), layout, log, method="sustained")


# --------------------------------------------------------------------------------------------
# one run: time, write the samples, fold into the envelope

def _tables_dir() -> Path:
    return Path(__file__).resolve().parent  # the built-in tables (not $ROOFLINE_PEAKS_DIR)


def _read_yaml(path: Path) -> dict:
    import yaml

    with open(path, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def _check_choices(dtypes, layouts) -> None:
    bad = [x for x in layouts if x not in LAYOUTS]
    if bad:
        raise PeaksError(f"layout {bad[0]!r}: expected one of {', '.join(LAYOUTS)}")
    bad = [x for x in dtypes if x not in GEMM_DTYPES]
    if bad:
        raise PeaksError(f"dtype {bad[0]!r}: expected one of {', '.join(GEMM_DTYPES)}")


def _time_shapes(torch, shapes, layouts, dtypes, *, warmup: int, rounds: int, reps: int, log,
                 method: str = "burst") -> dict[str, dict]:
    """shape key -> dtype -> timed GEMM, every shape in every layout."""
    by_shape: dict[str, dict] = {}
    for sh in shapes:
        for lay in layouts:
            # fp8 has the linear form only: timed once per shape (under "nn", its historical key)
            dts = [d for d in dtypes if not (d == "fp8" and lay != "nn")]
            if dts:
                timer = measure_gemms_burst if method == "burst" else measure_gemms
                g = timer(torch, dts, sh, warmup=warmup, rounds=rounds, reps_per_round=reps, log=log,
                                  layout=lay)
                by_shape[pe.shape_key(sh, lay)] = g
    return by_shape


def _best_per_dtype(by_shape: dict[str, dict], dtypes) -> dict[str, dict]:
    """Per dtype the shape with the highest median, with every shape's median beside it."""
    gemms = {}
    for d in dtypes:
        keyed = [(sk, g[d]) for sk, g in by_shape.items() if d in g]
        best_k, best = max(keyed, key=lambda kv: kv[1]["q"]["median"])
        gemms[d] = dict(best, shapes_tried={sk: r["q"]["median"] for sk, r in keyed})
    return gemms


def _env(torch, gpu_name: str, props, date: str, clk0, t0: float) -> dict:
    return {"gpu_name": gpu_name, "sms": props.multi_processor_count, "torch": torch.__version__,
            "cuda": str(torch.version.cuda), "cublas_note": "torch's bundled cuBLAS/cuBLASLt",
            "date": date, "idle_clocks_mhz": clk0 or {},
            "clocks_note": "sampled read-only with nvidia-smi while measuring; clocks never changed",
            "wall_s": round(time.time() - t0, 1)}


def _measure_raw(hbm_gib: float, size, dtypes, layouts, rounds: int, reps: int, warmup: int, log,
                 method: str = "burst") -> dict:
    """One run on the GPU in hand: {hbm, gemms, gemms_by_shape, env} (the raw.json)."""
    import torch

    gpu_name = torch.cuda.get_device_name(0)
    props = torch.cuda.get_device_properties(0)
    date = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d")
    clk0 = ClockSampler.query()
    log(f"device {gpu_name}, {props.multi_processor_count} SMs, torch {torch.__version__}, "
        f"idle clocks {clk0}")
    t0 = time.time()
    hbm = measure_hbm(torch, int(hbm_gib * 2**30), warmup=warmup, reps=max(20, rounds * reps), log=log)
    # The compute roof is the best the vendor library reaches: the highest median over a few large
    # shapes (one cube under-reads it: cuBLAS ran 740-810 TFLOP/s bf16 across shapes the same day).
    shapes = [(size, size, size)] if isinstance(size, int) else list(size)
    by_shape = _time_shapes(torch, shapes, layouts, dtypes, warmup=warmup, rounds=rounds, reps=reps, log=log,
                            method=method)
    return {"hbm": hbm, "gemms": _best_per_dtype(by_shape, dtypes), "gemms_by_shape": by_shape,
            "env": dict(_env(torch, gpu_name, props, date, clk0, t0), method=method)}


def _fold(raw: dict, out, label: str | None, merge) -> tuple[dict, str | Path | None, int]:
    """The envelope table of this run (or, with `merge`, of merge's runs and this one), the table
    it was based on, and the number of runs in it."""
    gpu_name = raw["env"]["gpu_name"]
    hit = find_table(gpu_name, _tables_dir())
    base_path, base = hit if hit is not None else (None, None)
    # the run's label: the file name it is written under (as `peaks envelope` names raw runs)
    label = label or (Path(out).stem if out else _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H%MZ"))
    runs = [pe.run_from_raw(json.loads(json.dumps(raw, default=str)), label,
                            str(Path(out).with_suffix(".raw.json")) if out else "")]
    if merge:
        try:
            mt = _read_yaml(Path(merge))
            runs = pe.merge_runs(pe.runs_of_table(mt), runs)
        except Exception as exc:  # noqa: BLE001 - the samples are on disk already; say why, one line
            raise PeaksError(f"--merge {merge}: {exc.__class__.__name__}: {exc}".splitlines()[0]) from exc
        base, base_path = mt, merge
    return build_envelope(base, gpu_name, runs), base_path, len(runs)


def measure(out: str | Path | None, *, hbm_gib: float = DEFAULT_HBM_GIB, size=DEFAULT_SHAPES, dtypes=GEMM_DTYPES,
            rounds: int = DEFAULT_ROUNDS, reps: int = DEFAULT_REPS, warmup: int = DEFAULT_WARMUP,
            merge: str | Path | None = None, layouts=LAYOUTS, label: str | None = None,
            log=print, method: str = "burst") -> tuple[dict, str]:
    """Measure the GPU in hand (one run); returns (table dict, YAML text) and writes it to `out` (and
    the raw samples beside it, `.raw.json`) if given. The table is the envelope of this run, or with
    `merge` (an existing envelope table) of its runs and this one. Raises NoGPU (one line) when no
    CUDA GPU is usable."""
    _check_choices(dtypes, layouts)
    why = gpu_unavailable_reason()
    if why:
        raise NoGPU(why)
    if method not in METHODS:
        raise PeaksError(f"method {method!r}: expected one of {', '.join(METHODS)}")
    raw = _measure_raw(hbm_gib, size, dtypes, layouts, rounds, reps, warmup, log, method)
    if out:  # the samples first: nothing measured is lost if the table step fails
        rawp = Path(out).with_suffix(".raw.json")
        rawp.parent.mkdir(parents=True, exist_ok=True)
        rawp.write_text(json.dumps(raw, indent=1, default=str), encoding="utf-8")
    table, base_path, n_runs = _fold(raw, out, label, merge)
    text = envelope_text(table)
    for line in envelope_lines(table):
        log(line)
    for ok, line in checks(table):
        log(f"check {'ok  ' if ok else 'FLAG'} {line}")
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text, encoding="utf-8")
        log(f"wrote {out} (raw samples: {rawp}); base table: {base_path}; {n_runs} run(s) in the envelope")
    return table, text
