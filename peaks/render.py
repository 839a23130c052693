"""A peak table as text, in the layout of peaks/h200.yaml (block keys, flow figure blocks, one
recorded run per line), the lines `roofline peaks measure` / `roofline peaks envelope` print about
it, and the checks of docs/method.md section 8 on a measured table. Pure functions on plain dicts (no YAML
library needed to write a table)."""
from __future__ import annotations

import json

from roofline.peaks import BF16_FP16_TOLERANCE, bf16_fp16_agree, bf16_fp16_gap

STREAM_EXPECTED = (0.85, 0.90)      # docs/method.md section 8: trivial stream vs pin rate


def _num(x: float) -> str:
    """Shortest float text PyYAML reads back as a float (YAML 1.1 wants a dot in the mantissa)."""
    t = f"{x:.6g}"
    mant, _, exp = t.partition("e")
    if "." not in mant:
        mant += ".0"
    return mant + ("e" + (exp if exp.startswith(("+", "-")) else "+" + exp) if exp else "")


def _key(k) -> str:
    k = str(k)
    return k if k.replace("_", "").isalnum() and not k[0].isdigit() else json.dumps(k)


def _val(v) -> str:
    if isinstance(v, dict):
        return _flow(v)
    if isinstance(v, list):
        return "[" + ", ".join(_val(x) for x in v) + "]"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return _num(v)
    if isinstance(v, int):
        return str(v)
    if v is None:
        return "null"
    return json.dumps(v)


def _flow(d: dict) -> str:
    return "{" + ", ".join(f"{_key(k)}: {_val(v)}" for k, v in d.items()) + "}"


def _block(L: list[str], indent: str, blk: dict) -> None:
    """A figure block: flow style on one line, or (when it carries `runs`) its keys one per line
    and one run per line."""
    for k, v in blk.items():
        if k == "runs" and isinstance(v, list):
            L.append(f"{indent}runs:")
            L.extend(f"{indent}  - {_val(r)}" for r in v)
        else:
            L.append(f"{indent}{_key(k)}: {_val(v)}")


def render_table(t: dict, header: list[str] | None = None) -> str:
    """YAML text in the layout of peaks/h200.yaml (block keys, flow figure blocks)."""
    L = [f"# {h}" if h else "#" for h in (header or [])]
    for k, v in t.items():
        if k in ("hbm_bw_bytes_s", "flops", "microbench"):
            continue
        if isinstance(v, list):
            L.append(f"{k}: {json.dumps(v)}")
        elif isinstance(v, str):
            L.append(f"{k}: {v if v.replace(' ', '').replace('_', '').replace('-', '').isalnum() else json.dumps(v)}")
        elif isinstance(v, bool):
            L.append(f"{k}: {'true' if v else 'false'}")
        elif isinstance(v, dict):
            L.append(f"{k}: {_flow(v)}")
        else:
            L.append(f"{k}: {v}")
    def fig(indent, kind, blk):
        if isinstance(blk, dict) and isinstance(blk.get("runs"), list):
            L.append(f"{indent}{kind}:")
            _block(L, indent + "  ", blk)
        else:
            L.append(f"{indent}{kind}: {_val(blk)}")

    if "hbm_bw_bytes_s" in t:
        L.append("hbm_bw_bytes_s:")
        for kind, blk in t["hbm_bw_bytes_s"].items():
            fig("  ", kind, blk)
    if "flops" in t:
        L.append("flops:")
        for dt, f in t["flops"].items():
            L.append(f"  {dt}:")
            for kind, blk in f.items():
                fig("    ", kind, blk)
    if "microbench" in t:
        L.append("microbench:")
        for k, v in t["microbench"].items():
            if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
                L.append(f"  {_key(k)}:")
                L.extend(f"    - {_val(x)}" for x in v)
            else:
                L.append(f"  {_key(k)}: {_val(v)}")
    return "\n".join(L) + "\n"


HEADER = [
    "{device}: peaks table. Datasheet figures are the vendor's; measured figures are ENVELOPES over",
    "the runs of `roofline peaks measure` recorded under each figure (`runs:`, one per machine start,",
    "with its date, SM clock and per-shape median and p20/p80): value = the highest median over the",
    "runs and the large shapes (peaks/envelope.py). Memory roof = the vendor's HBM pin rate",
    "(docs/method.md section 8); streaming tops out near 0.85-0.9 of it, which target_eff prices in.",
    "bf16 and fp16 envelopes must agree within 5% (docs/method.md section 8), else that axis is flagged.",
    "Rebuilt with the command in fixtures/peaks/README.md; do not edit the figures by hand.",
]


def envelope_lines(table: dict) -> list[str]:
    """One line per measured compute figure: the envelope, where it came from, its spread."""
    out = []
    for d, fig in (table.get("flops") or {}).items():
        m = (fig or {}).get("measured") or {}
        if "envelope_of" not in m:
            continue
        sp = m.get("spread") or {}
        out.append(f"envelope {d:5s} {m['value'] / 1e12:7.1f} TFLOP/s: run {m['envelope_of']['run']} at "
                   f"{m['envelope_of'].get('shape')} (p20 {sp.get('p20', 0) / 1e12:.1f}, p80 {sp.get('p80', 0) / 1e12:.1f}; "
                   f"SM clock {m.get('sm_clock_mhz', '?')} MHz; {len(m.get('runs', []))} run(s))")
    return out


def envelope_text(table: dict) -> str:
    return render_table(table, [h.format(device=table.get("device", "?")) for h in HEADER])


def checks(table: dict) -> list[tuple[bool, str]]:
    """The checks of docs/method.md section 8 on a measured table: (ok, line)."""
    out = []
    fl = table.get("flops") or {}
    mb = (fl.get("bf16") or {}).get("measured", {}).get("value")
    mf = (fl.get("fp16") or {}).get("measured", {}).get("value")
    if mb and mf:
        rel, ok = bf16_fp16_gap(mb, mf), bf16_fp16_agree(mb, mf)
        out.append((ok, f"bf16 {mb / 1e12:.1f} vs fp16 {mf / 1e12:.1f} TFLOP/s differ by {rel:.1%} "
                        f"({'within' if ok else 'OVER'} {BF16_FP16_TOLERANCE:.0%}"
                        f"{'' if ok else ': FLAGGED, the bf16/fp16 compute axis is not usable for ranking'})"))
    hb = table.get("hbm_bw_bytes_s") or {}
    pin = (hb.get("datasheet") or {}).get("value")
    meas = (hb.get("measured") or {}).get("value")
    if pin and meas:
        frac = meas / pin
        lo, hi = STREAM_EXPECTED
        ok = lo - 0.05 <= frac <= hi + 0.05
        out.append((ok, f"trivial stream {meas / 1e12:.2f} TB/s = {frac:.2f} of the {pin / 1e12:.2f} TB/s pin "
                        f"rate (a trivial stream reaching ~{lo}-{hi} of the pin rate is expected)"))
    for d, fig in fl.items():
        ms, ds = (fig.get("measured") or {}).get("value"), (fig.get("datasheet") or {}).get("value")
        if ms and ds:
            out.append((ms <= ds * 1.02, f"{d}: measured {ms / 1e12:.1f} = {ms / ds:.2f} of the datasheet dense "
                                         f"{ds / 1e12:.1f} TFLOP/s" + ("" if ms <= ds * 1.02 else " (ABOVE the datasheet?)")))
    return out
