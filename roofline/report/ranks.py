"""The ranks of a multi-rank artifact as text: per head, each rank's GPU time in the kernel, the
spread and the slowest rank; the straggler; the aligned collectives with each rank's waiting share
(terminal table and markdown). Pure: lists of lines; roofline/report/artifact.py places them."""
from __future__ import annotations


def _f(x, fmt: str = ".3f") -> str:
    ok = isinstance(x, (int, float)) and not isinstance(x, bool) and abs(x) < 1e300
    return format(x, fmt) if ok else "-"


def _cells(vals, n: int, fmt: str) -> list[str]:
    """Exactly n cells, one per rank (a list of another length, or no list, reads as '-')."""
    vals = vals if isinstance(vals, list) and len(vals) == n else [None] * n
    return [_f(v, fmt) for v in vals]


def straggler_line(art: dict) -> str | None:
    r = art.get("ranks")
    if not isinstance(r, dict):
        return None
    st = r.get("straggler") or {}
    line = (f"{len(r.get('ranks', []))} ranks ({', '.join(f'rank {x}' for x in r.get('ranks', []))}, world size "
            f"{r.get('world_size')}{', ' + r['backend'] if r.get('backend') else ''}); straggler: rank {st.get('rank')}")
    if st.get("waited_for_ms") is not None:
        line += (f" (the other ranks waited {_f(st['waited_for_ms'])} ms for it at collectives, "
                 f"{_f(st.get('share_of_all_waiting'), '.0%')} of all waiting)")
    elif st.get("how"):
        line += f" ({st['how']})"
    wl = st.get("without_largest_wait")
    if isinstance(wl, dict) and wl.get("rank") is not None:
        line += (f"; without the one collective that waited the most, rank {wl['rank']} "
                 f"({_f(wl.get('waited_for_ms'))} ms)")
    return line


def head_rows(art: dict) -> tuple[list[str], list[list[str]]]:
    """(headers, rows): per analysed head, each rank's GPU time in it (ms), the spread, the slowest rank."""
    r = art.get("ranks") or {}
    ranks = r.get("ranks") or []
    hdr = ["#pct", "kernel"] + [f"rank {x} ms" for x in ranks] + ["spread", "slowest"]
    order = {n: i + 1 for i, n in enumerate(art.get("ranking_by_pct", []))}
    rows = []
    for e in art.get("entries", []):
        rb = e.get("ranks")
        if not isinstance(rb, dict):
            continue
        sn = e.get("short_name") or e["name"]
        rows.append([str(order.get(e["name"], "")), sn if len(sn) <= 48 else sn[:47] + "~"]
                    + _cells(rb.get("total_ms"), len(ranks), ".3f")
                    + [_f(rb.get("spread_rel"), ".1%"), f"rank {rb.get('slowest_rank')}"])
    return hdr, rows


def collective_rows(art: dict) -> tuple[list[str], list[list[str]]]:
    """(headers, rows): per aligned collective stream, each rank's waiting share and transfer time."""
    r = art.get("ranks") or {}
    ranks = r.get("ranks") or []
    hdr = ["collective", "kind", "count", "message elems"] + [f"rank {x} wait" for x in ranks] + \
          ["transfer ms (per rank)", "ends agree"]
    rows = []
    for c in r.get("collectives") or []:
        rows.append([str(c.get("collective")), str(c.get("kind")), str(c.get("instances")), str(c.get("message_elems"))]
                    + _cells(c.get("waiting_share"), len(ranks), ".0%")
                    + [" / ".join(_f(t) for t in c.get("transfer_ms", [])),
                       {"ok": "yes", None: "-"}.get(c.get("clock_check"), "NO (clocks?)")])
    return hdr, rows


def _text_table(hdr: list[str], rows: list[list[str]]) -> list[str]:
    w = [max(len(h), *(len(x[i]) for x in rows)) for i, h in enumerate(hdr)]
    line = lambda cells: "  ".join(c.ljust(n) for c, n in zip(cells, w)).rstrip()  # noqa: E731
    return [line(hdr), line(["-" * n for n in w])] + [line(x) for x in rows]


def table_lines(art: dict) -> list[str]:
    """The terminal block under the main table (empty for one rank)."""
    s = straggler_line(art)
    if s is None:
        return []
    out = ["", s]
    hdr, rows = head_rows(art)
    if rows:
        out += _text_table(hdr, rows)
    chdr, crows = collective_rows(art)
    if crows:
        out += ["", "collectives aligned across ranks (wait = share of the collective's time spent before the last "
                    "rank arrived):"] + _text_table(chdr, crows)
    return out


def _md_table(hdr: list[str], rows: list[list[str]]) -> list[str]:
    return (["| " + " | ".join(hdr) + " |", "|" + "|".join("---" for _ in hdr) + "|"]
            + ["| " + " | ".join(c.replace("|", "/") for c in x) + " |" for x in rows])


def md_lines(art: dict) -> list[str]:
    """The markdown section `## Ranks` (empty for one rank)."""
    s = straggler_line(art)
    if s is None:
        return []
    L = ["", "## Ranks", "", s + ".", "",
         "Per head: each rank's GPU time in the kernel over the profiled window, the spread ((max - min) / median) "
         "and the slowest rank. `% GPU` above is the mean of the ranks' shares; `t_ms` the median of their "
         "per-launch times.", ""]
    hdr, rows = head_rows(art)
    L += _md_table(hdr, rows) if rows else ["_No head entry carries per-rank figures._"]
    chdr, crows = collective_rows(art)
    if crows:
        L += ["", "Collectives, aligned across ranks by their order (the Nth on every rank): `wait` is the share of "
                  "a rank's collective time spent before the last rank arrived; the rest is transfer, which the "
                  "interconnect roof judges (docs/method.md).", ""] + _md_table(chdr, crows)
        for c in (art.get("ranks") or {}).get("collectives") or []:
            if c.get("clock_check") not in (None, "ok"):
                L.append(f"- {c.get('collective')}: {c['clock_check']}")
    return L
