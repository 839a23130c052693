"""Match counter records to Top-N entries by kernel name.

Three passes, each only over what the earlier ones left:
1. exact name;
2. canonical name: templates KEPT, argument list, return type, namespaces, casts and literal
   suffixes dropped (the PyTorch profiler, the ncu 2025.3.1 CLI and ncu_report print one kernel
   as `void at::native::vectorized_elementwise_kernel<8, ...CUDAFunctor_add<c10::BFloat16>,
   std::array<char*, 3ul> >(int, ...)`, `void at::vectorized_elementwise_kernel<8, at::CUDAFunctor_add
   <c10::BFloat16>, std::array<char *, 3>>` and `...<(int)8, ..., (unsigned long)3>>(int, T2, T3)`);
3. short name (templates dropped too), only where it is UNIQUE on both sides: on the H200
   fixture a bf16 add and an fp32 mul are both `vectorized_elementwise_kernel`, and a short-name
   match there would silently swap their counters.

Counter records that match no entry are returned by name: the caller reports them.
"""
from __future__ import annotations

import re

from .base import KernelCounters

_ANON = re.compile(r"\((?:anonymous namespace|anonymous)\)::")
_CAST = re.compile(r"\((?:(?:unsigned|signed|const)\s+)*(?:int|long|long long|short|char|bool|unsigned|"
                   r"size_t|int\d+_t|uint\d+_t)\)")
_LIT = re.compile(r"\b(\d+)(?:ull|ul|ll|u|l)\b", re.IGNORECASE)
_NS = re.compile(r"\b[A-Za-z_]\w*::")
_WS = re.compile(r"\s+")


def _strip_args(name: str) -> str:
    """Drop a trailing top-level '( ... )' argument list (and a ' [clone ...]' tail)."""
    s = name.strip()
    s = re.sub(r"\s*\[clone [^\]]*\]$", "", s)
    if not s.endswith(")"):
        return s
    depth = 0
    for i in range(len(s) - 1, -1, -1):
        c = s[i]
        if c == ")":
            depth += 1
        elif c == "(":
            depth -= 1
            if depth == 0:
                head = s[:i].rstrip()
                # a function name must precede it; '(anonymous namespace)' alone is not an arg list
                return head if head and (head[-1].isalnum() or head[-1] in "_>") else s
    return s


def canonical_name(name: str) -> str:
    s = _strip_args(name)
    if s.startswith("void "):
        s = s[5:]
    s = _ANON.sub("", s)
    s = _CAST.sub("", s)
    s = _LIT.sub(r"\1", s)
    s = re.sub(r"\bfalse\b", "0", s)
    s = re.sub(r"\btrue\b", "1", s)
    s = _NS.sub("", s)
    return _WS.sub("", s)


def short_name(name: str) -> str:
    """The project's one short-name rule (roofline/classify.py), so both sides of a match agree."""
    from roofline.classify import short_name as _sn

    return _sn(name)


def match(entries: list[dict], counters: list[KernelCounters]
          ) -> tuple[dict[str, KernelCounters], list[str]]:
    """-> ({entry name: KernelCounters}, [names of counter records matched to no entry]).

    An entry is a Top-N dict with a "name" key. One counter record may serve several entries
    (the same kernel listed twice); an entry gets at most one record.
    """
    names = [e.get("name") for e in entries if isinstance(e, dict) and e.get("name")]
    out: dict[str, KernelCounters] = {}
    used: set[int] = set()

    by_exact: dict[str, int] = {}
    for i, kc in enumerate(counters):
        by_exact.setdefault(kc.name, i)
    for n in names:
        if n in by_exact:
            out[n] = counters[by_exact[n]]
            used.add(by_exact[n])

    def unique_pass(key):
        left = [n for n in names if n not in out]
        if not left:
            return
        ckeys: dict[str, list[int]] = {}
        for i, kc in enumerate(counters):
            ckeys.setdefault(key(kc.name), []).append(i)
        ekeys: dict[str, list[str]] = {}
        for n in left:
            ekeys.setdefault(key(n), []).append(n)
        for k, ens in ekeys.items():
            idx = [i for i in ckeys.get(k, []) if i not in used] or ckeys.get(k, [])
            if len(idx) == 1 and len(ens) == 1:
                out[ens[0]] = counters[idx[0]]
                used.add(idx[0])

    unique_pass(canonical_name)
    unique_pass(short_name)
    unmatched = [kc.name for i, kc in enumerate(counters) if i not in used]
    return out, unmatched
