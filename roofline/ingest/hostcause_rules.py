"""The idle time roofline.ingest.hostcause charged to host events, turned into named causes
(docs/topn.md, `wall_time.<regime>.host`; docs/method.md section 4). Each charged row falls in one
class, by what it is:

* `sync_wait`: a synchronising runtime call (the gap opened while the host waited for the GPU);
* `pageable_memcpy`: a copy from pageable memory (its gpu_memcpy says "Pageable": the runtime stages
  it through a bounce buffer and the host waits);
* `per_shape_host_work`: a cpu_op that held the GPU idle for HEAVY_CALL_US or more in one call
  (no dispatch costs that much), in two or more such calls whose Input Dims all differ: the op works
  per new shape on the host (a library building and compiling a plan: cuDNN's SDPA does it for each
  new sequence length); `host_work_in_op` when those calls repeat a shape, or there is one, or the
  dims are not recorded;
* `compile`: torch.compile / Dynamo / Inductor regions holding the GPU idle (a recompile);
* `allocator`: device memory allocation calls (cudaMalloc, the caching allocator growing);
* `launch_bound`: the rest of the recorded host time: kernel launch calls, the per-op dispatch of
  cpu_ops that never held the GPU idle for HEAVY_CALL_US at once, Python between ops (time inside a
  user_annotation or python_function range but in no op), other runtime calls;
* `host_code_no_op`: time inside a user_annotation / python_function range but in no op, a
  millisecond or more at a time (not the dispatch gaps of a launch-bound loop): the trace does not
  say what the host did there;
* `unrecorded`: time the launching thread spent in no recorded event at all (the trace does not say).
Pure.
"""
from __future__ import annotations

HEAVY_CALL_US = 1000.0    # one call keeping the GPU idle this long is host work, not dispatch (~10-50 us)
TOP_OPS = 8
SYNC_CALLS = frozenset(("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize",
                        "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize", "cudaMemcpy",
                        "cudaMemcpy2D", "cudaMemcpyFromSymbol", "cudaMemcpyToSymbol", "cuMemcpyDtoH_v2",
                        "cuMemcpyHtoD_v2", "cuMemcpyDtoH", "cuMemcpyHtoD", "cudaFree", "cuMemFree_v2",
                        "cudaFreeHost", "cudaHostUnregister"))
ALLOC_CALLS = ("cudaMalloc", "cuMemAlloc", "cuMemCreate", "cuMemMap", "cudaHostAlloc", "cudaHostRegister")
# event categories (roofline.ingest.host_scan.CATS): 0 cpu_op, 1 cuda_runtime, 2 cuda_driver,
# 3 user_annotation, 4 python_function
NONE = -1


def runtime_kind(name: str, row: int, hev) -> str:
    """A runtime/driver call's kind: launch, sync, pageable (a copy from pageable memory), memcpy,
    alloc, or other."""
    if "aunch" in name:
        return "launch"
    if "emcpy" in name:
        kind = hev.memcpy_kind.get(hev.corr.get(row, -1), "")
        if "Pageable" in kind:
            return "pageable"
        return "sync" if name in SYNC_CALLS else "memcpy"
    if name in SYNC_CALLS:
        return "sync"
    return "alloc" if name.startswith(ALLOC_CALLS) else "other"


_COMPILE = ("Torch-Compiled Region", "TorchDynamo", "CompiledFunction", "Compiled Fx", "CompiledFxGraph",
            "inductor", "dynamo")


def _row_class(hev, row: int, parent_op: dict) -> tuple[str, str]:
    """(class, display name) of one charged row; a cpu_op's class is settled per op name later."""
    if row == NONE:
        return "unrecorded", "(no CPU event)"
    name, cat = hev.names[hev.name[row]], hev.cat[row]
    if cat in (1, 2):
        kind = runtime_kind(name, row, hev)
        op = parent_op.get(row, NONE)
        where = f"{name} in {hev.names[hev.name[op]]}" if op != NONE else name
        return {"sync": ("sync_wait", where), "pageable": ("pageable_memcpy", where),
                "alloc": ("allocator", name)}.get(kind, ("launch_bound", name))
    if cat == 0:
        return ("compile" if any(c in name for c in _COMPILE) else "op"), name
    if any(c in name for c in _COMPILE):
        return "compile", name
    return "launch_bound", f"{name} (Python, no op)"


def _groups(hev, ch: dict, n: int) -> dict:
    """(class, name) -> {"us": total, "per_step": [us], "rows": [(row, its us)], "cat": ...}."""
    groups: dict = {}
    charged = [(row, per, False) for row, per in ch["by_row"].items()]
    memo: dict = {}
    for row, per, long_ in charged + [(row, per, True) for row, per in ch.get("long", {}).items()]:
        op = ch["parent_op"].get(row, NONE)
        key = None if row == NONE or "emcpy" in hev.names[hev.name[row]] else \
            (hev.name[row], hev.cat[row], hev.name[op] if op != NONE else NONE)
        got = memo.get(key) if key is not None else None
        cls, name = got if got is not None else _row_class(hev, row, ch["parent_op"])
        if key is not None:
            memo[key] = (cls, name)
        if long_ and cls == "launch_bound":      # Python in no op for a millisecond or more at a time
            cls, name = "host_code_no_op", name.replace(" (Python, no op)", "")
        g = groups.setdefault((cls, name), {"us": 0.0, "per_step": [0.0] * n, "rows": [], "cat": None})
        tot = sum(per.values())
        g["us"] += tot
        for w, x in per.items():
            g["per_step"][w] += x
        g["rows"].append((row, tot))
        g["cat"] = "none" if row < 0 else ("cpu_op", "cuda_runtime", "cuda_driver", "user_annotation",
                                           "python_function")[hev.cat[row]]
    out: dict = {}
    for (cls, name), g in groups.items():    # a cpu_op: host work when one call held the GPU >= 1 ms
        if cls == "op":
            heavy = [r for r, tot in g["rows"] if tot >= HEAVY_CALL_US]
            cls = _shape_class(hev, heavy)[0] if heavy else "launch_bound"
        out[(cls, name)] = g
    return out


def _shape_class(hev, heavy: list[int]) -> tuple[str, str]:
    """(per_shape_host_work | host_work_in_op, the Input Dims evidence in words) of an op's heavy calls."""
    heavy = sorted(heavy, key=lambda r: hev.ts[r])
    dims = [hev.dims.get(r) for r in heavy]
    if len(heavy) < 2 or any(d is None for d in dims):
        why = "one slow call" if len(heavy) < 2 else "Input Dims not recorded"
        return "host_work_in_op", why
    keys = [repr(d) for d in dims]
    if len(set(keys)) < len(keys):
        return "host_work_in_op", "the slow calls repeat a shape: host work on every call, not per shape"
    return "per_shape_host_work", "each slow call had Input Dims no other slow call had: " + _varying(dims)


def _varying(dims: list) -> str:
    """'input 1 dim 2: 130, 131, 132' for the positions where the calls' Input Dims differ."""
    parts = []
    for i in range(max(len(d) for d in dims)):
        col = [d[i] if i < len(d) else None for d in dims]
        if all(isinstance(c, list) for c in col) and len({len(c) for c in col}) == 1:
            for j in range(len(col[0])):
                vals = [c[j] for c in col]
                if len(set(map(repr, vals))) > 1:
                    parts.append(f"input {i} dim {j}: " + ", ".join(map(str, vals)))
        elif len(set(map(repr, col))) > 1:
            parts.append(f"input {i}: " + ", ".join(map(str, col)))
    return "; ".join(parts[:3]) or "the shapes differ"


def _what(cls: str, names: list[str], g: dict, hev, ch: dict, n: int, launch: tuple[int, float]) -> str:
    """The evidence of one cause, in words."""
    if cls in ("per_shape_host_work", "host_work_in_op"):
        heavy = sorted(((r, tot) for r, tot in g["rows"] if tot >= HEAVY_CALL_US), key=lambda rt: hev.ts[rt[0]])
        ms = [tot / 1e3 for _, tot in heavy]
        heavy = [r for r, _ in heavy]
        calls = len(g["rows"])
        text = (f"{len(heavy)} of {calls} calls kept the GPU idle {min(ms):.1f}-{max(ms):.1f} ms each "
                f"(no kernel ran meanwhile); {_shape_class(hev, heavy)[1]}")
        if cls == "per_shape_host_work" and "cudnn" in names[0].lower():
            text += ("; cuDNN builds an execution plan for each new shape (a new sequence length each decode "
                     "step): pad or bucket the lengths, or use the flash / efficient SDPA backend")
        return text
    if cls == "sync_wait":
        k = sum(ch["sync_gaps"].get(r, 0) for r, _ in g["rows"])
        return (f"{k / n:.0f} idle gap(s) per step opened while the host waited in a synchronising call "
                f"({', '.join(names[:3])}): the GPU ran dry and idled until the host launched again")
    if cls == "launch_bound":
        nl, us = launch
        gaps = sum(ch["gaps"]) / n
        return (f"{nl / n:.0f} launch calls per step ({us / max(nl, 1):.1f} us each, {us / n / 1e3:.2f} ms), "
                f"dispatch of small ops and Python between them; the idle is spread over {gaps:.0f} gaps "
                f"per step: the GPU waits for each launch")
    return {"pageable_memcpy": "copies from pageable memory: the host stages each copy and waits",
            "compile": "torch.compile regions held the GPU idle (a compile or recompile inside the step)",
            "allocator": "device memory allocations (the caching allocator growing)",
            "host_code_no_op": "the launching thread ran host code in no recorded op for a millisecond or more at a "
                               "time, inside the range named: the trace does not say what (Python; torch.profiler's "
                               "with_stack=True would name the functions)",
            "unrecorded": "the launching thread was in no recorded event: the trace does not say what the host did "
                          "(Python outside the step ranges, or work the profiler does not record)"}[cls]


def causes_of(hev, ch: dict, n: int, n_launch: int, launch_us: float) -> dict:
    """The host block of one regime: the idle per step, the causes ranked by the idle they explain,
    the host events ranked the same way, and a one-line summary."""
    groups = _groups(hev, ch, n)
    idle = sum(ch["idle_us"]) or 1.0
    merged: dict = {}
    for (cls, name), g in groups.items():   # one cause per heavy op; the other classes are one cause each
        key = (cls, name) if cls in ("per_shape_host_work", "host_work_in_op") else (cls, "")
        m = merged.setdefault(key, {"us": 0.0, "per_step": [0.0] * n, "rows": [], "names": []})
        m["us"] += g["us"]
        m["per_step"] = [x + y for x, y in zip(m["per_step"], g["per_step"])]
        m["rows"] += g["rows"]
        m["names"].append((g["us"], name))
    causes = []
    for (cls, _), m in sorted(merged.items(), key=lambda kv: -kv[1]["us"]):
        names = [nm for _, nm in sorted(m["names"], reverse=True)]
        causes.append({"cause": cls, "ms_per_step": m["us"] / n / 1e3, "pct_of_idle": 100.0 * m["us"] / idle,
                       "steps": sum(1 for x in m["per_step"] if x >= (HEAVY_CALL_US if cls.endswith("_op")
                                                                       or cls == "per_shape_host_work" else 1.0)),
                       "ops": names[:TOP_OPS], "per_step_ms": [round(x / 1e3, 3) for x in m["per_step"]],
                       "evidence": _what(cls, names, m, hev, ch, n, (n_launch, launch_us))})
    ops = [{"name": name, "cat": g["cat"], "cause": cls, "ms_per_step": g["us"] / n / 1e3,
            "pct_of_idle": 100.0 * g["us"] / idle, "calls": len(g["rows"]),
            "steps": sum(1 for x in g["per_step"] if x > 0)}
           for (cls, name), g in sorted(groups.items(), key=lambda kv: -kv[1]["us"])][:TOP_OPS]
    out = {"idle_ms_per_step": idle / n / 1e3, "idle_gaps_per_step": sum(ch["gaps"]) / n,
           "launches_per_step": n_launch / n, "causes": causes, "ops": ops}
    out["summary"] = summary(out, n)
    return out


_PHRASE = {"per_shape_host_work": "per-shape host work in {op}", "host_work_in_op": "host work inside {op}",
           "sync_wait": "the host waiting in synchronising calls ({op})", "launch_bound": "launch-bound "
           "(launch calls, op dispatch and Python between small ops)", "pageable_memcpy": "copies from pageable "
           "memory ({op})", "compile": "torch.compile work ({op})", "allocator": "device memory allocation ({op})",
           "host_code_no_op": "host code in no recorded op inside {op} (the trace does not say what)",
           "unrecorded": "host time in no recorded event (the trace does not say what)"}


def phrase(c: dict) -> str:
    """One cause in words: '<what> <ms>/step (<pct>% of the idle[, k of n steps])'."""
    op = c["ops"][0] if c.get("ops") else ""
    what = _PHRASE.get(c["cause"], c["cause"]).format(op=op)
    if c["cause"] == "per_shape_host_work" and "cudnn" in op.lower():
        what = f"cuDNN re-planning for each new shape in {op}"
    return f"{what} {c['ms_per_step']:.1f} ms/step ({c['pct_of_idle']:.0f}% of the idle)"


def summary(block: dict, n: int) -> str:
    """The causes that explain most of the idle, in words (at most three, each >= 10% of it)."""
    cs = [c for c in block["causes"] if c["pct_of_idle"] >= 10.0][:3]
    if not cs:
        return "no single host activity explains 10% or more of the idle time"
    parts = []
    for c in cs:
        p = phrase(c)
        if c["cause"] in ("per_shape_host_work", "host_work_in_op") and c["steps"] < n:
            p += f" in {c['steps']} of {n} steps"
        parts.append(p)
    return "; ".join(parts)
