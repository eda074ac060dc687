# One entry point for developers and CI.
.PHONY: setup up test lint types docs check hostile bench lock

setup:
	./scripts/bootstrap

up: setup
	.venv/bin/tvmrepro up

lint:
	.venv/bin/ruff check .

types:
	.venv/bin/mypy

# The documentation site (docs/, mkdocs.yml), built strictly: a broken link or anchor, or a page
# out of the nav, fails it. The site goes to an ignored folder; `.venv/bin/mkdocs serve` shows it.
# NO_MKDOCS_2_WARNING: the theme's banner about its successor, printed on every build.
docs:
	NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet --site-dir .cache/site

# The suite in TEST_WORKERS processes (pytest-xdist; tests/conftest.py says what runs together),
# with the 30 slowest steps and the time by unit printed so that every log shows where the time
# goes. Much of a test's time is waiting on processes it started: on two cores, with the test
# home warm, 799 tests took 10 min 38 s (pytest 638 s for 2408 s of test time and 991 s of CPU).
TEST_WORKERS ?= 4
test:
	.venv/bin/pytest -ra --durations=30 -n $(TEST_WORKERS)

# What CI runs: set up, then lint, type-check and the whole test suite. The Docker tests
# are part of it: setup installs the engine (as root) and they start their own dockerd;
# TVMREPRO_WITH_DOCKER=0 skips them where no engine can run.
check: export TVMREPRO_WITH_DOCKER ?= 1
# CI never skips them: an inherited TVMREPRO_WITH_DOCKER=0 does not count there.
ifeq ($(CI),true)
check: export TVMREPRO_WITH_DOCKER = 1
endif
# Lint, types and docs (about 20 s) run beside the tests, not before them.
check: setup
	$(MAKE) --no-print-directory -j4 lint types docs test

# The hostile suite alone (tests/hostile, also part of `make test`, hence of CI): both runtimes
# against a real service on a private Redis; prints a table and one figure at the end.
hostile: export TVMREPRO_WITH_DOCKER ?= 1
hostile: setup
	.venv/bin/pytest tests/hostile -q

# The Docker runtime's warm/cold line needs the engine: setup installs it (as root), as for check.
bench: export TVMREPRO_WITH_DOCKER ?= 1
bench: setup
	.venv/bin/python bench/service_vs_bare.py
	.venv/bin/python bench/warm_ratios.py
	.venv/bin/python bench/frontend_vs_bare.py
	.venv/bin/python bench/cache_hit.py
	.venv/bin/python bench/bisect_vs_bare.py
	.venv/bin/python bench/bisect_service.py
	.venv/bin/python bench/bisect_on_up.py
	.venv/bin/python bench/local_many_runs.py
	.venv/bin/python bench/triage_vs_bare.py
	.venv/bin/python bench/service_many_runs.py
	.venv/bin/python bench/suspect_ranks.py
	.venv/bin/python bench/slow_clients.py

# Pin the dependencies again, each to its newest allowed version (one package only:
# --upgrade-package NAME instead of --upgrade): requirements.lock for the service (its image),
# requirements-dev.lock (the same pins plus the dev tools) for .venv.
lock: setup
	UV_NATIVE_TLS=1 .venv/bin/uv pip compile -q pyproject.toml --universal --upgrade -o requirements.lock
	UV_NATIVE_TLS=1 .venv/bin/uv pip compile -q pyproject.toml --extra dev --universal --upgrade \
		-c requirements.lock -o requirements-dev.lock
