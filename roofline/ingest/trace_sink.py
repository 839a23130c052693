"""The sink every trace reader folds events into: one :class:`Sink` per ParsedTrace, fed either
decoded events (``handle``: the ijson path, the fast path's fallbacks) or the raw bytes of the
fields the fast path read in place (``kernel_fields``, ``launch_fields``, ``cpu_op_bytes``,
``cpu_op_key``). Kernel names and cpu_op signatures are interned here."""
from __future__ import annotations

import json
from collections import Counter

from roofline.ingest.trace_tables import (MAX_DUR_US, NO_KERNEL_OPS, USED_CATS, OpSig, ParsedTrace, Range,
                                          TraceError, dims3, freeze, num, to_int)


class Sink:
    """Folds events (dicts) into a ParsedTrace; shared by the fast path and the ijson path."""

    def __init__(self, pt: ParsedTrace, rxs, keep_all_ops: bool):
        self.pt, self.rxs, self.keep_all_ops = pt, rxs, keep_all_ops
        self.name_idx: dict[str, int] = {}
        self.sig_idx: dict[tuple, int] = {}
        self.bsig: dict[tuple, int] = {}
        self.ksig: dict[tuple, int] = {}
        self.name_idx_b: dict[bytes, int] = {}
        self.dims_b: dict[tuple, tuple] = {}
        self.n = 0
        # one reader per used "cat" (USED_CATS): handle dispatches through this table
        self._by_cat = {"kernel": self._kernel, "cpu_op": self._cpu_op, "cuda_runtime": self._launch,
                        "cuda_driver": self._launch, "gpu_memcpy": self._mem, "gpu_memset": self._mem,
                        "user_annotation": self._range, "gpu_user_annotation": self._range}

    # ------------------------------------------------------------------ interning
    def kernel_index(self, name: str) -> int:
        """The index of a kernel name in pt.kernel_names (added on first sight)."""
        i = self.name_idx.get(name)
        if i is None:
            i = self.name_idx[name] = len(self.pt.kernel_names)
            self.pt.kernel_names.append(name)
            self.pt.launch_dims[i] = Counter()
        return i

    def sig_index(self, key: tuple) -> int:
        """The index of an (op name, dims, types, concrete) signature in pt.sigs (added on first sight)."""
        s = self.sig_idx.get(key)
        if s is None:
            s = self.sig_idx[key] = len(self.pt.sigs)
            self.pt.sigs.append(OpSig(*key))
        return s

    # ------------------------------------------------------------------ fields read in place
    def cpu_op_bytes(self, nm: bytes, ext: int, dims: bytes, types: bytes | None, conc: bytes | None,
                     strides: bytes | None = None) -> None:
        """A cpu_op seen only as raw bytes of its fields: decoded once per distinct signature."""
        self.n += 1
        key = (nm, dims, types, conc, strides)
        s = self.bsig.get(key)
        if s is None:
            s = self.bsig[key] = self.sig_index(
                (json.loads(nm.join((b'"', b'"'))), freeze(json.loads(dims)),
                 freeze(json.loads(types)) if types else (), freeze(json.loads(conc)) if conc else (),
                 freeze(json.loads(strides)) if strides else ()))
        if ext >= 0:
            self.pt.op_ext.append(ext)
            self.pt.op_sig.append(s)

    def kernel_fields(self, nm: bytes, ts: bytes, dur: bytes, ext: bytes, dev: bytes | None, corr: bytes,
                      grid: bytes, block: bytes) -> None:
        """A kernel item read in place by trace_fast.kernel_at (raw bytes of its fields)."""
        self.n += 1
        pt = self.pt
        i = self.name_idx_b.get(nm)
        if i is None:
            name = json.loads(b'"' + nm + b'"') if b"\\" in nm else nm.decode("utf-8", "replace")
            i = self.name_idx_b[nm] = self.kernel_index(name)
        d_us = float(dur)
        if not 0.0 <= d_us <= MAX_DUR_US:
            raise TraceError(f"a kernel's dur is {dur.decode(errors='replace')[:40]}, expected a finite time >= 0")
        pt.k_name.append(i)
        pt.k_ts.append(num(float(ts), "ts"))
        pt.k_dur.append(d_us)
        pt.k_ext.append(int(ext))
        pt.k_corr.append(int(corr))
        pt.k_dev.append(-1 if dev is None else int(dev))
        key = (grid, block)
        d = self.dims_b.get(key)
        if d is None:
            d = self.dims_b[key] = (tuple(int(v) for v in grid.split(b",") if v.strip()),
                                    tuple(int(v) for v in block.split(b",") if v.strip()))
        pt.launch_dims[i][d] += 1

    def launch_fields(self, ts: bytes, ext: bytes, corr: bytes) -> None:
        self.n += 1
        self.pt.l_corr.append(int(corr))
        self.pt.l_ext.append(int(ext))
        self.pt.l_ts.append(float(ts))

    def cpu_op_key(self, nm: bytes, ext: int, key: bytes) -> bool:
        """A cpu_op given as its name and the raw bytes of its signature args; False: not decodable."""
        s = self.ksig.get((nm, key))
        if s is None:
            try:
                d = json.loads(b"{" + key + b"}")
                name = json.loads(b'"' + nm + b'"')
            except ValueError:
                return False
            if not isinstance(d, dict):
                return False
            dims = d.get("Input Dims")
            s = -1 if dims is None else self.sig_index(
                (name, freeze(dims), freeze(d.get("Input type") or ()), freeze(d.get("Concrete Inputs") or ()),
                 freeze(d.get("Input Strides") or ())))
            self.ksig[(nm, key)] = s
        self.n += 1
        if s >= 0:
            self.pt.op_ext.append(ext)
            self.pt.op_sig.append(s)
        return True

    # ------------------------------------------------------------------ decoded events
    def handle(self, e) -> None:
        """One decoded event: the reader of its "cat" (events of other categories are only counted)."""
        self.n += 1
        if not isinstance(e, dict):
            return
        cat = e.get("cat")
        if cat in USED_CATS:
            if not isinstance(e.get("name", ""), str):
                raise TraceError(f"a {cat} event's name is {type(e.get('name')).__name__}, expected a string")
            self._by_cat[cat](e, cat)

    def _kernel(self, e: dict, cat: str) -> None:
        pt = self.pt
        ts_us, dur_us = num(e.get("ts", 0.0), "ts"), num(e.get("dur", 0.0), "dur")
        if not 0.0 <= dur_us <= MAX_DUR_US:
            raise TraceError(f"a kernel's dur is {dur_us}, expected a time >= 0 (us) below {MAX_DUR_US:g}")
        i = self.kernel_index(e.get("name", ""))
        args = e.get("args") or {}
        if not isinstance(args, dict):
            raise TraceError(f"a kernel's args is {type(args).__name__}, expected an object")
        pt.k_name.append(i)
        pt.k_ts.append(ts_us)
        pt.k_dur.append(dur_us)
        pt.k_ext.append(to_int(args.get("External id")))
        pt.k_corr.append(to_int(args.get("correlation")))
        pt.k_dev.append(to_int(args.get("device")))
        g, b = dims3(args.get("grid")), dims3(args.get("block"))  # provenance: a malformed one is dropped
        if g is not None or b is not None:
            pt.launch_dims[i][(g, b)] += 1

    def _cpu_op(self, e: dict, cat: str) -> None:
        args = e.get("args")
        if not args:
            return
        dims = args.get("Input Dims")
        if dims is None:
            return
        nm = e.get("name", "")
        if nm in NO_KERNEL_OPS and not self.keep_all_ops:
            return
        s = self.sig_index((nm, freeze(dims), freeze(args.get("Input type") or ()),
                            freeze(args.get("Concrete Inputs") or ()), freeze(args.get("Input Strides") or ())))
        ext = to_int(args.get("External id"))
        if ext >= 0:
            self.pt.op_ext.append(ext)
            self.pt.op_sig.append(s)

    def _launch(self, e: dict, cat: str) -> None:
        args = e.get("args")
        if not args:
            return
        c = to_int(args.get("correlation"))
        if c < 0:
            return
        nm = e.get("name", "")
        if "aunch" not in nm and "emcpy" not in nm and "emset" not in nm:
            return
        self.pt.l_corr.append(c)
        self.pt.l_ext.append(to_int(args.get("External id")))
        self.pt.l_ts.append(num(e.get("ts", 0.0), "ts"))

    def _mem(self, e: dict, cat: str) -> None:
        nm = e.get("name", "")
        dur = num(e.get("dur", 0.0), "dur")
        self.pt.mem[nm] += dur
        self.pt.mem_count[nm] += 1
        self.pt.m_ts.append(num(e.get("ts", 0.0), "ts"))
        self.pt.m_dur.append(dur)

    def _range(self, e: dict, cat: str) -> None:
        nm = e.get("name", "")
        if nm.startswith("ProfilerStep#") or any(r.search(nm) for r in self.rxs):
            args = e.get("args") or {}
            self.pt.ranges.append(Range(nm, num(e.get("ts", 0.0), "ts"), num(e.get("dur", 0.0), "dur"),
                                        cat == "gpu_user_annotation", to_int(args.get("External id"))))
