"""Shared vocabulary of tvm-repro: settings, errors, the environment catalog, cases and results.

The process packages (service/, worker/, cli/) build on this one; the harness
(images/harness/) runs inside pinned TVM and imports none of it.
"""
