"""round 8: ws.cuh's knobs became policy headers with the SASS of every registry build unchanged. The recorded
hashes (fixtures/ladder/sass_identity: before = main at 7786ab2, after = the policy headers; `python3 -m
roofline.ladder.sass_diff record|diff`, nvcc 13.0 + cuobjdump, no GPU) cover exactly the registry's builds and
agree; ws.cuh is under 400 lines; each tile-engine level file includes the policy header of what it names."""
from __future__ import annotations

import json
import re
from pathlib import Path

from roofline.ladder import sass_diff
from roofline.ladder.registry import KERNEL_DIR, LEVELS

ROOT = Path(__file__).resolve().parent.parent
SI = ROOT / "fixtures" / "ladder" / "sass_identity"


def test_every_registry_build_has_the_same_sass_before_and_after():
    before, after = (json.loads((SI / f).read_text()) for f in ("before.json", "after.json"))
    assert set(before) == set(after) == set(sass_diff.all_builds())
    rows, ok = sass_diff.diff(before, after)
    assert ok and len(rows) == len(sass_diff.all_builds())
    assert (SI / "summary.txt").read_text().splitlines() == rows + [f"{len(rows)} builds: all identical"]
    # the diff says CHANGED when one hash differs
    bad = {**after, "7": {**after["7"], "sha": "0" * 40}}
    rows, ok = sass_diff.diff(before, bad)
    assert not ok and any(r.startswith("7 ") and "CHANGED" in r for r in rows)


def test_ws_cuh_is_under_400_lines_and_levels_include_their_policies():
    assert len((KERNEL_DIR / "ws.cuh").read_text().splitlines()) < 400
    policy_header = {"Multicast2": "ws_cluster.cuh", "PingPong": "ws_pingpong.cuh", "SplitK": "ws_splitk.cuh",
                     "StreamK": "ws_splitk.cuh", "GroupedTiles": "ws_grouped.cuh", "GroupedPairs": "ws_grouped.cuh",
                     "Fp8": "ws_fp8.cuh", "Fp8StagedScales": "ws_fp8_ssc.cuh", "EpiPerWarp": "ws_epi_warp.cuh"}
    for lv in (lv for lv in LEVELS if lv.kind == "ws"):
        src = (KERNEL_DIR / lv.file).read_text()
        for name in set(re.findall(r"ladder::(\w+)", src)) & set(policy_header):
            assert f'#include "{policy_header[name]}"' in src, (lv.file, name)
    assert "int fp8" not in (KERNEL_DIR / "ws.cuh").read_text().split("struct WsBuild")[1].split("};")[0]
