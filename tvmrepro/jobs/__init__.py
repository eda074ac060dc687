"""The job layer: one package per kind (run, bisect, narrow, tracker), found through KINDS
(tvmrepro.jobs.kinds), and what every kind shares: fan-out, runs, settling, comparisons,
symbol traces, the matrix and the report."""
