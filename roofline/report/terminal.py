"""What `roofline analyze` prints: the answer a person acts on, in at most TERMINAL_COLUMNS columns.

The narrow table (render): one row per head kernel, ordered by the larger of the tuning gain and the
avoidable gain (ranking_by_larger_gain), nine columns (kernel, regime / op, % GPU, bound, roofline,
verdict, gain, avoidable, fix); the first row's fix in one line with its evidence under the table; a
host-bound step's cause ABOVE the table when it outweighs every kernel's gain in that step. `--wide`
prints roofline.report.artifact.render_table (every column). Pure: artifact in, text out."""
from __future__ import annotations

import textwrap

from roofline.io.values import UNKNOWN

TERMINAL_COLUMNS = 120
SEP = "  "
HEADERS = ["#", "kernel", "regime / op", "% GPU", "bound", "roof", "verdict", "gain", "avoidable", "fix"]
KERNEL_MIN, OP_MIN = 16, 10     # the name columns give way (op, kernel, then the fix) before the figures
FIX_MAX = 14                    # the fix column: a word or two (the lever itself is the line under the table)
SHAPES_SHOWN = 3                # shape rows under an entry (the rest: one "N more" row; every one in --wide)

# the route in two words, for the fix column of a row without a lever (roofline.core.routing.ROUTES)
ROUTE_WORDS = {
    "kernel_track_top": "tune kernel", "kernel_track_latency": "occupancy/fuse",
    "kernel_track_moderate": "tune kernel", "byte_reduction": "fewer bytes", "fewer_bytes_or_fusion": "fewer bytes",
    "fewer_flops": "fewer FLOPs", "fusion_or_graph": "fuse or graph", "host_side": "call site",
    "low_priority": "low priority", "pct_fallback": "no verdict",
}


# a lever's kind in a word or two, for the fix column (the lever's text and evidence: profile_roofline.md)
LEVER_WORDS = {
    "fusion": "fuse", "lower_precision_weights": "fp8 weights", "fp8_math": "fp8 GEMM", "lower_precision_kv": "fp8 KV cache",
    "materialised_broadcast": "no broadcast", "reference_path": "fused kernel", "cache_append": "static cache",
    "stop_reading_experts": "skip experts", "materialised_scores": "fused attn", "cache_window": "window cache",
    "kv_heads_broadcast": "no KV repeat",
}


def _wrap(text: str, lines: int = 3, indent: str = "  ") -> list[str]:
    return textwrap.wrap(text, TERMINAL_COLUMNS, subsequent_indent=indent, break_on_hyphens=False,
                         max_lines=lines, placeholder=" ~")


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def _gain(x) -> str:
    """A gain in % GPU; None (unknown: no verdict, or necessity unknown) is '-', never +0.00%."""
    return "-" if x is None else f"+{x:.2f}%"


def top_lever(e: dict) -> dict | None:
    """The entry's lever that saves the most (a lever with a figure before one without)."""
    levers = [d for d in e.get("levers_detail") or [] if isinstance(d, dict) and d.get("kind")]
    if not levers:
        return None
    return max(levers, key=lambda d: (d.get("saves_pct") is not None, d.get("saves_pct") or 0.0))


def fix_word(e: dict) -> str:
    lv = top_lever(e)
    if lv is not None:     # a lever of several kinds ("a+b"): the first kind's word, "+"
        first, _, more = lv["kind"].partition("+")
        return LEVER_WORDS.get(first, first.replace("_", " ")) + ("+" if more else "")
    return ROUTE_WORDS.get(e.get("route") or "", e.get("route") or "-")


def _roof_cell(x: dict, marks: set) -> str:
    """The roofline %, marked where it is no plain reading: '*' suspect (over the roof beyond its spread:
    the model is wrong, no verdict), '^' over 100% inside the compute roof's measured spread (at the wall)."""
    cell = _pct(x.get("roofline_pct"))
    mark = "*" if x.get("suspect") or x.get("over_roof") else (
        "^" if x.get("at_compute_wall") or (x.get("roofline_pct") or 0.0) > 1.0 else "")
    if mark:
        marks.add(mark)
    return cell + mark


def ordered(art: dict) -> list[dict]:
    """The entries in ranking_by_larger_gain's order (a name shared by several entries: occurrence by
    occurrence); entries the ranking lacks (an older artifact) follow by % GPU."""
    from roofline.core.analysis import larger_gain_key

    pool = sorted(art.get("entries") or [], key=lambda e: (not larger_gain_key(e)[1], -larger_gain_key(e)[0],
                                                             -e["pct_gpu_time"]))
    out = []
    for n in art.get("ranking_by_larger_gain") or []:
        hit = next((e for e in pool if e["name"] == n), None)
        if hit is not None:
            pool.remove(hit)
            out.append(hit)
    return out + pool


def _row(num: str, label: str, op: str, x: dict, marks: set, e: dict) -> list[str]:
    pct = x.get("regime_pct_gpu_time") if num == "" else x.get("pct_gpu_time")
    return [num, label, op, "-" if pct is None else f"{pct:.2f}", x.get("bound_type", UNKNOWN),
            _roof_cell(x, marks), x.get("headroom_class", UNKNOWN), _gain(x.get("expected_e2e_gain_pct")),
            _gain(x.get("avoidable_gain_pct")), fix_word(x if x.get("route") else e)]


def _shape_rows(x: dict, marks: set) -> list[list[str]]:
    """Shape rows (label, share, bound, roofline) of a multi-shape entry: the biggest SHAPES_SHOWN."""
    from roofline.report.artifact import _shape_label

    per = [r for r in x.get("per_shape") or [] if isinstance(r.get("t_ms"), (int, float))]
    if not per:
        return []
    tot = sum((r.get("launches") or 0) * r["t_ms"] for r in per)
    base = x.get("regime_pct_gpu_time", x.get("pct_gpu_time")) or 0.0
    keys = {k for r in per for k in r["shape"]}
    differ = {k for k in keys if len({repr(r["shape"].get(k)) for r in per}) > 1}
    order = sorted(per, key=lambda r: -((r.get("launches") or 0) * r["t_ms"]))
    shown, rest = (order, []) if len(order) <= SHAPES_SHOWN + 1 else (order[:SHAPES_SHOWN], order[SHAPES_SHOWN:])
    rows = []
    for r in shown:
        n = r.get("launches")
        share = base * n * r["t_ms"] / tot if (n and tot) else None
        rows.append(["", f"  - {_shape_label(r['shape'], differ)} x{n if n is not None else '?'} "
                         f"{r['t_ms'] * 1e3:.1f}us", "", "-" if share is None else f"{share:.2f}",
                     r.get("bound_type") or r.get("roof_axis", "-"), _roof_cell(r, marks), "", "", "", ""])
    if rest:
        share = sum(base * (r.get("launches") or 0) * r["t_ms"] / tot for r in rest) if tot else None
        rest_mark = "*" if any(r.get("over_roof") for r in rest) else (
            "^" if any(r.get("at_compute_wall") for r in rest) else "")
        if rest_mark:
            marks.add(rest_mark)
        rows.append(["", f"  - {len(rest)} more shapes (--wide)", "", "-" if share is None else f"{share:.2f}",
                     _one_or_mixed({r.get("bound_type") or r.get("roof_axis", "-") for r in rest}),
                     rest_mark, "", "", "", ""])
    return rows


def _one_or_mixed(bounds: set) -> str:
    return next(iter(bounds)) if len(bounds) == 1 else "mixed"


def rows(art: dict, marks: set) -> list[tuple[bool, list[str]]]:
    """(is an entry's own row, cells) in display order: each entry, its other regimes, its shapes."""
    from roofline.report.extra import op_cell

    out: list[tuple[bool, list[str]]] = []
    for i, e in enumerate(ordered(art), 1):
        out.append((True, _row(str(i), e.get("short_name") or e["name"], op_cell(e), e, marks, e)))
        out += [(False, r) for r in _shape_rows(e, marks)]
        for v in (e.get("regime_verdicts") or [])[1:]:
            out.append((False, _row("", f"  [{v.get('regime')}]", "", v, marks, e)))
            out += [(False, r[:1] + ["  " + r[1]] + r[2:]) for r in _shape_rows(v, marks)]
    return out


def _fit(cells: list[list[str]], width: int) -> list[int]:
    """Column widths within `width`: the kernel and op columns give way (names cut with '~')."""
    w = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(HEADERS)]
    over = sum(w) + len(SEP) * (len(w) - 1) - width
    w[9] = min(w[9], FIX_MAX)
    for col, floor in ((2, 14), (1, 24), (2, OP_MIN), (1, KERNEL_MIN), (9, 8)):
        if over <= 0:
            break
        cut = min(over, max(0, w[col] - floor))
        w[col] -= cut
        over -= cut
    return w


def _cut(s: str, n: int) -> str:
    return s if len(s) <= n else s[:max(0, n - 1)] + "~"


def table_lines(art: dict, width: int = TERMINAL_COLUMNS) -> list[str]:
    marks: set = set()
    rs = rows(art, marks)
    w = _fit([r if own else ["", "", ""] + r[3:] for own, r in rs], width)   # a sub-row's label spans two columns
    out = [SEP.join(h.ljust(n) for h, n in zip(HEADERS, w)).rstrip(),
           SEP.join("-" * n for n in w)]
    for own, r in rs:
        if own:
            cells = [_cut(c, n) for c, n in zip(r, w)]
        else:   # a sub-row's label may run on into the empty op column
            lab = _cut(r[1], w[1] + len(SEP) + w[2])
            cells = [r[0], lab.ljust(w[1] + len(SEP) + w[2])] + [_cut(c, n) for c, n in zip(r[3:], w[3:])]
            out.append((r[0].ljust(w[0]) + SEP + SEP.join(c.ljust(n) for c, n in
                                                          zip(cells[1:], [w[1] + len(SEP) + w[2]] + w[3:]))).rstrip())
            continue
        out.append(SEP.join(c.ljust(n) for c, n in zip(cells, w)).rstrip())
    if not rs:
        out.append("(no entry at or above the head threshold)")
    if "*" in marks:
        out.append("* suspect: over the roof (the model's bytes or FLOPs exceed what the time allows): no verdict")
    if "^" in marks:
        out.append("^ over 100% but inside the compute roof's measured run-to-run spread: at the wall, read as 100%")
    return out


def header_line(art: dict) -> list[str]:
    out = ["Ordered by the larger of the tuning gain and the avoidable gain (% of GPU time); --wide: all columns"]
    hb = art.get("head_basis") or {}
    if hb.get("basis") == "workload":
        regs = ", ".join(f"{r} {p:.0f}%" for r, p in sorted((hb.get("regime_pct_of_workload") or {}).items(),
                                                           key=lambda kv: -kv[1]))
        out += _wrap(f"Heads: at least {art.get('head_threshold_pct')}% of the profiled GPU time or of the workload's "
                     f"({regs})")
    return out


def fix_lines(art: dict) -> list[str]:
    """The first row's fix in one line, its evidence on the next (both cut to the terminal's width)."""
    order = ordered(art)
    if not order:
        return []
    from roofline.core.analysis import larger_gain_key

    e = order[0]
    # a fused kernel's name can outrun the line by itself: cut it, or the wrap leaves no room for the fix
    name = _cut(e.get("short_name") or e["name"], 60)
    lv = top_lever(e)
    if lv is None and not larger_gain_key(e)[1]:
        return _wrap("No row has a gain to act on: the degraded lines (stderr) and `verdict unknown` say what "
                     "would give one (captured shapes, the workload, stage-C counters)")
    if lv is not None:
        s = lv.get("saves_pct")
        head = f"Fix first: {name} ({lv['kind']}{'' if s is None else f', saves up to {s:.2f}% GPU'}): {lv['text']}"
        ev = lv.get("evidence") or ""
    else:
        head = f"Fix first: {name}: {e.get('route_reason') or e.get('route') or 'no verdict'}"
        ev = next(iter(e.get("necessary_evidence") or []), "")
    out = _wrap(head, 2)
    if ev:
        out += _wrap(f"  evidence: {ev}", 2, "    ")
    return out


def host_first(art: dict) -> list[str]:
    """Per host-bound regime whose top host cause takes more of the step's wall time than all of that
    regime's kernel gains together (tuning or avoidable, as % of the step's wall), the cause in one
    line: it, not a kernel, is what to fix first."""
    from roofline.ingest.hostcause import HOST_BOUND_IDLE_PCT
    from roofline.ingest.hostcause_rules import phrase

    out = []
    for reg, w in (art.get("wall_time") or {}).items():
        if not isinstance(w, dict) or w.get("idle_pct", 0) <= HOST_BOUND_IDLE_PCT or not isinstance(w.get("host"), dict):
            continue
        causes = [c for c in w["host"].get("causes") or () if c.get("ms_per_step")]
        if not causes or not w.get("step_wall_ms"):
            continue
        top = max(causes, key=lambda c: c["ms_per_step"])
        host_pct = 100.0 * top["ms_per_step"] / w["step_wall_ms"]
        kern_pct = kernel_gain_pct_of_step(art, reg)
        if host_pct > kern_pct:
            out += _wrap(f"Host first: the {reg} step ({w['step_wall_ms']:.1f} ms wall, GPU busy "
                         f"{w['gpu_busy_pct']:.1f}%): {phrase(top)}: {host_pct:.0f}% of the step's wall time, "
                         + (f"more than all the kernels' gains below ({kern_pct:.2f}% of it)" if kern_pct > 0 else
                            "and no kernel below gains any of it"))
    return out


def kernel_gain_pct_of_step(art: dict, regime: str) -> float:
    """The sum over the head's verdicts in `regime` of the larger of the tuning and avoidable gain, as
    a share of that regime's step wall time (pct_of_step_wall scales a % GPU gain: roofline.core.wall)."""
    tot = 0.0
    for e in art.get("entries") or []:
        for v in (e.get("regime_verdicts") or [e]):
            if v.get("regime") != regime:
                continue
            share, gpu = v.get("pct_of_step_wall", e.get("pct_of_step_wall")), v.get("regime_pct_gpu_time")
            if share is None or not gpu:
                continue
            g = max(x for x in (v.get("expected_e2e_gain_pct") or 0.0, v.get("avoidable_gain_pct") or 0.0))
            tot += share * g / gpu
    return tot


def degraded_lines(art: dict, prog: str = "roofline analyze") -> list[str]:
    """One short line per degraded entry: its short name and the reason's first clause (the whole
    reason is in profile_roofline.md and the JSON)."""
    from roofline.core.classify import short_name

    short = {e["name"]: e.get("short_name") for e in art.get("entries") or []}
    out = []
    for d in art.get("degraded") or []:
        name = short.get(d["name"]) or short_name(d["name"])
        first = first_clause(d.get("reason") or "")
        out.append(_cut(f"{prog}: degraded: {_cut(name, 48)}: {first}", TERMINAL_COLUMNS))
    if out:
        out.append(f"{prog}: {len(out)} degraded entr{'y' if len(out) == 1 else 'ies'}: the full reasons are in "
                   "profile_roofline.md ('Degraded') and the JSON")
    return out


def first_clause(reason: str) -> str:
    """The reason up to its first clause break ('; ', ': ', ' (', ', and ', '. '): what went wrong, not the
    evidence behind it or the way to mend it (both in the md)."""
    cut = len(reason)
    for sep in ("; ", ": ", " (", ", and ", ". "):
        i = reason.find(sep, 8 if not reason.startswith("internal error") else len("internal error: ") + 1)
        while sep == ": " and i > 0 and " " not in reason[:i]:     # a field path ("entries[1].x: ...") is no clause
            i = reason.find(sep, i + 2)
        if 0 < i < cut:
            cut = i
    return reason[:cut]


def render(art: dict, wide: bool = False) -> str:
    from roofline.io.schema import clean

    art = clean(art)
    if wide:
        from roofline.report.artifact import render_table

        return render_table(art)
    from roofline.report.artifact import wall_lines
    from roofline.report.extra import under_table
    from roofline.report.ranks import table_lines as rank_lines

    above = host_first(art)
    out = above + header_line(art) + table_lines(art) + fix_lines(art)
    out += rank_lines(art)
    out += wall_lines(art) + under_table(art)     # one line each, as in the md (a terminal wraps them)
    return "\n".join(out) + "\n"
