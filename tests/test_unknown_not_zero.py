"""Unknown is not zero (issue #40, finding 4): an Nsight Compute report alone measures what each kernel
moves, never whether it needs to. On the real ncu step of the corpus's compiled static-cache decode
(fixtures/corpus/ncu/qwen3_compile_static__decode.csv.gz: inductor's fused repeat_kv, 996 MB a launch,
which a GQA-aware attention does not need at all), `avoidable_gain_pct` is null (JSON null) and the table
prints `-`, never "+0.00%"."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NCU = ROOT / "fixtures" / "corpus" / "ncu" / "qwen3_compile_static__decode.csv.gz"


def test_an_ncu_report_alone_leaves_necessity_unknown(tmp_path):
    rd = tmp_path / "profile" / "round_1"
    rd.mkdir(parents=True)
    topn = rd / "profile_topN.json"
    for cmd in (["topn", str(NCU), "-o", str(topn), "--force"],
                ["analyze", str(topn), "--counters", str(NCU), "--format", "json"]):
        r = subprocess.run([sys.executable, "-m", "roofline.cli", *cmd], capture_output=True, text=True, cwd=ROOT)
        assert r.returncode == 0, r.stderr[-500:]
    art = json.loads((rd / "profile_roofline.json").read_text())
    copy = next(e for e in art["entries"] if e["name"].startswith("triton_poi_fused__scaled_dot_product"))
    assert copy["shape_source"] == "measured" and copy["bytes_est"] > 5e8
    measured = [e for e in art["entries"] if e.get("shape_source") == "measured"]
    assert measured and all(e["avoidable_gain_pct"] is None and e["bytes_necessary"] is None for e in measured)
    assert "bytes_necessary unknown" in copy["notes"]
    md = (rd / "profile_roofline.md").read_text()
    row = next(ln for ln in md.splitlines() if ln.startswith("| 1 |"))
    cells = [c.strip() for c in row.split("|")]
    head = [c.strip() for c in next(ln for ln in md.splitlines() if ln.startswith("| #pct")).split("|")]
    assert cells[head.index("avoidable (%GPU)")] == "-"
