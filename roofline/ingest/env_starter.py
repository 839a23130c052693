"""A starter env_report.json from what a profiler trace and its Top-N know.

`roofline topn` writes it beside the Top-N so that `roofline analyze` can run next with no
hand-made file. What the trace knows: the device (``deviceProperties``: name, compute capability)
and the dtypes of the captured shapes. What it cannot know (the workload: input/output lengths and
concurrency) comes from flags; a field nobody gave is left out and listed in ``missing``, and
`roofline analyze` names it with the way to give it (:data:`HOW_TO_GIVE`).

Pure functions, except :func:`trace_head` (reads the head of the trace file).
"""
from __future__ import annotations

import json
from collections import Counter

from roofline.core import opclasses

# env_report field -> (the `roofline topn` flag that gives it, what it is)
FLAGS = {
    "gfx": ("--gfx sm_90", "the device key"),
    "model_dtype": ("--model-dtype bf16", "the dtype of tensors the Top-N does not type"),
    "model_arch_class": ("--model-arch-class dense|moe", "dense or MoE"),
    "workload.isl": ("--isl N", "input tokens per request"),
    "workload.osl": ("--osl N", "output tokens per request"),
    "workload.conc": ("--conc N", "concurrent requests"),
}
GENERATED_BY = "roofline topn"   # generated_by.tool of a starter: what topn may fill in later


def is_starter(env: dict) -> bool:
    """Whether an env report is a starter `roofline topn` wrote (it may fill it; never a user's file)."""
    g = env.get("generated_by") if isinstance(env, dict) else None
    return isinstance(g, dict) and g.get("tool") == GENERATED_BY


def how_to_give(fields, starter: bool, missing: bool = True) -> str:
    """': give it with ...' for left-out (or, missing=False, mistyped) env-report fields, all of them
    in one clause. A starter is filled by `roofline topn TRACE <flags>`; a file of the user's is
    edited."""
    fields = [f for f in fields if f in FLAGS]
    if not fields:
        return ""
    it = "it" if len(fields) == 1 else "them"
    what = "; ".join(f"{f.split('.')[-1]}: {FLAGS[f][1]}" for f in fields)
    if starter:
        why = " (no deviceProperties in the trace)" if "gfx" in fields else ""
        return (f": give {it} with `roofline topn TRACE {' '.join(FLAGS[f][0] for f in fields)}` ({what}){why}; "
                "it fills the starter env report it wrote; or edit the file")
    return f": add {it} to the file ({what}; docs/env_report.md)" if missing else f" ({what}; docs/env_report.md)"


_HEAD_LIMIT = 64 << 20


def trace_head(path: str) -> dict:
    """The top-level fields written before ``traceEvents`` (Kineto puts ``deviceProperties`` there),
    as a dict; {} when the head is not a JSON object prefix (e.g. an ncu report)."""
    from roofline.ingest.trace_tables import open_trace

    stream, raw = open_trace(path)
    buf = bytearray()
    try:
        while len(buf) < _HEAD_LIMIT:
            chunk = stream.read(1 << 16)
            if not chunk:
                break
            buf += chunk
            if buf.find(b'"traceEvents"') >= 0:
                break
    except (OSError, EOFError):
        return {}
    finally:
        stream.close()
        raw.close()
    k = buf.find(b'"traceEvents"')
    head = bytes(buf[:k] if k >= 0 else b"").strip()
    if not head.startswith(b"{"):
        return {}
    try:
        hd = json.loads(head[:-1] + b"}" if head.endswith(b",") else head + b"}")
    except ValueError:
        return {}
    return hd if isinstance(hd, dict) else {}


def device_from_head(head: dict) -> tuple[str | None, str | None, list[str]]:
    """(gpu_name, gfx, notes) from deviceProperties. NVIDIA: gfx = sm_<major><minor>."""
    notes: list[str] = []
    devs = [d for d in head.get("deviceProperties") or () if isinstance(d, dict)]
    if not devs:
        return None, None, notes
    names = sorted({d["name"] for d in devs if isinstance(d.get("name"), str)})
    caps = sorted({(d["computeMajor"], d["computeMinor"]) for d in devs
                   if isinstance(d.get("computeMajor"), int) and isinstance(d.get("computeMinor"), int)})
    if len(names) > 1 or len(caps) > 1:
        notes.append(f"the trace lists {len(devs)} devices of different kinds ({', '.join(names)}): "
                     f"the first one, {names[0] if names else '?'}, is written")
    name = devs[0].get("name") if isinstance(devs[0].get("name"), str) else (names[0] if names else None)
    gfx = None
    d0 = devs[0]
    if isinstance(d0.get("computeMajor"), int) and isinstance(d0.get("computeMinor"), int):
        gfx = f"sm_{d0['computeMajor']}{d0['computeMinor']}"
    elif isinstance(d0.get("gcnArchName"), str):  # ROCm traces name the gfx id
        gfx = d0["gcnArchName"].split(":")[0]
    return name, gfx, notes


def _weighted(topn: dict, key: str, classes: frozenset | None = None) -> Counter:
    c: Counter = Counter()
    for e in topn.get("entries", []):
        dt = e.get("dtypes") or {}
        cls = e.get("classification") or e.get("op_class")
        if classes is not None and cls not in classes:
            continue
        if isinstance(dt.get(key), str):
            c[dt[key]] += float(e.get("pct_gpu_time") or 0.0)
    return c


def dtypes_from_topn(topn: dict) -> tuple[str | None, str | None]:
    """(model_dtype, kv_cache_dtype): the GEMM/MoE weight dtype carrying the most GPU time (else the
    activation dtype of any entry), and the attention kv dtype, from the captured shapes' dtypes."""
    weights = opclasses.with_role("weight")     # the classes whose entries speak for the weights (GEMM, MoE)
    w = _weighted(topn, "weight", weights) or _weighted(topn, "act", weights) or _weighted(topn, "act")
    kv = _weighted(topn, "kv", opclasses.with_role("kv"))
    return (w.most_common(1)[0][0] if w else None), (kv.most_common(1)[0][0] if kv else None)


def _from_report(topn: dict) -> bool:
    return (topn.get("source") or {}).get("kind") in ("ncu-rep", "ncu-csv")


def counter_dtype(topn: dict) -> str | None:
    """The tensor-pipe dtype that carries the most GPU time among the entries' measured counters
    (the Top-N of an Nsight Compute report), or None."""
    c: Counter = Counter()
    for e in topn.get("entries", []):
        tdt = (e.get("counters") or {}).get("tensor_flops_by_dtype") or {}
        if tdt and max(tdt.values()) > 0:
            c[max(tdt, key=tdt.get)] += float(e.get("pct_gpu_time") or 0.0)
    return c.most_common(1)[0][0] if c else None


def _config_dtype(config: dict | None) -> str | None:
    if not config:
        return None
    tc = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    d = tc.get("torch_dtype") or config.get("torch_dtype") or tc.get("dtype") or config.get("dtype")
    return {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(d, d) if isinstance(d, str) else None


def _config_arch(config: dict | None) -> str | None:
    if not config:
        return None
    merged = dict(config)
    if isinstance(config.get("text_config"), dict):
        merged.update(config["text_config"])
    for k in ("num_experts", "num_local_experts", "n_routed_experts"):
        if isinstance(merged.get(k), int) and merged[k] > 1:
            return "moe"
    return "dense"


def starter_env(head: dict, topn: dict, *, isl=None, osl=None, conc=None, config: dict | None = None,
                config_path: str | None = None, model_arch_class: str | None = None,
                model_dtype: str | None = None, gfx: str | None = None, framework: str | None = None,
                trace_name: str | None = None) -> tuple[dict, list[str], list[str]]:
    """-> (env report dict, missing field paths, notes). Flags win over what the trace says."""
    notes: list[str] = []
    name, t_gfx, dn = device_from_head(head)
    notes += dn
    env: dict = {}
    src: dict = {}
    dev_src = "the Nsight Compute report's device attributes" if _from_report(topn) else "trace deviceProperties"
    if gfx or t_gfx:
        env["gfx"] = gfx or t_gfx
        src["gfx"] = "--gfx" if gfx else f"{dev_src} (compute capability)"
    if name:
        env["gpu_name"] = name
        src["gpu_name"] = dev_src
    t_dt, t_kv = dtypes_from_topn(topn)
    c_dt = None if (model_dtype or t_dt) else counter_dtype(topn)
    mdt = model_dtype or t_dt or c_dt or _config_dtype(config)
    if mdt:
        env["model_dtype"] = mdt
        src["model_dtype"] = ("--model-dtype" if model_dtype else
                              "captured shapes' dtypes (GEMM weights)" if t_dt else
                              "the report's tensor-pipe counters (the dtype carrying the most GPU time)" if c_dt
                              else "config.json torch_dtype")
    if t_kv:
        env["kv_cache_dtype"] = t_kv
        src["kv_cache_dtype"] = "captured attention shapes' dtypes"
    arch = model_arch_class or _config_arch(config)
    if arch is None:
        classes = {e.get("classification") or e.get("op_class") for e in topn.get("entries", [])}
        implied = opclasses.arch_of(classes)    # an MoE kernel: "moe"
        arch = implied or "dense"
        # recorded only (nothing reads it: docs/env_report.md), so nobody is asked for it
        src["model_arch_class"] = (f"from the kernels ({'an MoE kernel is' if implied else 'no MoE kernel'}"
                                   " in the Top-N); recorded only, nothing reads it")
    else:
        src["model_arch_class"] = "--model-arch-class" if model_arch_class else "config.json (expert count)"
    env["model_arch_class"] = arch
    wl = {}
    for k, v in (("isl", isl), ("osl", osl), ("conc", conc)):
        if v is not None:
            wl[k] = v
    env["workload"] = wl
    if wl:
        src["workload"] = "--isl/--osl/--conc"
    if framework:
        env["framework"] = framework
    if config_path:
        env["config_path"] = config_path
    missing = [k for k in ("gfx", "model_dtype") if k not in env]
    missing += [f"workload.{k}" for k in ("isl", "osl", "conc") if k not in wl]
    env["generated_by"] = {"tool": GENERATED_BY, "trace": trace_name, "sources": src,
                           "missing": missing}
    return env, missing, notes


def get_field(env: dict, field: str):
    if field.startswith("workload."):
        wl = env.get("workload")
        return wl.get(field[9:]) if isinstance(wl, dict) else None
    return env.get(field)


def set_field(env: dict, field: str, value) -> None:
    if field.startswith("workload."):
        if not isinstance(env.get("workload"), dict):
            env["workload"] = {}
        env["workload"][field[9:]] = value
    else:
        env[field] = value


def fill_starter(old: dict, fresh: dict, given: set[str]) -> tuple[dict, list[str], list[str]]:
    """A starter written earlier (is_starter), filled from a fresh one: the fields given as flags
    now (`given`: env-report field paths) take the new value, a field the old starter lacks is
    added, every other field (a hand edit included) stays as it is.
    -> (the env report, the fields set or changed, the fields still missing)."""
    env = json.loads(json.dumps(old))
    fields = [k for k in fresh if k not in ("workload", "generated_by")]
    fields += [f"workload.{k}" for k in (fresh.get("workload") or {})]
    gb = env["generated_by"] if isinstance(env.get("generated_by"), dict) else {}
    sources = gb.get("sources") if isinstance(gb.get("sources"), dict) else {}
    fsrc = fresh["generated_by"]["sources"]
    changed = []
    for f in fields:
        new = get_field(fresh, f)
        if (f in given or get_field(env, f) is None) and get_field(env, f) != new:
            set_field(env, f, new)
            changed.append(f)
            top = f.split(".")[0]
            if top in fsrc:
                sources[top] = fsrc[top]
    missing = [k for k in ("gfx", "model_dtype", "workload.isl", "workload.osl", "workload.conc")
               if get_field(env, k) is None]
    env["generated_by"] = {**gb, "tool": GENERATED_BY, "sources": sources, "missing": missing}
    return env, changed, missing
