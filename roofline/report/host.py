"""What the host does in a host-bound step, in the report: the cause on the step line, and the
section "What the host does while the GPU idles" of profile_roofline.md (the Top-N's
`wall_time.<regime>.host`, written by `roofline topn`: roofline/ingest/hostcause.py)."""
from __future__ import annotations

from roofline.ingest.hostcause_rules import phrase


def step_cause(w: dict) -> str:
    """': <the cause explaining most of the idle>' for a host-bound step's line; the trace's verdict
    when no cause reaches 10% of the idle; '' without a host block."""
    h = w.get("host")
    if not isinstance(h, dict):
        return ""
    top = [c for c in h.get("causes") or () if c.get("pct_of_idle", 0) >= 10.0]
    if not top:
        return f": {h.get('summary', '')}" if h.get("summary") else ""
    more = (f"; {len(top) - 1} more cause{'s' if len(top) > 2 else ''} in profile_roofline.md "
            "('What the host does')") if len(top) > 1 else ""
    return f": {phrase(top[0])}{more}"


def host_section(art: dict) -> list[str]:
    """The markdown section: per host-bound regime, each cause with its evidence, then the host events
    ranked by the idle time they explain."""
    regs = [(reg, w) for reg, w in (art.get("wall_time") or {}).items() if isinstance(w, dict) and w.get("host")]
    if not regs:
        return []
    L = ["", "## What the host does while the GPU idles", "",
         "Host-bound steps: the CPU events of the launching thread that cover the GPU's idle gaps, ranked by "
         "the idle time they explain (docs/method.md section 4)."]
    for reg, w in regs:
        h = w["host"]
        L += ["", f"**{reg}** ({w['steps']} steps, idle {h.get('idle_ms_per_step', 0):.2f} ms/step in "
                  f"{h.get('idle_gaps_per_step', 0):.0f} gaps, {h.get('launches_per_step', 0):.0f} launch calls/step): "
                  f"{h['summary']}.", ""]
        for c in h["causes"]:
            if c["pct_of_idle"] < 1.0:
                continue
            steps = c.get("per_step_ms")
            L.append(f"- `{c['cause']}` {c['ms_per_step']:.2f} ms/step ({c['pct_of_idle']:.1f}% of the idle)"
                     + (f", per step {', '.join(f'{x:.2f}' for x in steps)} ms" if isinstance(steps, list) else "")
                     + (f": {c['evidence']}" if c.get("evidence") else "")
                     + (f" (ops: {', '.join(f'`{o}`' for o in c['ops'][:4])})" if c.get("ops") else ""))
        if h.get("ops"):
            L += ["", "| host event | cause | ms/step | % of idle | calls | steps |", "|---|---|---|---|---|---|"]
            L += [f"| `{o['name']}` | {o.get('cause', '-')} | {o['ms_per_step']:.3f} | {o.get('pct_of_idle', 0):.1f} | "
                  f"{o.get('calls', '-')} | {o.get('steps', '-')} |" for o in h["ops"]]
    return L
