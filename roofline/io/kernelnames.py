"""A kernel name a person can read: templates, argument lists, return type and namespaces dropped
(`short_name`), a mangled name demangled. No op classes here: the counter readers pair names with
it, and roofline.core.classify re-exports it."""
from __future__ import annotations

import functools
import re

_GENERIC = {"elementwise_kernel", "vectorized_elementwise_kernel", "unrolled_elementwise_kernel",
            "reduce_kernel", "kernel", "Kernel", "Kernel2", "device_kernel", "triton_", "index_elementwise_kernel",
            "elementwise_kernel_with_index", "vectorized_templated_elementwise_kernel"}
_SKIP_INNER = {"ReduceOp", "gpu_kernel_impl", "gpu_kernel_impl_nocast", "launch_kernel", "BinaryFunctor",
               "AUnaryFunctor", "BUnaryFunctor", "UnaryFunctor", "launch_vectorized_kernel",
               "launch_legacy_kernel", "gpu_kernel", "gpu_kernel_nocast"}
_INNER_RE = re.compile(r"([A-Za-z_]\w*(?:Functor\w*|_kernel_cuda|_kernel|_functor|Ops))\b")
_MANGLED_ID_RE = re.compile(r"(\d+)")


def _strip_bracketed(s: str, open_ch: str, close_ch: str) -> tuple[str, list[str]]:
    """Remove every top-level open..close group; return the rest and the removed inner texts."""
    out, inner, depth, cur = [], [], 0, []
    for ch in s:
        if ch == open_ch:
            if depth == 0:
                cur = []
            else:
                cur.append(ch)
            depth += 1
        elif ch == close_ch and depth > 0:
            depth -= 1
            if depth == 0:
                inner.append("".join(cur))
            else:
                cur.append(ch)
        elif depth == 0:
            out.append(ch)
        else:
            cur.append(ch)
    return "".join(out), inner


@functools.lru_cache(maxsize=4096)
def demangle(name: str) -> str:
    """An Itanium-mangled name (`_Z...`) demangled; any other name, or one the demangler refuses
    or cannot be loaded for, unchanged."""
    s = name.strip()
    if not s.startswith("_Z"):
        return name
    try:
        import cxxfilt

        return cxxfilt.demangle(s)
    except Exception:  # noqa: BLE001 - not installed, no C++ runtime, or not a valid mangled name
        return name


def _readable(name: str) -> str:
    """A mangled name (`_Z...`, as a trace may carry it) demangled by the one demangler of the
    kernel-name normaliser (demangle, below); any other name unchanged."""
    if not name.lstrip().startswith("_Z"):
        return name
    return demangle(name)


def _demangle_base(name: str) -> str:
    """Last identifier of an Itanium-mangled name (_Z...), without a full demangler."""
    s = name[2:]
    if s.startswith("N"):
        s = s[1:]
    ids, i = [], 0
    while i < len(s):
        m = _MANGLED_ID_RE.match(s, i)
        if not m:
            break
        n = int(m.group(1))
        i = m.end()
        ids.append(s[i:i + n])
        i += n
        if i < len(s) and s[i] in "IE":
            break
    return ids[-1] if ids else name


def short_name(name: str) -> str:
    """A readable name: templates, argument lists, return type and namespaces dropped.

    Generic PyTorch launchers keep the functor that tells them apart, e.g.
    ``vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, ...>(...)`` ->
    ``vectorized_elementwise_kernel[FillFunctor]``.
    """
    if not name:
        return ""
    s = _readable(name.strip())
    if s.startswith("_Z"):   # no demangler here: the last identifier of the mangled name
        return _demangle_base(s)[:80]
    # Argument list: the last top-level (...) group; templates first so '<' inside args is safe.
    no_tmpl, tmpl_inner = _strip_bracketed(s, "<", ">")
    base, _ = _strip_bracketed(no_tmpl, "(", ")")
    base = base.strip()
    if base.startswith("void "):
        base = base[5:]
    base = base.split()[-1] if base.split() else base   # drop a return type
    base = base.split("::")[-1] or base
    if base in ("Kernel", "Kernel2", "device_kernel") and tmpl_inner:
        # CUTLASS: the kernel is named by its first template argument
        first, _ = _strip_bracketed(tmpl_inner[0], "<", ">")
        first = first.split(",")[0].strip().split("::")[-1]
        base = first or base
    elif base in _GENERIC and tmpl_inner:
        for cand in _INNER_RE.findall(" ".join(tmpl_inner)):
            if cand != base and cand not in _GENERIC and cand not in _SKIP_INNER:
                base = f"{base}[{cand}]"
                break
    return base[:120]
