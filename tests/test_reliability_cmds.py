"""The property-based part of reliability round four (issue 43): random flag values, random damage
to round B of a compare, random --dispatch files for a GPU-less rerun (tests/reliability_cmds.py
says what a case is and what each checks). Derandomized so that a failure reproduces; the long run
with fresh cases is benchmarks/reliability_campaign.py --only cmds."""
import os

import pytest
from hypothesis import HealthCheck, Phase, given, settings

import reliability_cmds as C

SCALE = float(os.environ.get("ROOFLINE_CAMPAIGN_SCALE", "1"))
PER_KIND = {"flags": 30, "compare": 30, "dispatch": 20}
STRATEGIES = {"flags": C.flag_cases(), "compare": C.compare_cases(), "dispatch": C.dispatch_cases()}


@pytest.mark.parametrize("kind", sorted(PER_KIND))
def test_cmd_campaign(kind):
    seen = []

    @settings(max_examples=max(1, int(PER_KIND[kind] * SCALE)), deadline=None, database=None, derandomize=True,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(case=STRATEGIES[kind])
    def one(case):
        seen.append(case.label)
        v = C.run_cmd_case(case, limit_s=60.0)
        assert not v, "\n".join(v)

    one()
    assert len(seen) >= PER_KIND[kind] * SCALE * 0.9
