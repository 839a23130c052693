"""Stage C in one place (docs/method.md sections 6 and 9): measurements of a head merged into its
artifact entry, and what is learnt from them. Each module has one job:

  measurement.py  the one Measurement record (a re-run's work mix, per logical op) and its per-launch counters
  plausible.py    may a matched counter record be believed? (hard limits of the hardware and the work)
  merge.py        THE merge of a counter record into an entry (`apply_stage_c`, a step of roofline/core/procedure.py)
  judge.py        THE noise-band judge (is a measured speedup real, does it contradict the prediction)
  writeback.py    one re-run's timing written onto its entry (like-for-like ratio, spread, projection, verdict)
  rerun.py        the measurement of an artifact's GEMM heads (plan, time, profile): one counter record per head
                  (roofline/counters/records.py), which roofline/rerun.py writes and `analyze --counters` merges
  timing.py       the re-run's check-then-time on the device (ladder level beside the library kernel)
  profiler.py     the re-run's ncu / nsight-python counters (and the scripts the profiler launches)
  feedback.py     a kernel team's measurement recorded on its entry and in the playbook
  compare.py      two rounds compared (per-kernel time change, e2e delta)
  playbook.py     the backend playbook: one record schema, one writer, the proposed target_eff priors
  runroot.py      the run root (where knowledge/ lives)

The merge and the judge sit beside the analysis (the procedure imports the merge); the re-run,
feedback and compare are edges like the hook: they call the analysis, never the reverse.
"""
