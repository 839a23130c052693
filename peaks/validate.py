"""What makes a peak table valid (`roofline peaks validate`, and the tables `peaks envelope`
builds): required keys, positive numbers, a source for every figure, a measured value inside its
spread, envelopes whose value is the highest recorded median, and the bf16/fp16 rule."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from roofline.peaks import BF16_FP16_TOLERANCE, FIGURE_KINDS as _KINDS, bf16_fp16_agree, bf16_fp16_gap, peaks_dir
from roofline.peaks.envelope import check_envelope_block

REQUIRED_KEYS = ("device", "vendor", "gfx", "names", "hbm_bw_bytes_s", "flops")
# the closed set of roofline.peaks, in the order the messages name them
FIGURE_KINDS = ("datasheet",) + tuple(k for k in _KINDS if k != "datasheet")


def read_tables(directory=None) -> list[tuple[Path, Any, str | None]]:
    """(path, parsed YAML or None, why it could not be read or None) of every *.yaml in `directory`."""
    # validate must see a broken table too: read the files directly, not through the cached loader
    from roofline.peaks import _load_yaml   # the bounded reader (size, depth, special files, UTF-8)

    out = []
    for p in sorted(Path(directory or peaks_dir()).glob("*.yaml")):
        try:
            out.append((p, _load_yaml(p), None))
        except Exception as exc:
            out.append((p, None, f"{exc.__class__.__name__}: {exc}".splitlines()[0]))
    return out


def validate_table(d) -> list[str]:
    """Problems with one table (empty list = good)."""
    errs: list[str] = []
    if not isinstance(d, dict):
        return ["not a mapping"]
    for k in REQUIRED_KEYS:
        if k not in d:
            errs.append(f"missing key {k!r}")
    if "names" in d and not (isinstance(d["names"], list) and d["names"]):
        errs.append("names: expected a non-empty list")

    if "hbm_bw_bytes_s" in d:
        errs += _fig_errs("hbm_bw_bytes_s", d["hbm_bw_bytes_s"])
    if "interconnect_bw_bytes_s" in d:
        errs += _fig_errs("interconnect_bw_bytes_s", d["interconnect_bw_bytes_s"])
        errs += _link_errs(d["interconnect_bw_bytes_s"])
    fl = d.get("flops")
    if "flops" in d:
        if not isinstance(fl, dict) or not fl:
            errs.append("flops: expected a mapping dtype -> figures")
        else:
            for dt, fig in fl.items():
                errs += _fig_errs(f"flops.{dt}", fig)
            errs += _bf16_fp16_errs(fl)
    return errs


def _fig_errs(where: str, fig) -> list[str]:
    """Problems with one figure: {kind: {value, source[, spread, envelope]}}."""
    if not isinstance(fig, dict) or not fig:
        return [f"{where}: expected a mapping of figure kinds ({', '.join(FIGURE_KINDS)})"]
    out = []
    kinds = [k for k in fig if k in FIGURE_KINDS]
    if not kinds:
        out.append(f"{where}: no figure ({', '.join(FIGURE_KINDS)})")
    for kind in kinds:
        blk = fig[kind]
        if not isinstance(blk, dict):
            out.append(f"{where}.{kind}: expected {{value, source}}")
            continue
        v = blk.get("value")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            out.append(f"{where}.{kind}.value: expected a positive number, got {v!r}")
        if not (isinstance(blk.get("source"), str) and blk["source"].strip()):
            out.append(f"{where}.{kind}.source: missing (every figure cites where it came from)")
        if kind == "measured":
            sp = blk.get("spread")
            if sp is not None:
                if not (isinstance(sp, dict) and all(isinstance(sp.get(q), (int, float)) and sp[q] > 0
                                                     for q in ("p20", "p80"))):
                    out.append(f"{where}.{kind}.spread: expected {{p20, p80}} positive numbers")
                elif isinstance(v, (int, float)) and not sp["p20"] <= v <= sp["p80"]:
                    out.append(f"{where}.{kind}: value {v} outside its spread [{sp['p20']}, {sp['p80']}]")
            out += check_envelope_block(f"{where}.{kind}", blk)
    return out


def _link_errs(fig) -> list[str]:
    """The interconnect roof is the rate of ONE direction (a rank's bus bandwidth counts the bytes it
    sends): where the figure also gives the vendor's total of both directions, it is half of it."""
    out = []
    for kind, blk in (fig.items() if isinstance(fig, dict) else ()):
        if not isinstance(blk, dict) or "total_bidirectional_bytes_s" not in blk:
            continue
        v, tot = blk.get("value"), blk["total_bidirectional_bytes_s"]
        if isinstance(tot, bool) or not isinstance(tot, (int, float)) or not math.isfinite(tot) or tot <= 0:
            out.append(f"interconnect_bw_bytes_s.{kind}.total_bidirectional_bytes_s: expected a positive number, "
                       f"got {tot!r}")
        elif isinstance(v, (int, float)) and not isinstance(v, bool) and abs(2 * v - tot) > 0.01 * tot:
            out.append(f"interconnect_bw_bytes_s.{kind}: value {v:.4g} is not one direction of the "
                       f"{tot:.4g} B/s total (expected {tot / 2:.4g}: the roof is per direction)")
    return out


def _bf16_fp16_errs(fl: dict) -> list[str]:
    """docs/method.md section 8: bf16 and fp16 tensor rates are equal; measured peaks more than
    BF16_FP16_TOLERANCE apart mean the microbench is mis-calibrated."""
    errs = []
    for kind in ("measured", "validated"):
        def val(dt):
            blk = fl.get(dt)
            blk = blk.get(kind) if isinstance(blk, dict) else None
            return blk.get("value") if isinstance(blk, dict) else None

        b, h = val("bf16"), val("fp16")
        if isinstance(b, (int, float)) and isinstance(h, (int, float)) and b > 0 and h > 0:
            rel = bf16_fp16_gap(b, h)
            if not bf16_fp16_agree(b, h):
                errs.append(f"flops: {kind} bf16 {b:.4g} and fp16 {h:.4g} differ by {rel:.1%} > "
                            f"{BF16_FP16_TOLERANCE:.0%} (docs/method.md section 8: equal rates; the "
                            "microbench is mis-calibrated)")
    return errs
