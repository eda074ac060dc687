# One entry point for developers and CI.
.PHONY: setup up test lint types check bench

setup:
	./scripts/bootstrap

up: setup
	.venv/bin/tvmrepro up

lint:
	.venv/bin/ruff check .

types:
	.venv/bin/mypy

test:
	.venv/bin/pytest -ra

# What CI runs: set up, lint, type-check, then the whole test suite.
check: setup lint types test

bench: setup
	.venv/bin/python bench/service_vs_bare.py
