"""What the table shows beside the verdict: which kernel a row is (its regime and the
aten op `roofline topn` linked to its launches), the workload gain (roofline.core.workload), and why a
row without a verdict has none. Pure: artifact in, table cells and lines out."""
from __future__ import annotations

from roofline.io.values import UNKNOWN

OP_HEADER = "regime / aten op"
WORKLOAD_HEADER = "workload gain (%GPU)"


def aten_op(e: dict) -> str:
    """The aten op most of the entry's launches came from (`aten::` dropped), '+N' more; '' without."""
    ops = e.get("aten_ops") or {}
    if not isinstance(ops, dict) or not ops:
        return ""
    top = max(ops, key=lambda k: (ops[k], k))
    name = top[6:] if top.startswith("aten::") else top
    return name + (f" +{len(ops) - 1}" if len(ops) > 1 else "")


def op_cell(e: dict, regime: str | None = None) -> str:
    """`regime op`: what tells two rows of one kernel name apart."""
    return " ".join(x for x in (regime or e.get("regime") or "", aten_op(e)) if x)


def gain(x) -> str:
    return "-" if x is None else f"+{x:.2f}%"


def extra_cells(e: dict, v: dict | None = None) -> list[str]:
    """The two cells table_rows appends to a row of entry e (v: one of its regime verdicts):
    [regime / aten op, workload gain]."""
    x = v if v is not None else e
    return [op_cell(e, x.get("regime")), gain(x.get("expected_workload_gain_pct"))]


def add_columns(art: dict, headers: list[str], rows: list[list[str]]) -> tuple[list[str], list[list[str]]]:
    """Rows of table_rows (HEADERS' cells, then extra_cells) -> (headers, rows) in display order:
    the regime / aten op after the kernel, the workload gain after the e2e gain when a workload was
    projected, the wall gain only when the artifact has step wall times."""
    w = art.get("workload_projection") or {}
    projected = w.get("basis") == "workload" and bool(w.get("how"))
    n = len(headers)
    hs = list(headers)
    out = [list(r[:n]) for r in rows]
    extra = [r[n:n + 2] if len(r) >= n + 2 else ["", ""] for r in rows]
    i = hs.index("e2e gain (%GPU)") + 1
    if projected:
        hs.insert(i, WORKLOAD_HEADER)
        for r, x in zip(out, extra):
            r.insert(i, x[1])
    if not art.get("wall_time"):
        j = hs.index("wall gain (%step)")
        del hs[j]
        for r in out:
            del r[j]
    k = hs.index("kernel") + 1
    hs.insert(k, OP_HEADER)
    for r, x in zip(out, extra):
        r.insert(k, x[0])
    return hs, out


def under_table(art: dict) -> list[str]:
    """The lines under the table: which mix the gains use; why regime rows have no verdict."""
    from roofline.core.workload import table_line

    out = [x for x in [table_line(art)] if x]
    out += unknown_regime_lines(art)
    return out


def why_unknown(v: dict) -> str:
    """Why a verdict is `unknown`, in one short clause, from the entry's own fields."""
    notes = v.get("notes") or ""
    if notes.startswith("degraded (L2): "):
        return notes[len("degraded (L2): "):].split("; ")[0]
    # the model's own no-verdict clauses ("L2-resident: ...: no verdict", "dispatch-bound: ...: no verdict")
    said = [":".join(seg.split(": no verdict")[0].split(":")[:2]) for seg in notes.split("; ") if ": no verdict" in seg]
    if said:
        return " and ".join(said)
    if v.get("suspect"):
        return "suspect: the model's ratio is impossible (over the roof)"
    if v.get("confidence") == "low":
        return "low confidence (estimated shapes or unvalidated peaks): display only"
    if v.get("route_reason"):
        return v["route_reason"].split(": ")[0]
    return "no verdict"


def unknown_regime_lines(art: dict) -> list[str]:
    """One line per regime sub-row whose headroom is unknown: which kernel and regime, and why."""
    out = []
    for e in art.get("entries") or []:
        for v in (e.get("regime_verdicts") or [])[1:]:
            if v.get("headroom_class", UNKNOWN) == UNKNOWN:
                out.append(f"[{v.get('regime')} regime] of {e.get('short_name') or e['name']}: no verdict: "
                           f"{why_unknown(v)}")
    return out
