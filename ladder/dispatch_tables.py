"""The shipped dispatch tables (roofline/data/ladder_dispatch_sm90a_*.json), built from the recorded benches
each names (SOURCES; the paths are under the repository's fixtures/ladder/, evidence that does not ship):

    python3 -m roofline.ladder.dispatch_tables            # rewrite the four tables
    python3 -m roofline.ladder.dispatch_tables --check    # exit 1 if a table differs, or a benched case's pick
                                                          # is more than 3 % below the best build measured there

Each table is dispatch.build_dispatch_table / build_grouped_table over the merged sources (a (build, case)
timed in several keeps the latest run's row), with the per-case picks of round 8 (dispatch.case_picks). tests/test_ladder_dispatch_picks.py reads the same sources and the shipped tables."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from . import dispatch
from .contracts import CONTRACTS

ROOT = Path(__file__).resolve().parent.parent          # the source checkout (fixtures/ is not in the package)
EV = "fixtures/ladder/grouped_fp8_h200"
L710 = "fixtures/ladder/levels7_10_h200"
R8 = f"{EV}/start13_round8_h100"
# (path, only_class): a bench made for one class informs only that class (dispatch.only_class)
SOURCES: dict[str, list[tuple[str, str | None]]] = {
    "gemm-bf16": [(f"{L710}/start4_levels1_10_bench_sanitize/bench_all.json", None),
                  (f"{L710}/start6_levels1_10_bench/bench_all.json", None),
                  (f"{EV}/start4_round2/bench_mid.json", "mid"), (f"{EV}/start5_round3/bench_mid.json", "mid")],
    "gemm-fp8": [(f"{EV}/start4_round2/bench_fp8_all.json", None), (f"{R8}/call1/bench_fp8_heldout.json", None)],
    "grouped-bf16": [(f"{EV}/start4_round2/bench_moe.json", None), (f"{EV}/start5_round3/bench_moe.json", None),
                     (f"{EV}/start5_round3/prefill/bench_moe.json", None), (f"{EV}/start8_round5/bench_moe_cover.json", None),
                     (f"{R8}/call2/bench_heldout_decode.json", None), (f"{R8}/call1/bench_heldout_prefill.json", None)],
    "grouped-fp8": [(f"{EV}/start4_round2/bench_moe.json", None), (f"{EV}/start5_round3/bench_moe.json", None),
                    (f"{EV}/start7_round5/bench_moe_prefill.json", None), (f"{EV}/start8_round5/bench_moe_cover.json", None),
                    (f"{R8}/call2/bench_heldout_decode.json", None), (f"{R8}/call1/bench_heldout_prefill.json", None)],
}


def merged(contract: str, root: Path = ROOT) -> dict:
    benches = []
    for path, cls in SOURCES[contract]:
        b = json.loads((root / path).read_text())
        benches.append(dispatch.only_class(b, cls) if cls else b)
    return dispatch.merge_benches(benches)


def build(contract: str, root: Path = ROOT) -> dict:
    bench = merged(contract, root)
    if contract.startswith("grouped-"):
        t = dispatch.build_grouped_table(bench, dtype=contract.split("-")[1])
    else:
        t = dispatch.build_dispatch_table(bench, dtype="fp8" if contract == "gemm-fp8" else "bf16")
    return t


def bench_rows(contract: str, root: Path = ROOT) -> tuple[list[dict], object, object]:
    """(checked rows of the merged sources, case key, pick(table, row)) for dispatch.pick_errors."""
    bench = merged(contract, root)
    if contract.startswith("grouped-"):
        dt = contract.split("-")[1]
        rows = [r for r in bench["rows"] if r.get("level") and r.get("check_ok") and r.get("dtype") == dt
                and r.get("layout") == "enk" and dispatch._pct(r) is not None]
        return (rows, lambda r: dispatch.grouped_case_key(r["E"], r["rows"], r["N"], r["K"]),
                lambda t, r: dispatch.choose_grouped_level(t, r["rows"], r["experts_hit"], r["N"], r["K"], dt, E=r["E"])[0])
    dt = "fp8" if contract == "gemm-fp8" else "bf16"
    rows = [r for r in bench["rows"] if r.get("level") and r.get("check_ok") and dispatch._pct(r) is not None]
    return (rows, lambda r: dispatch.dense_case_key(r["m"], r["n"], r["k"]),
            lambda t, r: dispatch.choose_level(t, r["m"], r["n"], r["k"], dt)[0])


def text(table: dict) -> str:
    return json.dumps(table, indent=1) + "\n"


def main(argv: list[str]) -> int:
    data = Path(__file__).resolve().parent.parent / "roofline" / "data"
    bad = 0
    for contract, c in CONTRACTS.items():
        t = build(contract)
        path = data / c.dispatch_table
        if "--check" in argv:
            if path.read_text() != text(t):
                print(f"{path.name}: differs from its sources' build"); bad += 1
            errs = dispatch.pick_errors(json.loads(path.read_text()), *bench_rows(contract))
            for e in errs:
                print(f"{contract}: {e}")
            bad += len(errs)
        else:
            path.write_text(text(t))
            print(f"{path.name}: {len(t['classes'])} classes, {len(t.get('cases', {}))} per-case picks")
    return 1 if bad else 0


if __name__ == "__main__":  # pragma: no cover - a build tool
    sys.exit(main(sys.argv[1:]))
