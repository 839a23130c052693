"""Are two rounds the same work (docs/method.md section 9, "compare")? A round-over-round time change
is evidence about a kernel only when both rounds ran the same model on the same device. What each
round says about itself is read wherever it is, so that files copied away from their runs are
judged as well as rounds in place:

* the device: the artifact's own `gpu_name` / `gfx` (and its peak table's device), the Top-N's
  `source.devices`, the env report's `gpu_name` / `gfx`;
* the model: the config the artifact was analysed with (`inputs.config`), else the env report's
  `config_path` (the keys the analysis reads, CONFIG_INT_KEYS), the env report's `model_dtype`, and
  the GEMM weight shapes (N, K) captured in the round (Top-N shapes, else the artifact's captured
  `shape`s): two rounds that share no weight shape run different models;

rounds that differ in any of these are refused (one line naming what differs); a kernel whose
captured shapes differ between the rounds is not compared (it does other work)."""
from __future__ import annotations

import json
from pathlib import Path

from roofline.core.inputs import CONFIG_INT_KEYS, find_upwards

DEVICE_KEYS = ("gpu_name", "gfx", "model_dtype")
MIN_WEIGHT_DIM = 256   # GEMM dimensions at or above this are a model's weight sizes (hidden, heads x dim, ...)


def _doc(p: Path | None) -> dict | None:
    """A JSON object read through the bounded reader, or None (missing, unreadable, not an object)."""
    from roofline.core.inputs import read_json
    from roofline.io.errors import InputError

    if p is None:
        return None
    try:
        doc = read_json(p)
    except (InputError, OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def inputs_of(rnd: dict) -> dict:
    """The artifact's `inputs` block (an object), else {}."""
    art = rnd.get("artifact") if isinstance(rnd.get("artifact"), dict) else {}
    return art["inputs"] if isinstance(art.get("inputs"), dict) else {}


def _file(cand) -> Path | None:
    try:
        return Path(cand) if isinstance(cand, str) and cand and Path(cand).is_file() else None
    except (OSError, ValueError):
        return None


def round_env(rnd: dict) -> tuple[dict | None, Path | None]:
    """The env report a round was analysed with (the artifact says), else the one beside it or above."""
    p = _file(inputs_of(rnd).get("env"))
    if p is None:
        w = Path(rnd["where"])
        try:
            p = find_upwards(w if w.is_dir() else w.parent, "env_report.json")
        except (OSError, ValueError):
            p = None
    doc = _doc(p)
    return (doc, p) if doc is not None else (None, None)


def _config(rnd: dict, env: dict | None, env_path: Path | None) -> dict | None:
    """The numbers the analysis reads from the round's model config (CONFIG_INT_KEYS): the config the
    artifact names (`inputs.config`), else the env report's `config_path`; None when neither is readable."""
    p = _file(inputs_of(rnd).get("config"))
    cp = (env or {}).get("config_path")
    if p is None and isinstance(cp, str) and env_path is not None:
        p = _file(str(env_path.parent / cp))
    doc = _doc(p)
    if doc is None:
        return None
    merged = {**doc, **(doc["text_config"] if isinstance(doc.get("text_config"), dict) else {})}
    return {k: merged.get(k) for k in CONFIG_INT_KEYS if merged.get(k) is not None}


def _device(rnd: dict, env: dict | None) -> dict:
    """gpu_name / gfx of the round, from its own files first (artifact, Top-N), then its env report."""
    art, topn = rnd.get("artifact") or {}, rnd.get("topn") or {}
    out = {}
    for k in ("gpu_name", "gfx"):
        v = art.get(k) if isinstance(art.get(k), str) and art.get(k) else (env or {}).get(k)
        if isinstance(v, str) and v:
            out[k] = v
    src = topn.get("source") if isinstance(topn.get("source"), dict) else {}
    devs = src.get("devices")
    if "gpu_name" not in out and isinstance(devs, list) and devs and all(isinstance(d, str) for d in devs):
        out["gpu_name"] = ", ".join(sorted(devs))
    pk = art.get("peaks") if isinstance(art.get("peaks"), dict) else {}
    if "gpu_name" not in out and isinstance(pk.get("device"), str):
        out["gpu_name"] = pk["device"]
    return out


def _dim(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and MIN_WEIGHT_DIM <= v <= 2 ** 48 else None


def weight_shapes(rnd: dict) -> set[tuple[int, int]]:
    """The (N, K) of every GEMM shape captured in the round: its Top-N's shapes, else the artifact's
    captured entry shapes. A model's weights fix them; another model has others."""
    out = set()
    topn, art = rnd.get("topn") or {}, rnd.get("artifact") or {}
    for t in topn.get("entries") or []:
        for s in (t.get("shapes") if isinstance(t, dict) and isinstance(t.get("shapes"), list) else []):
            if isinstance(s, dict) and _dim(s.get("N")) and _dim(s.get("K")):
                out.add((s["N"], s["K"]))
    if not out:
        for e in art.get("entries") or []:
            s = e.get("shape") if isinstance(e, dict) and e.get("shape_source") == "captured" else None
            if isinstance(s, dict) and _dim(s.get("N")) and _dim(s.get("K")):
                out.add((s["N"], s["K"]))
    return out


def round_differences(a: dict, b: dict) -> list[str]:
    """What makes the two rounds different work: device, model dtype, model config (the keys the
    analysis reads), weight shapes. Empty when they agree or when nothing tells."""
    (ea, pa), (eb, pb) = round_env(a), round_env(b)
    da, db = _device(a, ea), _device(b, eb)
    out = [f"{k} {da[k]} -> {db[k]}" for k in ("gpu_name", "gfx") if k in da and k in db and da[k] != db[k]]
    if ea is not None and eb is not None and ea.get("model_dtype") != eb.get("model_dtype"):
        out.append(f"model_dtype {ea.get('model_dtype')} -> {eb.get('model_dtype')}")
    ca, cb = _config(a, ea, pa), _config(b, eb, pb)
    if ca is not None and cb is not None and ca != cb:
        keys = [k for k in CONFIG_INT_KEYS if ca.get(k) != cb.get(k)]
        out.append("model config " + ", ".join(f"{k} {ca.get(k)} -> {cb.get(k)}" for k in keys[:4])
                   + (f" (+{len(keys) - 4} more)" if len(keys) > 4 else ""))
    wa, wb = weight_shapes(a), weight_shapes(b)
    if wa and wb and not wa & wb:
        show = lambda w: ", ".join(f"{n}x{k}" for n, k in sorted(w)[:3]) + (", ..." if len(w) > 3 else "")  # noqa: E731
        out.append(f"the captured GEMM weight shapes (N x K) share none (A: {show(wa)}; B: {show(wb)}): other models")
    return out


def _shapes(rnd: dict) -> dict[str, frozenset]:
    """kernel name -> its captured shapes (as canonical JSON), from the round's Top-N."""
    out: dict[str, set] = {}
    for t in (rnd.get("topn") or {}).get("entries") or []:
        if isinstance(t, dict) and isinstance(t.get("name"), str) and isinstance(t.get("shapes"), list) and t["shapes"]:
            out.setdefault(t["name"], set()).update(json.dumps(s, sort_keys=True, default=repr) for s in t["shapes"])
    return {k: frozenset(v) for k, v in out.items()}


def shape_mismatches(a: dict, b: dict) -> set[str]:
    """Kernels captured with shapes in both rounds whose shapes differ: not the same work."""
    sa, sb = _shapes(a), _shapes(b)
    return {n for n in set(sa) & set(sb) if sa[n] != sb[n]}
