"""Reduce and extract jobs: the smallest case that still shows the bug, a script's failing step
as a module-mode case (docs/contract.md, "Reduction"). `logic` checks options and reads answers,
`steps` keeps a job in the store, `report` writes its section."""

REDUCE = "reduce"
EXTRACT = "extract"
