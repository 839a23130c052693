#!/usr/bin/env python3
"""Regenerate the artifact example of docs/artifact.md from a real analysis of the Top-N and env
report examples of docs/topn.md and docs/env_report.md (tests/test_docs.py re-computes it).

    python3 tools/docs_artifact_example.py [--check]
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def _block(page: str) -> dict:
    return json.loads(re.findall(r"```json\n(.*?)```", (DOCS / page).read_text(encoding="utf-8"), flags=re.S)[0])


def _round(x):
    if isinstance(x, float):
        return float(f"{x:.7g}")
    if isinstance(x, dict):
        return {k: _round(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_round(v) for v in x]
    return x


def example() -> str:
    sys.path.insert(0, str(ROOT))
    from roofline import api

    art = api.analyze(_block("topn.md"), _block("env_report.md"), None)
    keep = ("skill", "skill_version", "gfx", "stage", "entries", "ranking_by_pct", "ranking_by_expected_gain",
            "degraded", "skill_errors")
    out = {k: art[k] for k in keep}
    pk = art["peaks"]
    out["peaks"] = {"device": pk["device"], "hbm_bw_bytes_s": pk["hbm_bw_bytes_s"],
                    "flops": {"bf16": pk["flops"]["bf16"]}, "source": pk["source"], "confidence": pk["confidence"]}
    order = ["skill", "skill_version", "gfx", "peaks"] + [k for k in keep if k not in ("skill", "skill_version", "gfx")]
    return json.dumps(_round({k: out[k] for k in order}), indent=2)


def main(argv=None) -> int:
    check = "--check" in (argv or sys.argv[1:])
    page = DOCS / "artifact.md"
    text = page.read_text(encoding="utf-8")
    blocks = list(re.finditer(r"```json\n(.*?)```", text, flags=re.S))
    new = example() + "\n"
    if blocks[0].group(1) == new:
        print("docs/artifact.md example is current")
        return 0
    if check:
        print("docs/artifact.md example is stale: run python3 tools/docs_artifact_example.py", file=sys.stderr)
        return 1
    b = blocks[0]
    page.write_text(text[:b.start(1)] + new + text[b.end(1):], encoding="utf-8")
    print("rewrote the example of docs/artifact.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
