"""The tracker: many reports at once. `importing` makes cases from issue bodies; `triage` turns
their runs into verdicts, groups of one bug and an audit of the issues' states."""
