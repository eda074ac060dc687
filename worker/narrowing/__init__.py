"""Narrowing a case: reduce it while an oracle holds, or extract one from a failing script.

run.py is a reduce or extract job's run in the worker; reduction.py the reducer (ddmin.py over
the pass list, candidates.py's module edits less those unparsable.py rules out), judging.py the
judge of its candidates in sandboxes; extraction.py the extractor, with extract_steps.py the
shapes of what a script's run recorded.
"""
