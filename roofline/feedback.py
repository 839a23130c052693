"""Public import path of stage C's feedback loop (`roofline.feedback.record_feedback`, README):
the code lives in roofline/stagec/ (feedback.py, compare.py, judge.py, playbook.py); this module
only re-exports it."""
from roofline.io.errors import FeedbackError  # noqa: F401
from roofline.stagec.compare import compare, workload_warnings  # noqa: F401
from roofline.stagec.feedback import apply_feedback, find_entry, load_artifact, record_feedback  # noqa: F401
from roofline.core.judge import NoiseBands, judge_e2e, judge_isolated  # noqa: F401
from roofline.stagec.playbook import fill_e2e, propose_priors, read_records, run_root  # noqa: F401
