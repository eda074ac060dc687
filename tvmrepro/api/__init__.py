"""The wire: what the HTTP API takes (requests: a union on `kind`) and answers (views), and
the parts of its answers (narrowed: reductions and extractions; traced: symbol traces;
issues: known issues)."""
