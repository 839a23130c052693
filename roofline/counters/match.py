"""Match counter records to Top-N entries by kernel name: THE kernel-name normaliser.

Three passes, each only over what the earlier ones left:
1. exact name;
2. canonical name (`canonical_name`): one spelling for the forms the PyTorch profiler, the ncu
   CLI and ncu_report (NameBase_DEMANGLED) print for one kernel, e.g.
   `void at::native::vectorized_elementwise_kernel<8, ...CUDAFunctor_add<c10::BFloat16>,
   std::array<char*, 3ul> >(int, ...)`, `void at::vectorized_elementwise_kernel<8, at::CUDAFunctor_add
   <c10::BFloat16>, std::array<char *, 3>>` and `...<(int)8, ..., (unsigned long)3>>(int, T2, T3)`;
3. short name (templates dropped too), only where it is UNIQUE on both sides and one side names
   no template arguments (ncu's `--print-kernel-base function`, a hand-written Top-N): on the H200
   fixture a bf16 add and an fp32 mul are both `vectorized_elementwise_kernel`, and a bf16 and an
   fp32 multiply both `vectorized_elementwise_kernel[MulFunctor]`; a short-name match of two
   spelled-out instantiations would silently swap their counters.

The canonical form is made by general rules, not a list of kernels: an Itanium-mangled name
(`_ZN7cutlass13device_kernel...`, as a trace may carry it) is demangled first (`demangle`:
the PyPI package cxxfilt, i.e. the C++ runtime's own abi::__cxa_demangle; the mangled name is kept
where it is not available); then the argument list, a `[clone ...]` tail and the `void` return
type are dropped; lambdas are written one way (`[lambda(T) (instance N)]` of NVIDIA's demangler,
`{lambda(T)#N}` of the Itanium one -> `{lambda(T)#N}`); anonymous namespaces (`(anonymous
namespace)::`, `<unnamed>::`, `{anonymous}::`), casts before literals (`(int)128`, `(unsigned
long)3`, `(bool)0`, `(cutlass::Enum)2`), literal suffixes (`3ul`), `true`/`false`, `const` and
`volatile`, every namespace or class qualifier and all whitespace go.

4. identifiers, for a mangled Top-N name the demangler refuses (a long CUTLASS instantiation):
   the identifiers of the counter's readable name all spelled in the mangled one, unique both
   ways (`_by_identifiers`).

Counter records that match no entry are returned by name: the caller reports them.
"""
from __future__ import annotations

import functools
import re

from roofline.io.kernelnames import demangle, short_name  # noqa: F401  (the one demangler and short-name rule)

from .base import KernelCounters

_ANON = re.compile(r"(?:\((?:anonymous namespace|anonymous)\)|<unnamed>|\{anonymous\})::")
_LAMBDA_NV = re.compile(r"\[lambda\(([^()]*)\)\s*\(instance\s+(\d+)\)\]")
# a C-style cast before a literal: a parenthesised type name (words, '::', spaces) then a number
_CAST = re.compile(r"\(\s*[A-Za-z_][\w:]*(?:\s+[A-Za-z_][\w:]*)*\s*\)\s*(?=[-+]?\d)")
_LIT = re.compile(r"\b(\d+)(?:ull|ul|ll|u|l)\b", re.IGNORECASE)
_CV = re.compile(r"\b(?:const|volatile)\b")
_NS = re.compile(r"\b[A-Za-z_]\w*::|(?<![\w>])::")
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


@functools.lru_cache(maxsize=4096)
def canonical_name(name: str) -> str:
    s = _strip_args(demangle(name))
    if s.startswith("void "):
        s = s[5:]
    s = _LAMBDA_NV.sub(r"{lambda(\1)#\2}", s)
    s = _ANON.sub("", s)
    s = _CAST.sub("", s)
    s = _LIT.sub(r"\1", s)
    s = re.sub(r"\bfalse\b", "0", s)
    s = re.sub(r"\btrue\b", "1", s)
    s = _CV.sub("", s)
    s = _NS.sub("", s)
    return _WS.sub("", s)


def _templated(name: str) -> bool:
    c = canonical_name(name)
    return "<" in c or c.startswith("_Z")   # still mangled (no demangler): its arguments are unknown


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

    def unique_pass(key, by_short: bool):
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
            # one canonical name is one kernel: a record may serve it twice; a short name may not
            idx = [i for i in ckeys.get(k, []) if i not in used] or ([] if by_short else ckeys.get(k, []))
            if len(idx) != 1 or len(ens) != 1:
                continue
            if by_short and _templated(ens[0]) and _templated(counters[idx[0]].name):
                # both sides name their template arguments and they differ (else pass 2 had matched):
                # two instantiations (a bf16 and an fp32 mul), never one kernel
                continue
            out[ens[0]] = counters[idx[0]]
            used.add(idx[0])

    unique_pass(canonical_name, False)
    unique_pass(short_name, True)
    _by_identifiers(names, counters, out, used)
    _fold_reduces(entries, counters, out, used)
    unmatched = [kc.name for i, kc in enumerate(counters) if i not in used]
    return out, unmatched


@functools.lru_cache(maxsize=4096)
def _refused(name: str) -> bool:
    """A mangled name that the demangler is there for but cannot read (a long CUTLASS
    instantiation in a PyTorch trace: cxxfilt.InvalidName); False without a demangler."""
    if not name.startswith("_Z"):
        return False
    try:
        import cxxfilt
    except Exception:  # noqa: BLE001 - no demangler: the name stays mangled (and unmatched), as before
        return False
    try:
        cxxfilt.demangle(name)
    except Exception:  # noqa: BLE001 - InvalidName
        return True
    return False


_IDENT = re.compile(r"[A-Za-z_]\w*")
_NOT_NAMES = frozenset("void bool char short int long float double unsigned signed const volatile true false "
                       "struct class enum typename operator".split())


@functools.lru_cache(maxsize=4096)
def mangled_identifiers(name: str) -> frozenset:
    """Every source name an Itanium-mangled name may spell as <length><identifier>: for each run of
    digits, each of its suffixes read as a length n, followed by n identifier characters. NB: a
    superset (a literal such as `Li8E` may read as a spurious name; a name ending in digits, SM90,
    glues onto the next length): every real source name is in it."""
    out = set()
    for m in re.finditer(r"\d+", name):
        run = m.group()
        for k in range(len(run)):
            if run[k] == "0":
                continue
            n = int(run[k:])
            t = name[m.end():m.end() + n]
            if len(t) == n and _IDENT.fullmatch(t):
                out.add(t)
    return frozenset(out)


def _identifiers(name: str) -> frozenset:
    """The identifiers a demangled name spells (its argument list and builtin type words left out)."""
    return frozenset(w for w in _IDENT.findall(_strip_args(name)) if w not in _NOT_NAMES)


def _by_identifiers(names: list[str], counters: list[KernelCounters], out: dict, used: set) -> None:
    """A Top-N name the demangler refuses (_refused) and a readable counter name are one kernel when
    every identifier the readable one spells is in the mangled one (mangled_identifiers), each the
    only candidate of the other (two instantiations that differ only in numbers stay unmatched).
    NB: no short-name test: the two sides' short names differ (ncu's template-stripped name is not
    the mangled name's)."""
    left = [n for n in names if n not in out and _refused(n)]
    if not left:
        return
    free = [i for i, kc in enumerate(counters) if i not in used and not kc.name.startswith("_Z")]
    cand = {n: [i for i in free if _identifiers(counters[i].name) <= mangled_identifiers(n)] for n in left}
    for n, idx in cand.items():
        if len(idx) == 1 and sum(idx[0] in c for c in cand.values()) == 1:
            out[n] = counters[idx[0]]
            used.add(idx[0])


def folded_into(entries: list[dict], name: str) -> list[str]:
    """The names of the Top-N entries that list kernel `name` in their `folded_kernels`."""
    key = canonical_name(name)
    return [e["name"] for e in entries if isinstance(e, dict) and isinstance(e.get("folded_kernels"), list)
            and any(isinstance(f, dict) and isinstance(f.get("name"), str) and canonical_name(f["name"]) == key
                    for f in e["folded_kernels"])]


def _fold_reduces(entries: list[dict], counters: list[KernelCounters], out: dict, used: set) -> None:
    """A record of a kernel that a Top-N entry lists in `folded_kernels` (a split-K reduce that
    `roofline topn` folded into its GEMM: one logical op) is added to that entry's record, per
    launch of the entry (x folded launches / entry launches). Only where exactly one entry folds
    that kernel and the entry has a record; otherwise it stays unmatched (and is reported)."""
    from .aggregate import combine, scaled

    folds: dict[str, list[tuple[dict, float]]] = {}
    for e in entries:
        if not isinstance(e, dict) or not isinstance(e.get("folded_kernels"), list):
            continue
        n = e.get("launches")
        for f in e["folded_kernels"]:
            if isinstance(f, dict) and isinstance(f.get("name"), str):
                fl = f.get("launches")
                ratio = fl / n if isinstance(fl, (int, float)) and isinstance(n, (int, float)) and n > 0 else 1.0
                folds.setdefault(canonical_name(f["name"]), []).append((e, ratio))
    for i, kc in enumerate(counters):
        hit = folds.get(canonical_name(kc.name)) if i not in used else None
        if hit and len(hit) == 1 and hit[0][0].get("name") in out:
            e, ratio = hit[0]
            out[e["name"]] = combine(out[e["name"]], scaled(kc, ratio))
            used.add(i)
