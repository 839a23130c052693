"""Where the L2, not HBM, decides a kernel's DRAM bytes, and shape rows that read above their roof:
the notes that name the measured cause when model bytes and DRAM bytes differ (docs/method.md
section 4)."""
from __future__ import annotations

from roofline.peaks import Peaks

STREAM_KINDS = ("elementwise", "norm", "quant")


def cache_residency(op_class: str, w, chosen: dict, peaks: Peaks, out: dict, notes: list[str]) -> bool:
    """Where the L2 decides the DRAM bytes (docs/method.md section 4), measured on the real-model
    corpus with ncu in the run's own cache state:
    - a streaming op whose whole traffic fits in half the L2 reads what the kernel before it just
      wrote and writes what the next one reads: its DRAM bytes were a few % of the model's
      (decode elementwise ops). The HBM roof does not bind it: no verdict (returns True);
    - a GEMM operand, or an attention mask, larger than half the L2 is re-read from DRAM tile by
      tile: DRAM bytes above the fewest-bytes count are expected (prefill GEMMs 1.0-2.1x)."""
    l2 = peaks.l2_bytes()
    if not l2:
        return False
    half = l2 / 2
    if op_class in STREAM_KINDS and chosen["bytes_est"] <= half:
        out["l2_resident"] = True
        notes.append(f"L2-resident: the op moves {chosen['bytes_est'] / 1e6:.3g} MB, under half the L2 "
                     f"({l2 / 1e6:.0f} MB): in a serving step it is served from L2 (ncu DRAM bytes of such ops "
                     "are a few % of the model's), so the HBM roof does not bind it: no verdict; the lever is "
                     "fusion with its producer or consumer")
        return True
    if op_class == "gemm":
        big = []
        for sh, d in zip(w.shapes, w.dts):
            if not all(k in sh for k in ("M", "N", "K")):
                continue                      # measured work (counters) has no operands to size
            bt = float(sh.get("batch", 1))
            a = float(sh["M"]) * float(sh["K"]) * d["act_bytes"] * bt
            b = float(sh["K"]) * float(sh["N"]) * d["weight_bytes"] * bt
            if max(a, b) > half and min(a, b) > 0.01 * half:
                big.append(f"{sh['M']}x{sh['N']}x{sh['K']}: {'A' if a >= b else 'B'} {max(a, b) / 1e6:.0f} MB")
        if big:
            notes.append(f"operands larger than half the L2 ({l2 / 1e6:.0f} MB) are re-read from DRAM tile by tile "
                         f"({'; '.join(big[:3])}): DRAM bytes above this fewest-bytes count are expected; the "
                         "compute axis is unaffected")
    info = w.res.info or {}
    if op_class == "moe" and info.get("grouped") and info.get("expert_weight_bytes", 0) > half:
        rows_per_expert = info["pairs"] / max(info["experts_hit"], 1.0)
        if rows_per_expert > 128:
            notes.append(f"each expert's weights ({info['expert_weight_bytes'] / 1e6:.0f} MB) exceed half the L2 and "
                         f"its ~{rows_per_expert:.0f} rows span several row tiles: weight tiles are re-read from DRAM "
                         "for each row tile, so DRAM bytes above the model's are expected")
    if op_class == "attn" and (w.res.info or {}).get("mask_bytes", 0) > half:
        notes.append(f"the attention mask ({w.res.info['mask_bytes'] / 1e6:.0f} MB) exceeds half the L2 and is "
                     "re-read from DRAM for the heads it is broadcast over: DRAM bytes above the model's are expected")
    return False


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
