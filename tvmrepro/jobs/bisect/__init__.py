"""Bisect jobs: since when, fixed when, and whether a bug came and went (docs/contract.md,
"Bisection"). `logic` judges probes, `steps` keeps a job in the store, `windows` and `suspects`
find each transition's commits, `report` writes its section."""

BISECT = "bisect"
