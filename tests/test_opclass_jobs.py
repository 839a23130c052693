"""The op classes' jobs as per-job registrations (roofline/core/opclasses/jobs.py): one registration per
job and class, a second one refused; the class record (OpClass) carries data only, at most 15 fields;
a class that registers no function for a job gets the job's default."""
from __future__ import annotations

import dataclasses

import pytest

from roofline.core import opclasses
from roofline.core.opclasses import jobs
from roofline.core.topn_entry import Regime


def test_a_job_registered_twice_for_one_class_is_refused():
    before = {j: jobs.serving(j) for j in jobs.JOBS}
    with pytest.raises(ValueError, match="'comm': job 'judged_time' is registered twice"):
        jobs.job("judged_time", "comm")(lambda e, reg, notes: (reg, None))
    # the same function for another class that has none is a registration of its own (then taken back)
    jobs.job("judged_time", "norm")(lambda e, reg, notes: (reg, "split"))
    try:
        assert opclasses.of("norm").judged_time(None, "REG", []) == ("REG", "split")
    finally:
        del jobs._TABLE["judged_time"]["norm"]
    assert {j: jobs.serving(j) for j in jobs.JOBS} == before


def test_a_job_that_is_no_job_or_names_no_class_is_refused():
    with pytest.raises(ValueError, match="no op-class job 'judge_time'"):
        jobs.job("judge_time", "comm")
    with pytest.raises(ValueError, match="name the op classes"):
        jobs.job("judged_time")


def test_a_registration_for_a_class_that_does_not_exist_fails_the_import_check():
    jobs.job("latency_levers", "gemmm")(lambda entry: [])
    try:
        with pytest.raises(ValueError, match=r"registered for \['gemmm'\], which are no op classes"):
            opclasses._check_jobs()
    finally:
        del jobs._TABLE["latency_levers"]["gemmm"]
    opclasses._check_jobs()


def test_the_class_record_is_data_of_at_most_15_fields():
    fields = dataclasses.fields(opclasses.OpClass)
    assert len(fields) <= 15, [f.name for f in fields]
    for oc in opclasses.REGISTRY.values():
        assert not [f.name for f in fields if callable(getattr(oc, f.name))], oc.name
    with pytest.raises(ValueError, match="unknown flags"):
        opclasses.OpClass("x", flags=frozenset({"fuseable"}))


def test_a_class_without_a_registration_gets_the_jobs_default():
    norm, comm = opclasses.of("norm"), opclasses.of("comm")
    reg = Regime(base_latency_ms=0.5, launches_per_step=2.0)
    # the transfer / waiting split is the collective's alone: every other class's roof judges the whole time
    assert not norm.has("judged_time") and comm.has("judged_time")
    assert norm.judged_time(None, reg, []) == (reg, None)
    assert norm.kernel_speedup(None, 1.7, []) == 1.7
    assert norm.prior("decode") == ("norm", None) and opclasses.of("attn").prior("decode", {"paged": False})[0] == \
        "attn_decode_contiguous"
    assert norm.latency_levers({}) == [] and norm.gemm_problems({}) == [] and norm.launches(None, None, reg, None, []) is None
    with pytest.raises(LookupError, match="'unknown' has no byte/FLOP model"):
        opclasses.of("unknown").model({}, {})
    # the regime voters in their rank order, with their registration's label
    assert [(oc.name, oc.regime_label) for oc in opclasses.regime_voters()] == [("attn", "attention"), ("gemm", "GEMM")]


def test_necessity_rules_are_asked_in_rank_order_each_registered_once():
    from roofline.core.opclasses import eager_attention

    names = {c: [f"{f.__module__.rsplit('.', 1)[1]}.{f.__name__}" for f in jobs.rules(c)] for c in ("gemm", "norm")}
    # a decode bmm over a KV cache keeps the cache rule's verdict: it is asked before the score-chain rule
    assert names["gemm"] == ["gemm.kv_necessary", "expert_gather.gemm_necessary", "last_logits.necessary",
                             "eager_attention.necessary"]
    assert names["norm"] == ["ssd_reference.necessary", "eager_attention.necessary", "expert_gather.gather_necessary"]
    with pytest.raises(ValueError, match="registered twice"):
        jobs.rule("gemm", rank=40)(lambda shape, dt, b, ctx: None)         # a rank taken
    with pytest.raises(ValueError, match="registered twice"):
        jobs.rule("gemm", rank=99)(eager_attention.necessary)             # the same rule again
    assert [f.__name__ for f in jobs.rules("gemm")][-1] == "necessary"
