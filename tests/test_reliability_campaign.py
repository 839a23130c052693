"""The CI-sized reliability campaign (issue 17): about 1,000 generated cases over every input the
tool reads (tests/reliability.py says what a case is and which invariants every case checks).
Deterministic (derandomized) so that a failure reproduces; the long run with fresh random cases
is benchmarks/reliability_campaign.py."""
import os
import resource

import pytest
from hypothesis import HealthCheck, Phase, given, settings

import reliability as R

# cases per kind: about 800 in all (ROOFLINE_CAMPAIGN_SCALE multiplies them); every numeric field of
# the Top-N, env report and config is also swept deterministically by tests/test_input_policy.py
SCALE = float(os.environ.get("ROOFLINE_CAMPAIGN_SCALE", "1"))
PER_KIND = {"topn": 130, "env": 40, "config": 40, "peaks": 90, "trace_fast": 120, "trace_compact": 80,
            "ncu_csv": 90, "counters_ncu_csv": 60, "rocprof_csv": 60, "ncu_rep": 30, "artifact": 40}
STRATEGIES = {"topn": R.topn_cases(), "env": R.env_cases(), "config": R.config_cases(), "peaks": R.peaks_cases(),
              "trace_fast": R.trace_cases("fast"), "trace_compact": R.trace_cases("compact"),
              "ncu_csv": R.csv_cases("ncu_csv"), "counters_ncu_csv": R.csv_cases("counters_ncu_csv"),
              "rocprof_csv": R.csv_cases("rocprof_csv"), "ncu_rep": R.ncu_rep_cases(),
              "artifact": R.artifact_cases()}
RSS_LIMIT_MB = 1500


def _settings(kind):
    return settings(max_examples=max(1, int(PER_KIND[kind] * SCALE)), deadline=None, database=None,
                    derandomize=True, phases=[Phase.generate], suppress_health_check=list(HealthCheck))


@pytest.mark.slow   # over ~5 s on a 2-core machine: `-m "not slow"` leaves it out
@pytest.mark.parametrize("kind", sorted(PER_KIND))
def test_campaign(kind):
    seen = []

    @_settings(kind)
    @given(case=STRATEGIES[kind])
    def one(case):
        seen.append(case.label)
        v = R.run_case(case, limit_s=60.0)
        assert not v, "\n".join(v)

    one()
    assert len(seen) >= PER_KIND[kind] * SCALE * 0.9  # the cases really ran
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    assert rss_mb < RSS_LIMIT_MB, f"peak RSS {rss_mb:.0f} MB"
