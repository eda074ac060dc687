"""The tracker: many reports at once. `importing` makes cases from issue bodies; `triage` turns
their runs into verdicts, groups of one bug and an audit of the issues' states; `sweep` runs
every stored case on a new release. Triage and sweep jobs are made of run jobs, one per part
(`steps`); `handler` is the two kinds' entries in KINDS."""

TRIAGE = "triage"
SWEEP = "sweep"
