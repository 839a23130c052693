"""Are two rounds the same work (docs/method.md section 9, "compare")? A round-over-round time change
is evidence about a kernel only when both rounds ran the same model on the same device: rounds
whose device, model dtype or model config differ are refused (one line naming what differs), and a
kernel whose captured shapes differ between the rounds is not compared (it does other work)."""
from __future__ import annotations

import json
from pathlib import Path

from roofline.core.inputs import CONFIG_INT_KEYS, find_upwards

DEVICE_KEYS = ("gpu_name", "gfx", "model_dtype")


def round_env(rnd: dict) -> tuple[dict | None, Path | None]:
    """The env report a round was analysed with (the artifact says), else the one beside it or above."""
    cand = ((rnd.get("artifact") or {}).get("inputs") or {}).get("env")
    p = Path(cand) if isinstance(cand, str) and Path(cand).is_file() else None
    if p is None:
        w = Path(rnd["where"])
        p = find_upwards(w if w.is_dir() else w.parent, "env_report.json")
    try:
        doc = json.loads(p.read_text(encoding="utf-8")) if p else None
    except (OSError, ValueError):
        return None, None
    return (doc, p) if isinstance(doc, dict) else (None, None)


def _config(env: dict | None, env_path: Path | None) -> dict | None:
    """The numbers the analysis reads from the round's model config (CONFIG_INT_KEYS), or None."""
    cp = (env or {}).get("config_path")
    if not isinstance(cp, str) or env_path is None:
        return None
    try:
        doc = json.loads((env_path.parent / cp).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    merged = {**doc, **(doc["text_config"] if isinstance(doc.get("text_config"), dict) else {})}
    return {k: merged.get(k) for k in CONFIG_INT_KEYS if merged.get(k) is not None}


def round_differences(a: dict, b: dict) -> list[str]:
    """What makes the two rounds different work: device, model dtype, model config (the keys the
    analysis reads). Empty when they agree or when a round gives no env report to tell."""
    (ea, pa), (eb, pb) = round_env(a), round_env(b)
    if ea is None or eb is None:
        return []
    out = [f"{k} {ea.get(k)} -> {eb.get(k)}" for k in DEVICE_KEYS if ea.get(k) != eb.get(k)]
    ca, cb = _config(ea, pa), _config(eb, pb)
    if ca is not None and cb is not None and ca != cb:
        keys = [k for k in CONFIG_INT_KEYS if ca.get(k) != cb.get(k)]
        out.append("model config " + ", ".join(f"{k} {ca.get(k)} -> {cb.get(k)}" for k in keys[:4])
                   + (f" (+{len(keys) - 4} more)" if len(keys) > 4 else ""))
    return out


def _shapes(rnd: dict) -> dict[str, frozenset]:
    """kernel name -> its captured shapes (as canonical JSON), from the round's Top-N."""
    out: dict[str, set] = {}
    for t in (rnd.get("topn") or {}).get("entries") or []:
        if isinstance(t, dict) and isinstance(t.get("name"), str) and isinstance(t.get("shapes"), list) and t["shapes"]:
            out.setdefault(t["name"], set()).update(json.dumps(s, sort_keys=True) for s in t["shapes"])
    return {k: frozenset(v) for k, v in out.items()}


def shape_mismatches(a: dict, b: dict) -> set[str]:
    """Kernels captured with shapes in both rounds whose shapes differ: not the same work."""
    sa, sb = _shapes(a), _shapes(b)
    return {n for n in set(sa) & set(sb) if sa[n] != sb[n]}
