"""The output of an advanced-indexing gather from the op that consumes it (docs/method.md section 13).

record_shapes records `aten::index(self, indices)` with the indices as an untyped list (`Input Dims`
`[[128, 1536, 2048], []]`, type ""): how many rows the gather selects, repeats included, is not in its
own record. The op that reads its output is: transformers' batched_mm experts gather the expert weights
per (token, expert) pair, `gate_up_proj[expert_ids]` -> [pairs, 2 x inter, hidden], and hand it to
`aten::bmm` whose first operand is exactly that; the eager per-expert loop gathers a token subset,
`hidden_states[token_idx]` -> [n, hidden], into `aten::mm` / `aten::linear`.

`resolve_index_outputs(pt)` finds, for each such call, the first kernel launched after the call's own
launches (at most LOOKAHEAD launches later, same device) whose op has a tensor argument of dims
(P, *table[1:]) with P != table[0]: the call's output is [P, *table[1:]]. The call's signature is then
replaced by one that carries the output as a third argument (types: the table's; Concrete Inputs:
the consumer's op name and the call's launches), which the streaming class's gather rule reads (roofline.core.opclasses.
gathers). A call whose consumer is not found keeps its signature (no shape: no guess).

Pure function of a ParsedTrace (roofline.ingest.trace_tables); a note says how many calls were resolved."""
from __future__ import annotations

from roofline.core.opclasses.aten import NON_TENSOR, dtype_of
from roofline.core.opclasses.index_gather import CONSUMER_TAG, INDEX_OPS, LAUNCHES_TAG
from roofline.ingest.trace_tables import OpSig

LOOKAHEAD = 6            # launches after the gather's last one searched for its consumer


def unrecorded_index(sig) -> bool:
    """aten::index whose index list is recorded without its tensors (dims [], type "")."""
    return (sig.name in INDEX_OPS and len(sig.dims) == 2 and isinstance(sig.dims[0], tuple) and len(sig.dims[0]) >= 2
            and sig.dims[1] in ((), None) and (sig.types[1] if len(sig.types) > 1 else "") == "")


def _rows_in(sig, tail: tuple, not_rows: int) -> int | None:
    """P where a tensor argument of ``sig`` has dims (P, *tail), P != not_rows; else None."""
    for i, d in enumerate(sig.dims):
        t = sig.types[i] if i < len(sig.types) else ""
        if t in NON_TENSOR or not isinstance(d, tuple) or len(d) != len(tail) + 1 or (d and isinstance(d[0], tuple)):
            continue
        if tuple(d[1:]) == tail and d[0] != not_rows and d[0] > 0:
            return int(d[0])
    return None


def resolve_index_outputs(pt) -> int:
    """Rewrite the signatures of unrecorded-index gathers whose consumer gives their output; -> calls resolved."""
    from roofline.ingest.evidence import _launch_sigs

    if not pt.sigs or not any(unrecorded_index(s) for s in pt.sigs):
        return 0
    sig_of = _launch_sigs(pt)
    order = sorted(range(pt.n_kernels), key=lambda i: pt.k_ts[i])
    corr_ext = pt.corr_ext
    # a launch's op: the External id of its own cpu_op (k_ext, else its runtime launch's)
    ext_of = {i: pt.k_ext[i] if pt.k_ext[i] >= 0 else corr_ext.get(pt.k_corr[i], -1) for i in order}
    resolved: dict[int, int] = {}       # External id -> new sig idx
    interned: dict[tuple, int] = {}
    for pos, i in enumerate(order):
        s = sig_of[i]
        if s is None or ext_of[i] in resolved or not unrecorded_index(pt.sigs[s]):
            continue
        sig = pt.sigs[s]
        table = tuple(int(x) for x in sig.dims[0])
        # one index tensor selects along dim 0: [P, *table[1:]]; two along dims 0, 1 (routing_weights[tok, pos]):
        # [P, *table[2:]], ...
        j = pos + 1
        while j < len(order) and ext_of[order[j]] == ext_of[i] and ext_of[i] >= 0:
            j += 1      # the same call's other launches (an op split over several)
        for k in order[j:j + LOOKAHEAD]:
            if pt.k_dev[k] != pt.k_dev[i] or sig_of[k] is None:
                continue
            c = pt.sigs[sig_of[k]]
            p, lead = next(((p, j) for j in range(1, len(table)) for p in [_rows_in(c, table[j:], table[0])]
                             if p is not None), (None, 0))
            if p is None:
                continue
            n_launch = sum(1 for m in order[pos:j] if ext_of[m] == ext_of[i]) if ext_of[i] >= 0 else 1
            key = (s, p, lead, c.name, n_launch)
            if key not in interned:
                interned[key] = len(pt.sigs)
                pt.sigs.append(OpSig(sig.name, (sig.dims[0], (), (p,) + table[lead:]),
                                     (sig.types[0], "", sig.types[0]),
                                     tuple(sig.concrete[:2]) + (CONSUMER_TAG + c.name, f"{LAUNCHES_TAG}{n_launch}"),
                                     tuple(sig.strides[:2]) if sig.strides else ()))
            resolved[ext_of[i]] = interned[key]
            break
    if not resolved:
        return 0
    for n, x in enumerate(pt.op_ext):
        if x in resolved:
            pt.op_sig[n] = resolved[x]
    pt.notes.append(f"{len(resolved)} aten::index calls (index list not recorded) sized from the op that consumes "
                    "their output (its operand [rows, *the table's trailing dims]: roofline.ingest.gathers)")
    return len(resolved)


def gather_records(pt) -> list[dict]:
    """The resolved gathers (Top-N trace_evidence.expert_gathers): {op, table, rows, consumer, consumer_dims,
    dtype}, one per distinct signature; what the necessary rules read to tell a batched GEMM fed by a
    per-pair gather of the expert weights (opclasses/expert_gather.py)."""
    out = []
    for s in pt.sigs:
        if s.name in INDEX_OPS and len(s.concrete) >= 3 and isinstance(s.concrete[2], str) \
                and s.concrete[2].startswith(CONSUMER_TAG):
            out.append({"op": s.name, "table": [int(x) for x in s.dims[0]], "rows": int(s.dims[2][0]),
                        "consumer": s.concrete[2][len(CONSUMER_TAG):], "dtype": dtype_of(s.types[0])})
    return out
