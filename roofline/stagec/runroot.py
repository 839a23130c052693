"""THE run root of stage C: where a run's knowledge/ (the backend playbook) lives, found from any
round folder or file of the run. `roofline rerun`, `roofline feedback` and `roofline compare` all
take it from here."""
from __future__ import annotations

import re
from pathlib import Path

_ROUND_DIR = re.compile(r"round_\d+")


def run_root(start: str | Path) -> Path:
    """THE run root, where knowledge/ lives: one per run, whichever round or file `start` is in.
    The pipeline's layout is <run>/profile/round_<R>/profile_topN.json: the folder above a
    round_<R> folder (and above profile/ when the round sits in one). Without a round folder, the
    folder of the nearest env_report.json (beside `start` or above), else `start` itself."""
    from roofline.core.inputs import find_upwards

    d = Path(start).resolve()
    d = d.parent if d.is_file() else d
    for p in (d, *d.parents):
        if _ROUND_DIR.fullmatch(p.name):
            return p.parent.parent if p.parent.name == "profile" else p.parent
    if d.name == "profile":
        return d.parent
    env = find_upwards(d, "env_report.json")
    return env.parent if env else d


def knowledge_dir(start: str | Path) -> Path:
    """<run root>/knowledge: the playbook every command of one run appends to."""
    return run_root(start) / "knowledge"
