"""Where the L2, not HBM, decides a kernel's DRAM bytes, and shape rows that read above their roof:
the notes that name the measured cause when model bytes and DRAM bytes differ (docs/method.md
section 4)."""
from __future__ import annotations

from roofline.core import opclasses
from roofline.peaks import Peaks

def cache_residency(op_class: str, w, chosen: dict, peaks: Peaks, notes: list[str]) -> bool:
    """Where the L2 decides the DRAM bytes (docs/method.md section 4), measured on the real-model
    corpus with ncu in the run's own cache state: each class's rule (roofline/core/opclasses/, `residency`):
    a streaming op served from the L2 gets no verdict (returns True); a GEMM operand, an expert's
    weights or an attention mask above half the L2 is re-read from DRAM (a note)."""
    l2 = peaks.l2_bytes()
    oc = opclasses.of(op_class)
    return bool(l2) and oc.residency(w, chosen, l2, notes)


def _flag_rows_over_roof(rows: list[dict], peaks: Peaks, notes: list[str]) -> None:
    """A shape row reading above its roof (beyond the compute roof's own run-to-run spread on the
    compute axis) is no figure to read as fine: flagged `over_roof`, and the notes say which."""
    for r in rows:
        pct = r.get("roofline_pct")
        if pct is None:
            continue
        tol = peaks.compute_roof_spread(r.get("_cdtype") or "bf16") if r.get("roof_axis") == "compute" else 0.0
        r.pop("_cdtype", None)
        limit = 1.0 / (1.0 - tol) if tol < 1 else float("inf")
        if pct > limit:
            r["over_roof"] = True
            sh = ",".join(f"{k}={v}" for k, v in r["shape"].items() if not isinstance(v, (list, dict)))
            notes.append(f"shape {sh} reads {pct:.0%} of the {r.get('roof_axis')} roof, beyond the roof's spread "
                         f"({tol:.1%}): the model is wrong for this shape (flagged over_roof)")
