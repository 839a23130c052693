"""The 'Fix first' line of a head whose kernel name alone outruns the terminal (an inductor kernel of
the compiled corpus trace): the name is cut, the fix itself is still said."""
import gzip
import json
from pathlib import Path

from roofline.report.terminal import TERMINAL_COLUMNS, fix_lines

CORPUS = Path(__file__).resolve().parent.parent / "fixtures" / "corpus"


def test_a_long_kernel_name_leaves_room_for_the_fix():
    ev = json.load(gzip.open(CORPUS / "qwen3_compile_static.json.gz"))["traceEvents"]
    name = max((x["name"] for x in ev if x.get("cat") == "kernel" and x["name"].startswith("triton_poi_fused")), key=len)
    assert len(name) > TERMINAL_COLUMNS
    lever = {"kind": "group_expanded_copy", "saves_pct": 46.87, "evidence": "its output is its input repeated",
             "text": "do not materialise the KV heads' group expansion (repeat_kv)"}
    art = {"entries": [{"name": name, "short_name": name, "levers_detail": [lever], "pct_gpu_time": 46.87,
                        "avoidable_gain_pct": 46.87, "expected_e2e_gain_pct": 0.0}],
           "ranking_by_larger_gain": [name]}
    lines = fix_lines(art)
    text = " ".join(lines)
    assert "group_expanded_copy" in text and "repeat_kv" in text, lines
    assert all(len(x) <= TERMINAL_COLUMNS for x in lines)
