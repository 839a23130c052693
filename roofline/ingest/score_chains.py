"""Eager attention's score chains in a trace (docs/method.md section 12), read once by `roofline topn`
into the Top-N's ``trace_evidence.score_chains``.

transformers' eager attention (attn_implementation="eager") writes the score matrix [batch, heads,
q_len, kv_len] to HBM and reads it back op by op: the QK^T batched GEMM (aten::bmm [b x h, q, d] x
[b x h, d, kv]) writes it, then the scale (mul), the mask (add / masked_fill / where), gpt-oss's sink
column (a cat along the last dim), the max and sub of a stable softmax, the softmax (with its fp32
upcast and cast back: copy_), and the PV batched GEMM ([b x h, q, kv] x [b x h, kv, d]) reads it.

A chain here is what the trace shows of that: a QK^T bmm, then the op calls launched right after it in
GPU order, in the same step range, each reading the tensor the one before it wrote (the same dims, or
the same elements with the same last dim: roofline.ingest.evidence's dataflow rule), up to the PV bmm
over the same [b x h, q, kv]. Only complete chains are kept. Chains of the same signature (layers,
steps) are one record: {regime, batch, heads, q_len, kv_len, head_dim, extra_cols (columns a cat
appended: attention sinks), mask (the dims of a [b | 1, 1, q, kv] tensor the chain adds), dtype (of Q),
chains (how many ran), links: [{op, kernels (full names), dims, shape (the Top-N shape the kernel's
op class gives the op, without op_launches)}]}. What the dims ARE (config.json's heads and head_dim)
is the op-class rule's business (roofline/core/opclasses/eager_attention.py). Pure functions of a
ParsedTrace."""
from __future__ import annotations

import bisect
from math import prod

from roofline.core import opclasses
from roofline.ingest.evidence import _launch_sigs, _same_tensor, _tensor_dims, out_dims
from roofline.core.opclasses.aten import dtype_of, tensor_list

BMM_OPS = ("aten::bmm", "aten::matmul")
SPLIT_KEY = "op_launches"      # roofline.ingest.topn's per-launch split of an op call: not part of the op
LINKS_MAX = 16                 # a chain longer than this between QK^T and PV is no eager attention


def _launch_ext(pt) -> list[int]:
    """The External id of the op call each launch belongs to (-1: none)."""
    corr = None
    out = []
    for i in range(pt.n_kernels):
        x = pt.k_ext[i]
        if x < 0:
            corr = pt.corr_ext if corr is None else corr
            x = corr.get(pt.k_corr[i], -1)
        out.append(int(x))
    return out


def _steps(pt, cpu_r: dict, gpu_r: dict) -> list[tuple[int, str | None]]:
    """(step range index, its regime) of each launch; (-1, None) outside every range (GPU-side ranges
    where the trace has them, else the launch's CPU time in the CPU-side ones: as roofline.ingest.topn)."""
    ivs = sorted((r.ts_us, r.ts_us + r.dur_us, reg) for reg, v in (gpu_r or cpu_r or {}).items() for r in v)
    starts = [a for a, _, _ in ivs]
    corr_ts = pt.corr_ts if not gpu_r else {}
    out = []
    for i in range(pt.n_kernels):
        t = pt.k_ts[i] if gpu_r else corr_ts.get(pt.k_corr[i])
        j = bisect.bisect_right(starts, t) - 1 if t is not None and starts else -1
        out.append((j, ivs[j][2]) if j >= 0 and t <= ivs[j][1] else (-1, None))
    return out


def _calls(pt, cpu_r: dict, gpu_r: dict) -> list[dict]:
    """The op calls in GPU start order: consecutive launches of one External id are one call
    {sig, kernels, step, regime}; launches linked to no op are calls of their own (sig None)."""
    sig_of, ext, steps = _launch_sigs(pt), _launch_ext(pt), _steps(pt, cpu_r, gpu_r)
    import numpy as np

    order = np.argsort(np.frombuffer(pt.k_ts, dtype=np.float64), kind="stable").tolist()
    out: list[dict] = []
    for i in order:
        name = pt.kernel_names[pt.k_name[i]]
        if out and ext[i] >= 0 and out[-1]["ext"] == ext[i]:
            out[-1]["kernels"].append(name)
            continue
        out.append({"ext": ext[i], "sig": sig_of[i], "kernels": [name], "step": steps[i][0], "regime": steps[i][1]})
    return out


def _qk(sig) -> tuple[int, int, int, int] | None:
    """(B, q, kv, d) of a QK^T batched GEMM [B, q, d] x [B, d, kv] (B >= 2), else None."""
    ts = _tensor_dims(sig)
    if sig.name not in BMM_OPS or len(ts) != 2 or len(ts[0]) != 3 or len(ts[1]) != 3:
        return None
    (B, q, d), (B2, d2, kv) = ts
    return (B, q, kv, d) if B == B2 and d == d2 and B >= 2 and kv >= 1 else None


def _is_pv(sig, B: int, q: int, kv: int, d: int) -> bool:
    """The PV batched GEMM of the chain: [B, q, kv] x [B, kv, d]."""
    ts = _tensor_dims(sig)
    return sig.name in BMM_OPS and len(ts) == 2 and ts[0] == (B, q, kv) and ts[1] == (B, kv, d)


def _walk(calls: list[dict], sigs, i: int) -> dict | None:
    """The chain that starts at the QK^T call i, or None where it does not reach its PV bmm."""
    B, q, kv, d = _qk(sigs[calls[i]["sig"]])
    cur, links, extra, mask, bh = (B, q, kv), [calls[i]], 0, None, None
    for c in calls[i + 1:i + 2 + LINKS_MAX]:
        if c["sig"] is None or c["step"] != calls[i]["step"]:
            return None
        sig = sigs[c["sig"]]
        if _is_pv(sig, B, q, kv, d):
            links.append(c)
            return {"B": B, "q": q, "kv": kv, "d": d, "bh": bh, "extra": extra, "mask": mask, "links": links}
        ts = _tensor_dims(sig)
        if not any(_same_tensor(cur, t) for t in ts):
            return None
        for t in ts:
            if len(t) == 4 and t[2:] == (q, cur[-1]) and t[0] * t[1] == B:
                bh = bh or (t[0], t[1])
            elif len(t) == 4 and t[1] == 1 and t[2:] == (q, kv) and B % t[0] == 0:
                mask = list(t)
        lst = tensor_list(sig) or []
        if sig.name in ("aten::cat", "aten::_cat") and lst and sig.concrete[1:2] in (("-1",), (str(len(lst[0]) - 1),)):
            extra += sum(x[-1] for x in lst[1:])
        o = out_dims(sig)
        if o is not None and prod(o) >= prod(cur) and len(o) >= 3:
            cur = o
        links.append(c)
    return None


def _shape(cls: str | None, sig) -> dict | None:
    r = opclasses.trace_shape(cls, sig) if cls else None
    return {k: v for k, v in r[0].items() if k != SPLIT_KEY} if r else None


def score_chains(pt, cpu_r: dict, gpu_r: dict, classes: dict[str, str]) -> list[dict]:
    """Every complete score chain of the trace, one record per signature (module docstring).
    ``classes``: {kernel name: op class} of the Top-N's entries (the shape each link's kernel gives)."""
    if not pt.sigs or pt.n_kernels < 3:
        return []
    calls, sigs = _calls(pt, cpu_r, gpu_r), pt.sigs
    recs: dict[tuple, dict] = {}
    for i, c in enumerate(calls):
        if c["sig"] is None or _qk(sigs[c["sig"]]) is None:
            continue
        ch = _walk(calls, sigs, i)
        if ch is None or ch["bh"] is None:
            continue
        key = (c["regime"], tuple((x["sig"], tuple(x["kernels"])) for x in ch["links"]))
        r = recs.get(key)
        if r is None:
            b, h = ch["bh"]
            t0 = sigs[c["sig"]].types[0] if sigs[c["sig"]].types else ""
            r = recs[key] = {
                "regime": c["regime"], "batch": b, "heads": h, "q_len": ch["q"], "kv_len": ch["kv"],
                "head_dim": ch["d"], "extra_cols": ch["extra"], "mask": ch["mask"], "dtype": dtype_of(t0),
                "chains": 0,
                "links": [{"op": sigs[x["sig"]].name, "kernels": sorted(set(x["kernels"])),
                           "dims": [list(t) for t in _tensor_dims(sigs[x["sig"]])],
                           "shape": _shape(classes.get(x["kernels"][0]), sigs[x["sig"]])} for x in ch["links"]]}
        r["chains"] += 1
    return list(recs.values())
