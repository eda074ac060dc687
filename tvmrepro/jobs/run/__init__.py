"""Run jobs: every variant of a case on every environment asked for, from the cache where
it can."""

RUN = "run"
