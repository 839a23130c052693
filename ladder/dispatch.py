"""The ladder's dispatch: which level runs a GEMM shape.

Shape classes, the stopping rule of ladder/README.md (a more complex level is the default only where it
beats every simpler one beyond the isolated noise band), the table built from the ladder's own
bench results (`python -m roofline.rerun --build-dispatch BENCH.json ...`) and the lookup stage C
uses (roofline/stagec/rerun.py). The runtime table ships as package data:
roofline/data/ladder_dispatch_sm90a_bf16.json. Nothing here imports the analysis side.
"""
from __future__ import annotations

import json
import statistics
from importlib import resources

from .level import CONTRACT_TABLES

NOISE_BAND_ISOLATED = 0.034   # docs/method.md section 9: identical isolated reruns differ by up to ~3.4%
DECODE_SKINNY_MAX_M = 128
DECODE_WIDE_MAX_M = 256       # large decode batches / small prefill chunks: a few 128-row tiles
PREFILL_ALIGN = 128
SHAPE_CLASSES = ("decode-skinny", "decode-wide", "prefill", "ragged")
GROUPED_DECODE_MAX_ROWS = 64  # rows per hit expert up to which a grouped GEMM is a weight stream (decode)
GROUPED_CLASSES = ("grouped-decode", "grouped-prefill")
# one runtime table per contract (level.CONTRACT_TABLES; contracts.py the records), package data in roofline/data/
TABLE_FILES = {name: table for name, (_, table) in CONTRACT_TABLES.items()}


MID_MAX_M = 1024              # mid: batched decode / chunked prefill rows above decode-wide
MID_MAX_TILES = 2 * 132       # ... with fewer than two waves of 128x256 tiles on the H200's 132 SMs


def shape_class(M: int, N: int, K: int) -> str:
    """decode-skinny (M <= 128), decode-wide (128 < M <= 256: one or two 128-row tiles, so the
    tile count is set by N alone), mid (256 < M <= 1024 with fewer than two waves of 128x256
    tiles: wave quantization sets the time, ladder/notes/mid.md), prefill (every dim a multiple of
    128), else ragged."""
    if M <= DECODE_SKINNY_MAX_M:
        return "decode-skinny"
    if M <= DECODE_WIDE_MAX_M:
        return "decode-wide"
    if M <= MID_MAX_M and -(-M // 128) * -(-N // 256) < MID_MAX_TILES:
        return "mid"
    if M % PREFILL_ALIGN == 0 and N % PREFILL_ALIGN == 0 and K % 64 == 0:
        return "prefill"
    return "ragged"


def grouped_class(rows: int, experts_hit: float) -> str:
    """grouped-decode (at most GROUPED_DECODE_MAX_ROWS rows per hit expert: the weights are streamed
    once and the GEMM is memory-bound) or grouped-prefill."""
    return "grouped-decode" if rows <= GROUPED_DECODE_MAX_ROWS * max(experts_hit, 1.0) else "grouped-prefill"


def _pct(r: dict) -> float | None:
    """% of the library kernel: the dense bench's pct_cublas, or 100 x bench_moe_fp8's ratio_vs_lib."""
    if "pct_cublas" in r:
        return r["pct_cublas"]
    return 100.0 * r["ratio_vs_lib"] if "ratio_vs_lib" in r else None


def build_grouped_table(bench: dict, arch: str = "sm_90a", dtype: str = "bf16") -> dict:
    """From bench_moe_fp8's grouped rows (bench_moe.json): per grouped class, every level that passed its
    check, ranked by its median % of the library op (torch._grouped_mm; fp8: torch._scaled_grouped_mm)
    over the cases of the class (the stopping rule's order, dispatch_order). Rows of `dtype` with W
    [E, N, K] only (the layout every level takes)."""
    per: dict[tuple, list[float]] = {}
    for r in bench.get("rows", []):
        if r.get("level", 0) == 0 or not r.get("check_ok") or r.get("dtype") != dtype or r.get("layout") != "enk":
            continue
        per.setdefault((grouped_class(r["rows"], r["experts_hit"]), r["level"], _build(r)), []).append(_pct(r))
    classes = _class_rows(per)
    lib = "torch._scaled_grouped_mm" if dtype == "fp8" else "torch._grouped_mm"
    table = {"arch": arch, "dtype": dtype, "contract": f"grouped-{dtype}", "library": lib,
             "device": bench.get("meta", {}).get("device"), "source": bench.get("meta", {}).get("time_utc"),
             "classes": {c: dispatch_order(rows) for c, rows in classes.items()}}
    rows = [r for r in bench.get("rows", []) if r.get("level", 0) and r.get("check_ok") and r.get("dtype") == dtype
            and r.get("layout") == "enk" and _pct(r) is not None]
    cases = case_picks(table, rows, lambda r: grouped_case_key(r.get("E"), r["rows"], r.get("N"), r.get("K")),
                       lambda t, r: choose_grouped_level(t, r["rows"], r["experts_hit"], r.get("N"), r.get("K"), dtype, arch,
                                                         E=r.get("E"))[0])
    if cases:
        table["cases"] = cases
    return table


def build_dispatch_table(bench: dict, arch: str = "sm_90a", dtype: str = "bf16") -> dict:
    """From the ladder's own bench results (rows of `roofline ladder bench --out`): per shape class,
    every level that passed the check, ranked by its median % of cuBLAS over the benched shapes of
    that class, the first being the stopping rule's pick (`dispatch_order`). Returns a JSON-ready dict; `choose_level` takes the best level that supports the
    shape (single-tile levels only run tiny shapes)."""
    per: dict[tuple, list[float]] = {}
    for r in bench.get("rows", []):
        if r.get("level", 0) == 0 or not r.get("check_ok") or _pct(r) is None:
            continue
        per.setdefault((shape_class(r["m"], r["n"], r["k"]), r["level"], _build(r)), []).append(_pct(r))
    classes = {c: dispatch_order(rows) for c, rows in _class_rows(per).items()}
    table = {"arch": arch, "dtype": dtype, "contract": "gemm-fp8" if dtype == "fp8" else "gemm-bf16",
             "library": "torch._scaled_mm" if dtype == "fp8" else "cuBLAS (torch.mm)",
             "device": bench.get("meta", {}).get("device"), "source": bench.get("meta", {}).get("time_utc"),
             "classes": classes}
    rows = [r for r in bench.get("rows", []) if r.get("level", 0) and r.get("check_ok") and _pct(r) is not None]
    cases = case_picks(table, rows, lambda r: dense_case_key(r["m"], r["n"], r["k"]),
                       lambda t, r: choose_level(t, r["m"], r["n"], r["k"], dtype, arch)[0])
    if cases:
        table["cases"] = cases
    return table


# ---------------------------------------------------------------- per-case picks (round 8, round 8)
CASE_BAND = 0.03   # a benched case's pick is within 3 % of the best build measured in that case


def dense_case_key(m: int, n: int, k: int) -> str:
    return f"{m}x{n}x{k}"


def grouped_case_key(E: int | None, rows: int, N: int, K: int) -> str:
    return f"E{E}-R{rows}-N{N}-K{K}"


def _target_of_row(r: dict):
    b = _build(r)
    return b or r["level"]


def case_picks(table: dict, rows: list[dict], key, pick, band: float = CASE_BAND) -> dict:
    """Per benched case (key(row)) where the class's pick is not within `band` of the best build measured in
    that case (or was not measured there): the simplest build within `band` of the best (lowest level, a
    level's own build before its named builds), with the figures it was chosen on. pick(table, row) -> the
    target the table (its classes alone) launches for that row's case."""
    per: dict[str, list[dict]] = {}
    for r in rows:
        per.setdefault(key(r), []).append(r)
    out = {}
    for k, rs in sorted(per.items()):
        best = max(_pct(r) for r in rs)
        got = pick(table, rs[0])
        mine = [r for r in rs if _target_of_row(r) == got]
        if mine and _pct(mine[0]) >= best * (1.0 - band):
            continue
        near = [r for r in rs if _pct(r) >= best * (1.0 - band)]
        r = min(near, key=lambda r: (r["level"], _build(r) is not None, -_pct(r)))
        row = {"level": r["level"], "pct_library": round(_pct(r), 2), "best_pct_library": round(best, 2),
               "class_pick": got, "class_pick_pct": round(_pct(mine[0]), 2) if mine else None}
        if _build(r):
            row["build"] = _build(r)
        out[k] = row
    return out


def pick_errors(table: dict, rows: list[dict], key, pick, band: float = CASE_BAND) -> list[str]:
    """The benched cases whose pick (pick(table, row), the shipped lookup) is more than `band` below the best
    build measured in that case, or was not measured there: one line each (empty: every pick is within)."""
    per: dict[str, list[dict]] = {}
    for r in rows:
        per.setdefault(key(r), []).append(r)
    bad = []
    for k, rs in sorted(per.items()):
        best = max(rs, key=_pct)
        got = pick(table, rs[0])
        mine = [r for r in rs if _target_of_row(r) == got]
        if not mine or _pct(mine[0]) < _pct(best) * (1.0 - band):
            bad.append(f"{k}: picks {got} ({_pct(mine[0]):.1f} %)" if mine else f"{k}: picks {got} (not benched there)")
            bad[-1] += f", best {_target_of_row(best)} {_pct(best):.1f} % of the library"
    return bad


def _build(r: dict) -> str | None:
    """The named build (VARIANTS key) a bench row timed, None for the level's own build."""
    from .registry import build_of_row

    try:
        return build_of_row(r["level"], r.get("name", ""))
    except KeyError:
        return None


def _class_rows(per: dict) -> dict[str, list]:
    classes: dict[str, list] = {}
    for (cls, lvl, build), vals in per.items():
        row = {"level": lvl, "median_pct_cublas": statistics.median(vals), "shapes_benched": len(vals)}
        if build:
            row["build"] = build
        classes.setdefault(cls, []).append(row)
    return classes


def row_target(r: dict):
    """What a dispatch row launches: its named build, else its level id."""
    return r.get("build") or r["level"]


def dispatch_order(rows: list[dict], band: float = NOISE_BAND_ISOLATED) -> list[dict]:
    """The ladder's stopping rule (ladder/README.md) applied to one class's levels: a more complex (higher) level is
    the default only where it beats every simpler level by more than the isolated noise band.
    The first row is the LOWEST level whose median is within `band` of the best median; the
    rest follow by median. Every row says whether it is inside the band of the best."""
    rows = sorted(rows, key=lambda r: -r["median_pct_cublas"])
    if not rows:
        return rows
    # a build benched on fewer than half of the class's shapes is not its default (a median of one
    # shape says little: the mid benches timed their builds on one decode-wide shape only)
    most = max(r.get("shapes_benched", 1) for r in rows)
    rows = [r for r in rows if 2 * r.get("shapes_benched", 1) >= most] + \
        [r for r in rows if 2 * r.get("shapes_benched", 1) < most]
    best = rows[0]["median_pct_cublas"]
    for r in rows:
        r["within_noise_of_best"] = r["median_pct_cublas"] >= best * (1.0 - band)
    # a level's own build before its named builds, within the band (the simpler choice)
    first = min((r for r in rows if r["within_noise_of_best"] and 2 * r.get("shapes_benched", 1) >= most),
                key=lambda r: (r["level"], "build" in r))
    return [first] + [r for r in rows if r is not first]


def only_class(bench: dict, cls: str) -> dict:
    """The rows of one shape class of a bench (a bench made for one class, e.g. the mid-shape set,
    also timed a shape of a neighbouring class: it informs only its own class's table rows)."""
    return {**bench, "rows": [r for r in bench.get("rows", []) if "m" in r and shape_class(r["m"], r["n"], r["k"]) == cls]}


def merge_benches(benches: list[dict]) -> dict:
    """Several bench runs as one: a (level, build, shape) measured in several runs keeps the LATEST
    run's row (levels change between runs; the newest code is what a re-run would launch)."""
    rows: dict[tuple, dict] = {}
    for b in sorted(benches, key=lambda b: b.get("meta", {}).get("time_utc", "")):
        for r in b.get("rows", []):
            # a build of a level is its own row; grouped rows are keyed by their case (and dtype, layout)
            rows[(r.get("level"), r.get("name"), r.get("m"), r.get("n"), r.get("k"), r.get("case"), r.get("dtype"),
                  r.get("layout"))] = r
    newest = max(benches, key=lambda b: b.get("meta", {}).get("time_utc", ""))
    return {"meta": newest.get("meta", {}), "rows": list(rows.values())}


def default_dispatch_table(contract: str = "gemm-bf16") -> dict | None:
    """The shipped table of one contract (TABLE_FILES), or None."""
    p = resources.files("roofline") / "data" / TABLE_FILES.get(contract, "")
    return json.loads(p.read_text()) if contract in TABLE_FILES and p.is_file() else None


def table_contract(table: dict) -> str:
    """The contract a dispatch table is for (tables made before the field existed: bf16 dense)."""
    return table.get("contract") or ("gemm-fp8" if table.get("dtype") == "fp8" else "gemm-bf16")


def max_experts(target) -> int:
    """The most experts a grouped build's device plan holds (grouped.cuh: MAX_E for level 11's
    weight streaming, MAX_E_WS for the tile engine of levels 12 and 15: 512 each since round 6, when
    the tile engine's plan became a uint16 m-tile prefix; 384 before)."""
    from .registry import get_level

    return 512 if get_level(target).kind in ("grouped", "ws") else 0


def choose_grouped_level(table: dict | None, rows: int, experts_hit: float, N: int, K: int, dtype: str,
                         arch: str = "sm_90a", E: int | None = None) -> tuple[int | None, str]:
    """-> (level id or None, why) for a grouped GEMM of `rows` token-expert rows over the experts hit
    (E: the layer's experts; a build whose plan holds fewer is passed over)."""
    if table is None:
        return None, "no grouped dispatch table (python -m roofline.rerun --build-grouped-dispatch BENCH_MOE.json OUT)"
    if dtype != table.get("dtype"):
        return None, f"grouped dtype {dtype} is not dispatched (the grouped table is {table.get('dtype')})"
    if arch != table.get("arch"):
        return None, f"the ladder kernels need {table.get('arch')}; this device is {arch}"
    cls = grouped_class(rows, experts_hit)
    hit = table.get("cases", {}).get(grouped_case_key(E, rows, N, K))
    if hit is not None:
        return row_target(hit), (f"{cls}: {_what(hit)} measured best (within {CASE_BAND:.0%}) on this case: "
                                 f"{hit['pct_library']:.0f}% of {table.get('library', 'the library')}")
    rs = table["classes"].get(cls)
    if not rs:   # a decode kernel is no prefill kernel: a class never benched is not dispatched
        return None, f"{cls}: never benched for grouped {dtype} (the table has {', '.join(table['classes']) or 'no class'})"
    fit = [r for r in rs if E is None or E <= max_experts(row_target(r))]
    if not fit:
        return None, f"{cls}: no benched grouped {dtype} build holds {E} experts (at most {max_experts(row_target(rs[0]))})"
    r = fit[0]
    return row_target(r), (f"{cls}: {_what(r)} had the best median {r['median_pct_cublas']:.0f}% of "
                           f"{table.get('library', 'the library')} over {r['shapes_benched']} benched case(s)"
                           + ("" if r is rs[0] else f" among the builds that hold {E} experts"))


def _what(r: dict) -> str:
    return f"level {r['level']}" + (f" (build {r['build']})" if r.get("build") else "")


def _supports(target, M: int, N: int, K: int) -> bool:
    try:
        from .registry import get_level

        return get_level(target).supports(M, N, K)
    except KeyError:
        return False


def choose_level(table: dict | None, M: int, N: int, K: int, dtype: str, arch: str = "sm_90a"
                 ) -> tuple[int | None, str]:
    """-> (level id or None, why). The best-measured level of the shape's class that supports the
    shape; if the class was never benched, the best level over all classes that supports it."""
    if table is None:
        return None, "no dispatch table (run `roofline ladder bench --out bench.json` on the device)"
    if dtype != table.get("dtype"):
        return None, f"dtype {dtype} is not supported by the ladder ({table.get('dtype')} only)"
    if arch != table.get("arch"):
        return None, (f"the ladder kernels need {table.get('arch')}; this device is {arch} "
                      "(no portable level in the ladder yet)")
    cls = shape_class(M, N, K)
    hit = table.get("cases", {}).get(dense_case_key(M, N, K))
    if hit is not None and _supports(row_target(hit), M, N, K):
        return row_target(hit), (f"{cls}: {_what(hit)} measured best (within {CASE_BAND:.0%}) on this shape: "
                                 f"{hit['pct_library']:.0f}% of {table.get('library', 'the library')}")
    rows = [r for r in table["classes"].get(cls, []) if _supports(row_target(r), M, N, K)]
    if rows:
        r = rows[0]
        return row_target(r), (f"{cls}: {_what(r)} had the best median {r['median_pct_cublas']:.0f}% of "
                               f"cuBLAS over {r['shapes_benched']} benched {cls} shape(s)")
    allrows = sorted((r for rs in table["classes"].values() for r in rs if _supports(row_target(r), M, N, K)),
                     key=lambda r: -r["median_pct_cublas"])
    if allrows:
        r = allrows[0]
        return row_target(r), (f"{cls}: never benched; {_what(r)} is the best-measured level that "
                               "supports this shape")
    return None, f"no ladder level supports {M}x{N}x{K}"
