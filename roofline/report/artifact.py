"""The artifact JSON and its markdown twin; the terminal table.

Writes (write_artifact, atomic_write) are crash-safe: roofline/io/pairwrite.py, the write path."""
from __future__ import annotations

from roofline.core import opclasses

import json
from pathlib import Path

from roofline.io.pairwrite import (  # noqa: F401  (the write path, handed on: report.recover, ...)
    ARTIFACT_JSON, ARTIFACT_MD, COMMIT_DIR, STAGE_PREFIX, atomic_write, recover, write_pair)
from roofline.io.schema import clean as _clean   # the artifact as JSON holds it (no NaN, no lone surrogate)


def to_json(art: dict) -> str:
    return json.dumps(_clean(art), indent=2, allow_nan=False) + "\n"


def write_artifact(art: dict, out_dir: str | Path) -> tuple[Path, Path]:
    """Write profile_roofline.json and .md into out_dir, as a pair (roofline/io/pairwrite.py): both
    are validated (the schema) and rendered first, so an invalid artifact or a rendering error
    touches nothing; a write error or a crash leaves the
    previous pair (or, after the commit point, the new one) and no temporary file."""
    from roofline.io.schema import validate_artifact

    out_dir = Path(out_dir)
    validate_artifact(art)  # a schema-valid artifact or nothing (jsonschema.ValidationError)
    js, md = to_json(art), to_markdown(art)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_pair(out_dir, {ARTIFACT_JSON: js, ARTIFACT_MD: md})
    return out_dir / ARTIFACT_JSON, out_dir / ARTIFACT_MD


def _pct(x, digits=0):
    """A fraction as a percentage; below 1% keep one significant digit, so 0.3% never reads 0%."""
    if x is None:
        return "-"
    v = 100 * x
    if v != 0 and abs(v) < 1:
        return "<0.01%" if abs(v) < 0.01 else f"{v:.1g}%"
    return f"{v:.{digits}f}%"


def _x(x):
    return "-" if x is None else f"{x:.3f}x"


def _gain(x):
    return "-" if x is None else f"+{x:.2f}%"


def _ranked(art: dict) -> list[tuple[int, dict, int]]:
    """(rank by share, entry, rank by expected gain) in the order of ranking_by_pct. A kernel name
    that several entries share (kept apart: docs/input_policy.md) is matched occurrence by
    occurrence: the k-th time it appears in a ranking is the k-th of its entries in that ranking's
    own order (roofline.core.contract.rankings)."""
    from roofline.core.contract import gain_order_key

    def pools(key):
        out: dict[str, list[dict]] = {}
        for e in sorted(art["entries"], key=key):
            out.setdefault(e["name"], []).append(e)
        return out

    by_pct = pools(lambda e: -e["pct_gpu_time"])
    by_gain = pools(gain_order_key)
    gain_order = [by_gain[n].pop(0) for n in art["ranking_by_expected_gain"] if by_gain.get(n)]
    gain_rank = {id(e): i for i, e in enumerate(gain_order, 1)}
    return [(rank, e, gain_rank.get(id(e), 0)) for rank, e in
            enumerate((by_pct[n].pop(0) for n in art["ranking_by_pct"] if by_pct.get(n)), 1)]


def table_rows(art: dict) -> list[list[str]]:
    from roofline.report.extra import extra_cells

    rows = []
    for rank, e, gain_rank in _ranked(art):
        name = e["name"]
        pct = _pct(e.get("roofline_pct"))
        if e.get("roofline_pct_range"):
            lo, hi = e["roofline_pct_range"]
            pct = f"{pct} ({_pct(lo)}-{_pct(hi)})"
        if e.get("suspect"):
            pct += " (suspect)"
        hc = e.get("headroom_class", "unknown")
        if e.get("provisional_headroom_class"):
            hc += f" (provisional: {e['provisional_headroom_class']})"
        label = e.get("short_name") or name
        label = label if len(label) <= 48 else label[:47] + "~"
        rows.append([str(rank), str(gain_rank), label, f"{e['pct_gpu_time']:.2f}",
                     e.get("bound_type", "unknown"), pct, hc, _x(e.get("attainable_speedup")) + (
                         " ({:.1f}-{:.1f})".format(*e["attainable_speedup_range"])
                         if e.get("attainable_speedup_range") and e.get("attainable_speedup") else ""),
                     _gain(e.get("expected_e2e_gain_pct")), _gain(e.get("avoidable_gain_pct")),
                     _gain(e.get("expected_gain_pct_of_step_wall")), e.get("confidence", "low"), e.get("route", "")]
                    + extra_cells(e))
        rows += _shape_rows(e)
        rows += _regime_rows(e)
    return rows


def _regime_rows(e: dict) -> list[list[str]]:
    """The kernel's other regime(s) with real time, each with its own verdict on its own share
    (the % column is that regime's share of the GPU time)."""
    from roofline.report.extra import extra_cells

    rows = []
    for v in (e.get("regime_verdicts") or [])[1:]:
        hc = v.get("headroom_class", "unknown")
        if v.get("provisional_headroom_class"):
            hc += f" (provisional: {v['provisional_headroom_class']})"
        t = v.get("t_ms")
        rows.append(["", "", f"  [{v.get('regime')} regime" + (f", {t * 1e3:.1f} us per launch]" if t else "]"),
                     f"{v.get('regime_pct_gpu_time', 0.0):.2f}", v.get("bound_type", "unknown"),
                     _pct(v.get("roofline_pct")) + (" (suspect)" if v.get("suspect") else ""), hc,
                     _x(v.get("attainable_speedup")), _gain(v.get("expected_e2e_gain_pct")), _gain(v.get("avoidable_gain_pct")),
                     _gain(v.get("expected_gain_pct_of_step_wall")), v.get("confidence", "low"), v.get("route", "")]
                    + extra_cells(e, v))
        rows += [["", "", "  " + r[2]] + r[3:] for r in _shape_rows(v)]
    return rows


def _shape_label(sh: dict, differ: set | None = None) -> str:
    if all(k in sh for k in ("M", "N", "K")):
        return f"{sh['M']}x{sh['N']}x{sh['K']}"
    keys = [k for k in sh if k not in ("regime", "reduce") and (not differ or k in differ)]
    return ",".join(f"{k}={sh[k]}" for k in keys)


def _shape_rows(e: dict) -> list[list[str]]:
    """One row per shape of a multi-shape kernel name, under its entry: which shape is slow."""
    rows = []
    per = e.get("per_shape") or []
    tot = sum((r.get("launches") or 0) * r["t_ms"] for r in per)
    # the shapes of the analysed regime share that regime's part of the kernel's GPU time
    base = e.get("regime_pct_gpu_time", e["pct_gpu_time"])
    # label each shape by what differs between them (a decode attention differs only in seq_len)
    keys = {k for r in per for k in r["shape"]}
    differ = {k for k in keys if len({repr(r["shape"].get(k)) for r in per}) > 1}
    MAX_ROWS = 6     # a decode loop gives one attention shape per step: show the biggest few
    if len(per) > MAX_ROWS:
        order = sorted(per, key=lambda r: -((r.get("launches") or 0) * r["t_ms"]))
        shown, rest = order[:MAX_ROWS - 1], order[MAX_ROWS - 1:]
    else:
        shown, rest = per, []
    for r in shown:
        n = r.get("launches")
        share = base * n * r["t_ms"] / tot if (n and tot) else None
        rows.append(["", "", f"  - {_shape_label(r['shape'], differ)} x{n if n is not None else '?'} "
                             f"({r['t_ms'] * 1e3:.1f} us/launch)", "-" if share is None else f"{share:.2f}",
                     r.get("bound_type") or r.get("roof_axis", "-"),
                     _pct(r.get("roofline_pct")) + (" (over the roof)" if r.get("over_roof") else
                                                    " (at the wall)" if r.get("at_compute_wall") else ""), "", "", "", "",
                     "", "", ""])
    if rest:
        share = sum(base * (r.get("launches") or 0) * r["t_ms"] / tot for r in rest) if tot else None
        pcts = [r["roofline_pct"] for r in rest if r.get("roofline_pct") is not None]
        rows.append(["", "", f"  - {len(rest)} more shapes (per_shape in the JSON)",
                     "-" if share is None else f"{share:.2f}",
                     "/".join(sorted({r.get("bound_type") or r.get("roof_axis", "-") for r in rest})),
                     ("-" if not pcts else _pct(min(pcts)) if _pct(min(pcts)) == _pct(max(pcts))
                      else f"{_pct(min(pcts))}-{_pct(max(pcts))}"), "", "", "", "", "", "", ""])
    return rows


# the gains name their denominators: the window's GPU time, the regime's step wall time, and (with a
# workload: roofline.core.workload) the workload's GPU time; `avoidable (%GPU)`: the GPU time the bytes the result
# does not need take (docs/method.md section 12)
HEADERS = ["#pct", "#gain", "kernel", "% GPU", "bound", "roofline", "headroom", "attainable", "e2e gain (%GPU)",
           "avoidable (%GPU)", "wall gain (%step)", "conf", "route"]
# a step whose GPU idles more than this is bound by the host, not a kernel (the Top-N then says why)
from roofline.ingest.hostcause import HOST_BOUND_IDLE_PCT  # noqa: E402


def wall_lines(art: dict) -> list[str]:
    """One line per regime with step wall times: GPU busy, memcpy/memset and idle shares."""
    out = []
    for reg, w in (art.get("wall_time") or {}).items():
        if reg == "source" or not isinstance(w, dict):
            continue
        g = w.get("graph_steps")
        line = (f"{reg} step: {w['step_wall_ms']:.3f} ms wall (mean of {w['steps']}"
                + (f", {g} replaying a CUDA graph" if g else "") + f"): GPU busy {w['gpu_busy_pct']:.1f}%, "
                f"memcpy/memset {w['memcpy_pct']:.1f}%, idle {w['idle_pct']:.1f}%")
        if w["idle_pct"] > HOST_BOUND_IDLE_PCT:
            from roofline.report.host import step_cause

            line += " - the host, not a kernel, bounds this step" + step_cause(w)
        out.append(line)
    return out


def table(art: dict) -> tuple[list[str], list[list[str]]]:
    """(headers, rows) of the table; `wall gain` only when the artifact has step wall times, the
    workload gain only when a workload was projected (roofline.report.extra)."""
    from roofline.report.extra import add_columns

    return add_columns(art, HEADERS, table_rows(art))


def render_table(art: dict) -> str:
    headers, rows = table(_clean(art))
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()
    out = [line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows]
    if not rows:
        out.append("(no entry at or above the head threshold)")
    from roofline.report.ranks import table_lines

    out += table_lines(art)     # several ranks: per-rank times per head, the straggler, the collectives
    from roofline.report.extra import under_table

    return "\n".join(out + wall_lines(art) + under_table(art)) + "\n"


def legend(art: dict) -> list[str]:
    """The markdown legend under the table: the columns, then each route code present, in words."""
    from roofline.core.routing import ROUTES

    L = ["**Legend.** `roofline`: achieved fraction of the roof on the axis that bounds the kernel (HBM "
         "bandwidth, or the FLOP/s of its dtype). `headroom`: roofline against `target_eff`, what a good kernel of "
         "its class reaches (saturated >= 90% of it, moderate >= 60%, else underperforming). `attainable`: "
         "target_eff / roofline (>= 1x), the speedup a good kernel would give. `e2e gain (%GPU)`: % GPU x (1 - "
         "1/attainable), the profiled window's GPU time saved by tuning; `avoidable (%GPU)`: the GPU time saved by not moving the bytes the "
         "result does not need (bytes_necessary: docs/method.md section 12); `wall gain (%step)`: the same saving as a share of "
         "the step's wall time (GPU idle time included); `workload gain (%GPU)` (with a workload): the share of the "
         "workload's GPU time saved (docs/method.md section 4). `regime / aten op`: the regime of the row and the "
         "aten op its launches came from. Rows `- shape xL (T us/launch)` under a kernel: "
         "one per captured shape, L launches of T each, with that shape's own bound and roofline. `conf`: low = estimated shapes or unvalidated peaks (no "
         "verdict, display only), medium = captured shapes, high = measured counters (stage C). `bound`: memory | "
         "compute | latency (both utilizations under 60%, or a launch within dispatch overhead) | unknown. "
         "Method: docs/method.md.", ""]
    routes = []
    for e in art.get("entries", []):
        r = e.get("route")
        if r and r not in routes:
            routes.append(r)
    if routes:
        L.append("Routes: " + "; ".join(f"`{r}`: {ROUTES.get(r, r)}" for r in routes) + ".")
    return L


def to_markdown(art: dict) -> str:
    art = _clean(art)  # what is rendered is what the JSON beside it holds (no NaN, no lone surrogate)
    pk = art.get("peaks") or {"device": "unknown", "flops": {}, "flops_kind": {}, "hbm_bw_bytes_s": None}
    L = _md_head(art, pk)
    from roofline.report.host import host_section

    L += host_section(art)
    L += _md_measured(art)
    from roofline.report.ranks import md_lines

    L += md_lines(art)
    L += ["", "## Entries", ""]
    for e in art["entries"]:
        L += _md_entry(e)
    L += _md_tail(art, pk)
    return "\n".join(L) + "\n"


def _md_head(art: dict, pk: dict) -> list[str]:
    """Title, device and roofs, the head rule, the table and its legend, the plot."""
    L = [f"# Roofline headroom: stage {art['stage']}", ""]
    flops = ", ".join(f"{d} {v / 1e12:.0f} TFLOP/s ({pk['flops_kind'].get(d)})" for d, v in pk["flops"].items())
    L.append(f"Device **{pk['device']}** ({art.get('gfx')}); memory roof {pk['hbm_bw_bytes_s'] / 1e12:.2f} TB/s "
             f"({pk['hbm_bw_kind']}); compute roofs: {flops}. Peaks: {pk['source']}, confidence {pk['confidence']}."
             + (f" Interconnect roof (collectives) {pk['interconnect_bw_bytes_s'] / 1e9:.0f} GB/s per direction."
                if pk.get("interconnect_bw_bytes_s") and any(opclasses.on_interconnect(opclasses.kind_of(e)) for e in art["entries"])
                else "")
             if pk.get("hbm_bw_bytes_s") else f"Device **{pk['device']}**: no memory roof.")
    L.append("")
    hb = art.get("head_basis") or {}
    by_wl = hb.get("basis") == "workload"
    L.append(f"Head: entries with {'pct_gpu_time or a share of the workload' + chr(39) + 's GPU time' if by_wl else 'pct_gpu_time'} "
             f">= {art.get('head_threshold_pct', '-')}%, at most {art.get('head_cap', '-')}"
             + (" (the regimes' shares of the workload: " + ", ".join(
                 f"{r} {p:.1f}%" for r, p in (hb.get("regime_pct_of_workload") or {}).items()) + ")" if by_wl else "")
             + ". "
             "Ranks: `#pct` by share of GPU time, `#gain` by expected end-to-end gain (both kept: they disagree "
             "on purpose); the entries without an expected gain (no verdict, or low confidence) come after those "
             "with one in `#gain`, by their % GPU.")
    L.append("")
    headers, rows = table(art)
    L.append("| " + " | ".join(headers) + " |")
    L.append("|" + "|".join("---" for _ in headers) + "|")
    for r in rows:
        L.append("| " + " | ".join(c.replace("|", "/") for c in r) + " |")
    if not rows:
        L.append("\n_No entry at or above the head threshold._")
    from roofline.report.extra import under_table
    from roofline.report.levers import ranking_lines

    L += ranking_lines(art)
    below = wall_lines(art) + under_table(art)
    L += [""] + [f"{w}." for w in below] + ([""] if below else []) + legend(art)
    if art.get("plot"):
        L += ["", f"![roofline]({art['plot']})"]
    return L


def _md_measured(art: dict) -> list[str]:
    """Predicted vs measured: the stage-C isolated re-runs, one row per measured entry."""
    L: list[str] = []
    measured = [e for e in art["entries"] if e.get("measured")]
    if measured:
        L += ["", "## Predicted vs measured (stage C isolated re-runs)", "",
              "Ladder vs library: both isolated, same L2 state (like for like), projected onto the in-run time.", "",
              "| kernel | predicted attainable | ladder level | L2 | ladder ms (p20-p80) | library ms (p20-p80) | "
              "ladder vs library (spread) | in-run ms | projected in-run ms | verdict |",
              "|---|---|---|---|---|---|---|---|---|---|"]
        for e in measured:
            ms = e["measured"]
            rng = lambda k: ("-" if ms.get(f"{k}_t_ms") is None else  # noqa: E731
                             f"{ms[f'{k}_t_ms']:.4g} ({ms[f'{k}_t_ms_p20']:.4g}-{ms[f'{k}_t_ms_p80']:.4g})")
            lr = ms.get("ladder_vs_library_speedup_range")
            like = _x(ms.get("measured_attainable_speedup")) + (f" ({lr[0]:.3f}-{lr[1]:.3f})" if lr else "")
            proj = ms.get("projected_in_run_t_ms")
            L.append(f"| {e.get('short_name')} | {_x(e.get('attainable_speedup'))} | {ms.get('ladder_level')} | "
                     f"{ms.get('l2_mode') or 'cold'} | {rng('ladder')} | {rng('cublas')} | {like} | "
                     f"{ms['current_t_ms']:.4g} | {'-' if proj is None else f'{proj:.4g}'} | {ms.get('verdict')} |")
    return L


def _md_entry(e: dict) -> list[str]:
    """One entry's section: name, model figures, stage C, alternatives, route, levers, notes."""
    L: list[str] = []
    L.append(f"### {e.get('short_name')} ({e['pct_gpu_time']:.2f}% GPU)")
    L.append("")
    if e.get("short_name") and e["short_name"] != e["name"]:
        # the demangled name can be pages long: fold it
        L.append(f"- name: <details><summary>full name ({len(e['name'])} characters)</summary>\n\n"
                 f"`{e['name']}`\n\n</details>\n")
    else:
        L.append(f"- name: `{e['name']}`")
    if e.get("aten_ops"):
        L.append("- launched by: " + ", ".join(f"`{k}` ({v})" for k, v in e["aten_ops"].items())
                 + " (the aten ops `roofline topn` linked to its launches)")
    if e.get("modeled"):
        L.append(f"- {e['op_class']}, {e['regime']}, {e['t_ms'] * 1e3:.2f} us/launch x "
                 f"{e.get('launches_per_logical_op', 1)} per logical op; bytes {e['bytes_est'] / 1e6:.3f} MB, "
                 f"FLOPs {e['flops_est'] / 1e9:.3f} G, AI {e['arithmetic_intensity']:.2f} vs ridge "
                 f"{e['ridge_point']:.1f}")
        L.append(f"- achieved {e['achieved_bw_bytes_s'] / 1e12:.3f} TB/s ("
                 f"{'link util, of the interconnect roof' if e.get('memory_roof') == 'interconnect' else 'hbm_util'} "
                 f"{_pct(e['hbm_util'], 1)}), "
                 f"{e['achieved_flops'] / 1e12:.2f} TFLOP/s (compute_util {_pct(e['compute_util'], 1)}); "
                 f"roofline {_pct(e['roofline_pct_raw'], 1)} vs target_eff "
                 + (f"{e['target_eff']:.2f}" if e.get("target_eff") is not None else "none (no HBM verdict for its class)"))
        if e.get("bytes_measured") is not None and e.get("bytes_model") is not None:
            L.append(f"- stage C: measured {e['bytes_measured'] / 1e6:.3f} MB vs model {e['bytes_model'] / 1e6:.3f} MB"
                     + (f"; issued/useful FLOPs {e['padding_waste_ratio']:.2f}" if e.get("padding_waste_ratio") else ""))
        elif e.get("bytes_measured") is not None:   # no model: the counters are the work
            L.append(f"- measured input: {e['bytes_measured'] / 1e6:.3f} MB DRAM per logical op; useful FLOPs "
                     "unknown (no shapes)")
        for g in e.get("measured_groups") or []:   # launches that differ in work: one line per group
            if g.get("roofline_pct") is not None:
                L.append(f"  - {g['launches']} launch(es) of {g['dram_bytes'] / 1e6:.3f} MB in {g['t_ms'] * 1e3:.2f} us: "
                         f"roofline {_pct(g['roofline_pct'], 1)} ({g.get('headroom_class', 'unknown')})")
        for a in e.get("alternatives", []):
            L.append(f"  - byte model `{a['model']}`: {a['bytes_est'] / 1e6:.1f} MB -> "
                     f"{_pct(a['roofline_pct_raw'], 1)} ({'feasible' if a['feasible'] else 'INFEASIBLE'})")
    if e.get("pct_of_step_wall") is not None:
        g = e.get("expected_gain_pct_of_step_wall")
        L.append(f"- {e['pct_of_step_wall']:.2f}% of the {e['regime']} step's wall time"
                 + (f"; the expected gain is {g:.2f}% of it" if g is not None else ""))
    if e.get("measured"):
        ms = e["measured"]
        L.append(f"- predicted vs measured: attainable {_x(e.get('attainable_speedup'))} predicted, "
                 f"{_x(ms.get('measured_attainable_speedup'))} measured ({ms.get('verdict', '')})")
    L.append(f"- route: {e.get('route_reason', '')}")
    from roofline.report.levers import entry_lines

    L += entry_lines(e)      # necessary vs moved bytes, every lever with its evidence
    if e.get("notes"):
        L.append(f"- notes: {e['notes']}")
    L.append("")
    return L


def _md_tail(art: dict, pk: dict) -> list[str]:
    """Degraded entries, unmatched counter rows, skill errors, peak notes."""
    L: list[str] = []
    L.append("## Degraded")
    L.append("")
    if art["degraded"]:
        short = {e["name"]: e.get("short_name") for e in art["entries"]}
        for d in art["degraded"]:
            sn = short.get(d["name"])
            if sn is None:
                from roofline.core.classify import short_name

                sn = short_name(d["name"])
            L.append(f"- `{sn}`: {d['reason']}" + (f" <details><summary>full name</summary>`{d['name']}`</details>"
                                                  if sn != d["name"] else ""))
    else:
        L.append("None.")
    if art.get("unmatched_counters"):
        L += ["", "## Counter rows matching no head entry", ""] + [f"- `{n}`" for n in art["unmatched_counters"]]
    if art["skill_errors"]:
        L += ["", "## Skill errors", ""] + [f"- {s['where']}: {s['error']}" for s in art["skill_errors"]]
    if pk.get("notes"):
        L += ["", "## Peak notes", ""] + [f"- {n}" for n in pk["notes"]]
    return L
