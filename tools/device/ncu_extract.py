#!/usr/bin/env python3
"""Flatten an Nsight Compute report of NVTX-ranged steps into one JSON row per kernel launch:
the range it ran in (case and regime, from the NVTX push/pop stack), the demangled and mangled
names, grid/block, and every metric the report holds (base units). Uses the ncu_report module
(the `ncu-report` wheel, or the copy inside the Nsight Compute install).

    python3 tools/device/ncu_extract.py REPORT.ncu-rep -o rows.json
"""
import argparse
import json
import sys


def ranges_of(action):
    st = action.nvtx_state()
    out = []
    if st is None:
        return out
    for d in st.domains():
        out += [str(x) for x in st.domain_by_id(d).push_pop_ranges()]
    return out


def value(m):
    try:
        return m.as_double()
    except Exception:  # noqa: BLE001 - string metrics
        try:
            return m.as_string()
        except Exception:  # noqa: BLE001
            return None


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("report")
    ap.add_argument("-o", "--out", required=True)
    a = ap.parse_args(argv)
    import ncu_report
    rep = ncu_report.load_report(a.report)
    rows = []
    for ri in range(rep.num_ranges()):
        rg = rep.range_by_idx(ri)
        for ai in range(rg.num_actions()):
            act = rg.action_by_idx(ai)
            names = {}
            for key, base in (("name", act.NameBase_DEMANGLED), ("mangled", act.NameBase_MANGLED),
                              ("function", act.NameBase_FUNCTION)):
                try:
                    names[key] = act.name(base)
                except Exception:  # noqa: BLE001
                    names[key] = None
            stack = ranges_of(act)
            metrics = {}
            units = {}
            for mn in act.metric_names():
                m = act.metric_by_name(mn)
                v = value(m)
                if isinstance(v, (int, float)) or (isinstance(v, str) and len(v) < 200):
                    metrics[mn] = v
                    try:
                        units[mn] = m.unit()
                    except Exception:  # noqa: BLE001
                        pass
            case, _, regime = (stack[0] if stack else "").rpartition("__")
            rows.append({"range_idx": ri, "action_idx": ai, "nvtx": stack, "case": case, "regime": regime,
                         **names, "metrics": metrics, "units": units})
    with open(a.out, "w") as f:
        json.dump({"report": a.report, "n_kernels": len(rows), "rows": rows}, f)
    print(f"{a.out}: {len(rows)} kernels", file=sys.stderr)


if __name__ == "__main__":
    main()
