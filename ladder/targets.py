"""The targets of levels 11-15 and the mid shapes, read from stored bench results (the table in
ladder/README.md is this module's output; tests/test_ladder_targets.py regenerates and compares):

    python3 -m roofline.ladder.targets BENCH.json [BENCH.json ...]

Inputs: bench_moe_fp8's grouped rows (bench_moe.json: `case`, `ratio_vs_lib`, `pct_hbm_peak`), its fp8
rows (bench_fp8_*.json, one file per machine start: `m n k`, `ratio_vs_lib`) and the dense bench's
mid-shape rows (bench_mid.json: `pct_cublas`). Per case the best CHECKED kernel (level or variant)
is shown with its p20-p80 range; a target is met only where the stated figure is."""
from __future__ import annotations

import sys
from pathlib import Path

from .bench import geomean

DECODE_ROOF_PCT = 80.0      # grouped decode, bf16 and fp8: % of the HBM roof (peaks table)
DECODE_X = 1.25             # grouped bf16 decode: x torch._grouped_mm
PREFILL_X = 1.15            # grouped prefill: x torch._grouped_mm
FP8_PREFILL_X = 2.5         # grouped fp8 prefill (round 5): x torch._scaled_grouped_mm
FP8_SQUARE_X = 1.00         # fp8 8192^3: x torch._scaled_mm, every machine start
FP8_SERVING_GEOMEAN = 1.00  # fp8 serving shapes: geomean of what the fp8 table dispatches (round 5; was 0.90)
MID_X = 0.90                # bf16 mid shapes: x cuBLAS
MID_NAMED = ((200, 6144, 4096), (1000, 3000, 7000), (512, 4096, 4096), (777, 1531, 263))


def _load(paths) -> list[dict]:
    from roofline.io.safeio import load_json   # bounded (size, depth, special files)

    return [load_json(p) for p in paths]


def _best(rows):
    ok = [r for r in rows if r.get("level") and r.get("check_ok", True) and "ratio_vs_lib" in r]
    return max(ok, key=lambda r: r["ratio_vs_lib"]) if ok else None


def _fmt(r) -> str:
    lo, hi = r.get("ratio_range", [r["ratio_vs_lib"]] * 2)
    return f"{r['ratio_vs_lib']:.3f} ({lo:.3f}-{hi:.3f})"


def _yes(ok: bool) -> str:
    return "met" if ok else "NOT met"


def _latest(benches: list[dict], key) -> dict:
    """key(row) -> the rows of the LATEST bench (meta.time_utc) that has that key: each case is read
    from one run, the library op beside it in the same process."""
    out: dict = {}
    for b in sorted(benches, key=lambda b: b.get("meta", {}).get("time_utc", "")):
        mine: dict = {}
        for r in b.get("rows", []):
            mine.setdefault(key(r), []).append(r)
        out.update(mine)
    return out


def grouped_rows(benches: list[dict]) -> list[str]:
    out = []
    by = _latest(benches, lambda r: (r.get("case"), r.get("dtype")))
    cases = dict.fromkeys(r["case"] for b in benches for r in b["rows"] if "case" in r)
    for case in cases:
        for dtype in ("bf16", "fp8"):
            rows = by.get((case, dtype), [])
            b = _best(rows)
            if b is None:
                continue
            if "decode" in case:
                roof = b.get("pct_hbm_peak") or 0.0
                want = [roof >= DECODE_ROOF_PCT] + ([b["ratio_vs_lib"] >= DECODE_X] if dtype == "bf16" else [])
                what = (f">= {DECODE_ROOF_PCT:.0f} % of the HBM roof" + (f", >= {DECODE_X}x" if dtype == "bf16" else ""))
                fig = f"{_fmt(b)}, {roof:.1f} % of the roof"
            elif dtype == "fp8":
                lib = next(r for r in rows if r.get("level") == 0)
                roof = roof_ceiling(b, lib)
                want, what = [b["ratio_vs_lib"] >= FP8_PREFILL_X], f">= {FP8_PREFILL_X}x"
                fig = f"{_fmt(b)}, {b['tflops']:.0f} TFLOP/s" + (
                    f", {roof['pct_fp8_roof']:.0f} % of the fp8 roof; the roofs allow <= {roof['max_x']:.2f}x" if roof else "")
            else:
                want, what, fig = [b["ratio_vs_lib"] >= PREFILL_X], f">= {PREFILL_X}x", f"{_fmt(b)}, {b['tflops']:.0f} TFLOP/s"
            lib = next(r for r in rows if r.get("level") == 0)
            out.append(f"| {case} {dtype} | {b['level']} `{b['name']}` | {fig} | {lib['name']} | {what} | {_yes(all(want))} |")
    return out


def roof_ceiling(row: dict, lib: dict, device: str = "NVIDIA H200") -> dict | None:
    """The most any kernel can gain over the library on this case: the library's median over the
    floor max(useful FLOPs / fp8 peak, fewest bytes / HBM peak) (the peaks table's measured fp8
    envelope and datasheet bandwidth). Also the row's useful FLOP rate as % of the fp8 peak."""
    from roofline import peaks
    from roofline.io.errors import PeaksError

    try:
        p = peaks.resolve(gpu_name=device, gfx=None)
    except PeaksError:
        return None
    fl, bw = p.flops.get("fp8"), p.hbm_bw_bytes_s
    if not (fl and bw):
        return None
    from roofline.peaks.roof import roofline_bound_s

    floor_s = roofline_bound_s(row["flops"], row["bytes_min"], fl, bw)
    return {"floor_us": floor_s * 1e6, "max_x": lib["t_ms_median"] * 1e-3 / floor_s,
            "pct_fp8_roof": 100.0 * row["flops"] / (row["t_ms_median"] * 1e-3) / fl}


def fp8_rows(benches: list[dict]) -> list[str]:
    """One row per machine start (the benches of the square-8192 set), then the serving set."""
    out, starts = [], []
    for b in (b for b in benches if b.get("meta", {}).get("shape_set") == "square-8192"):
        sq = [r for r in b["rows"] if (r.get("m"), r.get("n"), r.get("k")) == (8192, 8192, 8192)]
        best = _best(sq)
        if best is not None:
            starts.append((b.get("meta", {}).get("time_utc", "?"), best))
    for t, best in sorted(starts, key=lambda x: x[0]):
        out.append(f"| fp8 8192^3, start {t} | {best['level']} `{best['name']}` | {_fmt(best)} | torch._scaled_mm | "
                   f">= {FP8_SQUARE_X:.2f}x | {_yes(best['ratio_vs_lib'] >= FP8_SQUARE_X)} |")
    if starts:
        n_ok = sum(b["ratio_vs_lib"] >= FP8_SQUARE_X for _, b in starts)
        out.append(f"| fp8 8192^3, all starts | - | {n_ok} of {len(starts)} starts >= {FP8_SQUARE_X:.2f}x | "
                   f"torch._scaled_mm | 3 starts | {_yes(n_ok >= 3 and n_ok == len(starts))} |")
    serving = max(benches, key=lambda b: len(b["rows"]))
    per = {}
    for r in serving["rows"]:
        if r.get("level") and r.get("check_ok", True) and "ratio_vs_lib" in r:
            k = (r["m"], r["n"], r["k"])
            per[k] = max(per.get(k, 0.0), r["ratio_vs_lib"])
    ran = _dispatched(serving)
    if len(ran) > 1:
        g = geomean(ran)
        out.append(f"| fp8 serving, what the fp8 table dispatches | - | geomean {g:.3f} over {len(ran)} shapes | "
                   f"torch._scaled_mm | >= {FP8_SERVING_GEOMEAN:.2f}x geomean, the dispatched kernel | "
                   f"{_yes(g >= FP8_SERVING_GEOMEAN)} |")
    if len(per) > 1:   # what the builds could give if the table picked per shape: shown, not the target
        out.append(f"| fp8 serving, best level per shape (not the target) | - | geomean {geomean(per.values()):.3f} over "
                   f"{len(per)} shapes | torch._scaled_mm | - | - |")
    return out


def _dispatched(bench: dict) -> list[float]:
    """Per shape, the ratio of the build the shipped fp8 table launches for it (dispatch.choose_level: a per-case
    pick of round 8, else the class's first row); shapes where that build was not timed are left out."""
    from .dispatch import choose_level, default_dispatch_table
    from .registry import build_of_row

    t = default_dispatch_table("gemm-fp8") or {"classes": {}}
    seen, out = set(), []
    for r in bench["rows"]:
        key = (r.get("m"), r.get("n"), r.get("k"))
        if not r.get("level") or key in seen or "ratio_vs_lib" not in r or not r.get("check_ok", True):
            continue
        try:
            this = build_of_row(r["level"], r["name"]) or r["level"]
        except KeyError:
            continue
        if choose_level(t, *key, "fp8")[0] == this:
            seen.add(key)
            out.append(r["ratio_vs_lib"])
    return out


def mid_rows(benches: list[dict]) -> list[str]:
    out = []
    by = _latest(benches, lambda r: (r["m"], r["n"], r["k"]))
    shapes = dict.fromkeys((r["m"], r["n"], r["k"]) for b in benches for r in b["rows"])
    for s in shapes:
        rows = [r for r in by[s] if r.get("level") and r.get("check_ok", True) and "pct_cublas" in r]
        if not rows:
            continue
        b = max(rows, key=lambda r: r["pct_cublas"])
        x = b["pct_cublas"] / 100.0
        named = s in MID_NAMED
        tag = "" if named else " (held out)"
        out.append(f"| bf16 {s[0]}x{s[1]}x{s[2]}{tag} | {b['level']} `{b['name']}` | {x:.3f} | cuBLAS | "
                   f">= {MID_X}x | {_yes(x >= MID_X) if named else ('holds' if x >= MID_X else 'below')} |")
    return out


def render(paths) -> str:
    benches = _load(paths)
    lines = ["| target case | best checked kernel | x library (p20-p80), figure | library | target | |",
             "|---|---|---|---|---|---|"]
    moe = [b for b in benches if any("case" in r for r in b.get("rows", []))]
    fp8 = [b for b in benches if any(r.get("dtype") == "fp8" and "m" in r for r in b.get("rows", []))]
    mid = [b for b in benches if any("pct_cublas" in r for r in b.get("rows", []))]
    if moe:
        lines += grouped_rows(moe)
    if fp8:
        lines += fp8_rows(fp8)
    if mid:
        lines += mid_rows(mid)
    return "\n".join(lines)




# ---------------------------------------------------------------- round 8 (round 8): the held-out-like benches
R8_FP8_DECODE_PCT = 80.0     # fp8 grouped decode, 64+ tokens: % of the HBM peak (peaks table of the bench's device)
R8_BF16_DECODE_PCT = 85.0    # bf16 grouped decode, 64+ tokens
R8_BF16_D16_PCT, R8_BF16_D16_X = 65.0, 1.3   # bf16 grouped decode at 16 tokens: % HBM and x torch._grouped_mm
R8_FP8_PREFILL_X = 1.3       # fp8 grouped prefill, 2048+ tokens: x torch._scaled_grouped_mm
R8_BF16_PREFILL_X = 1.15     # bf16 grouped prefill, every case
R8_FP8_DENSE_GEOMEAN = 1.0   # fp8 dense serving shapes: geomean of what the shipped fp8 table dispatches


def _dispatched_row(rows: list[dict], dtype: str):
    """The row of the build the shipped grouped table launches for this case (None if not benched there)."""
    from .dispatch import _build, choose_grouped_level, default_dispatch_table

    r0 = rows[0]
    got = choose_grouped_level(default_dispatch_table(f"grouped-{dtype}"), r0["rows"], r0["experts_hit"], r0["N"], r0["K"],
                               dtype, E=r0["E"])[0]
    return next((r for r in rows if (_build(r) or r["level"]) == got), None)


def _r8_grouped(benches: list[dict]) -> tuple[list[str], dict]:
    out, verdict = [], {}
    by = _latest(benches, lambda r: (r.get("case"), r.get("dtype")))
    for (case, dtype), rows in by.items():
        ok = [r for r in rows if r.get("level") and r.get("check_ok") and "ratio_vs_lib" in r]
        if not ok:
            continue
        lib = next(r for r in rows if r.get("level") == 0)
        d = _dispatched_row(ok, dtype) or _best(ok)
        tokens, pct = d["tokens"], d.get("pct_hbm_peak") or 0.0
        if "decode" in case:
            if dtype == "fp8":
                tgt, met = f">= {R8_FP8_DECODE_PCT:.0f} % HBM", pct >= R8_FP8_DECODE_PCT
                key = "fp8 grouped decode, 64+ tokens"
            elif tokens >= 64:
                tgt, met = f">= {R8_BF16_DECODE_PCT:.0f} % HBM", pct >= R8_BF16_DECODE_PCT
                key = "bf16 grouped decode, 64+ tokens"
            else:
                tgt = f">= {R8_BF16_D16_PCT:.0f} % HBM and >= {R8_BF16_D16_X}x"
                met, key = pct >= R8_BF16_D16_PCT and d["ratio_vs_lib"] >= R8_BF16_D16_X, "bf16 grouped decode, 16 tokens"
            if dtype == "fp8" and tokens < 64:
                continue   # the fp8 decode target is set at 64+ tokens
        elif dtype == "fp8":
            tgt, met, key = f">= {R8_FP8_PREFILL_X}x", d["ratio_vs_lib"] >= R8_FP8_PREFILL_X, "fp8 grouped prefill, 2048+ tokens"
        else:
            tgt, met, key = f">= {R8_BF16_PREFILL_X}x", d["ratio_vs_lib"] >= R8_BF16_PREFILL_X, "bf16 grouped prefill"
        verdict.setdefault(key, []).append(met)
        dev = d.get("device") or "?"
        out.append(f"| {case} {dtype} | {d['level']} `{d['name']}` | {_fmt(d)}, {pct:.1f} % HBM | {lib['name']} | {tgt} | "
                   f"{_yes(met)} |")
    return out, verdict


def _r8_fp8_dense(benches: list[dict]) -> list[str]:
    from .dispatch import _build, choose_level, default_dispatch_table

    t = default_dispatch_table("gemm-fp8")
    by = _latest(benches, lambda r: (r.get("m"), r.get("n"), r.get("k")))
    ran, best, out = [], [], []
    for (m, n, k), rows in by.items():
        ok = [r for r in rows if r.get("level") and r.get("check_ok", True) and "ratio_vs_lib" in r]
        if not ok:
            continue
        got = choose_level(t, m, n, k, "fp8")[0]
        d = next((r for r in ok if (_build(r) or r["level"]) == got), None)
        if d is None:
            continue
        ran.append(d["ratio_vs_lib"])
        best.append(_best(ok)["ratio_vs_lib"])
        out.append(f"| fp8 {m}x{n}x{k} | {d['level']} `{d['name']}` | {_fmt(d)} | torch._scaled_mm | (geomean below) | - |")
    if ran:
        g = geomean(ran)
        out.append(f"| fp8 serving (held-out set), what the fp8 table dispatches | - | geomean {g:.3f} over {len(ran)} shapes "
                   f"(best build per shape: {geomean(best):.3f}) | torch._scaled_mm | >= {R8_FP8_DENSE_GEOMEAN:.1f}x geomean | "
                   f"{_yes(g >= R8_FP8_DENSE_GEOMEAN)} |")
    return out


def render_round8(paths) -> str:
    """Round 8's targets on the round-8 benches: per case the build the SHIPPED table dispatches (a per-case pick,
    else its class's), its ratio to the library (p20-p80) and % of the HBM peak of the bench's device; then one
    verdict per target (met only where every case meets it)."""
    benches = _load(paths)
    devs = sorted({b.get("meta", {}).get("device", "?") for b in benches})
    lines = [f"Device: {', '.join(devs)}.", "",
             "| target case | dispatched build | x library (p20-p80), figure | library | target | |",
             "|---|---|---|---|---|---|"]
    moe = [b for b in benches if any("case" in r for r in b.get("rows", []))]
    rows, verdict = _r8_grouped(moe)
    lines += rows
    lines += _r8_fp8_dense([b for b in benches if any("m" in r for r in b.get("rows", []))])
    for key, v in verdict.items():
        lines.append(f"| **{key}** | - | {sum(v)} of {len(v)} cases | - | every case | {_yes(all(v))} |")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover - a report
    if len(sys.argv) < 2:
        sys.exit("usage: python3 -m roofline.ladder.targets [--round8] BENCH.json [BENCH.json ...]")
    print(render_round8(sys.argv[2:]) if sys.argv[1] == "--round8" else render(sys.argv[1:]))
