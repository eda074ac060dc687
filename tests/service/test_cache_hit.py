"""A cache hit: a job whose every run has a finished identical run is answered done at once,
with the matrix and comparisons a fresh run of the same results gets (in process, no worker)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from service.app import create_app
from service.jobs import JobService
from tests.conftest import NEW_ENV, OLD_ENV
from tests.fakes.runtime import FakeRuntime
from tvmrepro.environments import default_catalog
from tvmrepro.jobs.settling import finish_run
from tvmrepro.results import Result
from tvmrepro.settings import Settings
from tvmrepro.store import schema


@pytest.fixture
def app(tmp_path: Path) -> Iterator[Flask]:
    """An app on a fresh home, knowing the passes of the two environments (no TVM needed)."""
    app = create_app(Settings.from_env({"TVMREPRO_HOME": str(tmp_path)}))
    service: JobService = app.extensions["tvmrepro"]
    for env_id in (OLD_ENV, NEW_ENV):
        fake = FakeRuntime(service.settings)  # what a worker records, without provisioning TVM
        service.store.save_fingerprint(env_id, fake.fingerprint(default_catalog().get(env_id)))
    yield app
    service.store.dispose()


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    """Flask's test client of the app."""
    return app.test_client()


def submit(client: FlaskClient, case: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """POST a job of the case on both environments; its answer (202)."""
    body = {"case": case, "environments": [OLD_ENV, NEW_ENV], "wait": True, **extra}
    response = client.post("/api/v1/jobs", data=json.dumps(body),
                           content_type="application/json")
    assert response.status_code == 202, response.get_json()
    answer: dict[str, Any] = response.get_json()
    return answer


def ir(variant: str, env_id: str, release: str) -> list[str]:
    """The IR after each of three passes: the same at first, then the variant's, the release's."""
    body = "\n".join(f"    x{n} = add(x{n - 1}, {n})" for n in range(1, 30))
    return [f"def main():\n{body}\n",
            f"def main():\n{body}\n    # {variant} of {release}\n",
            f"def main():\n{body}\n    # {variant} in {env_id} of {release}\n    return x29\n"]


def finish(app: Flask, client: FlaskClient, answer: dict[str, Any],
           release: str = "r1") -> dict[str, Any]:
    """Store what a worker would for each run of the job; the job's answer then."""
    service: JobService = app.extensions["tvmrepro"]
    for run in answer["runs"]:
        service.store.claim(run["id"], "test:1", 3, 5.0, lambda _claimer: False)
        passes = ir(run["variant"], run["environment"], release)
        finish_run(service.store, answer["id"], run["id"], Result.model_validate({
            "environment": run["environment"], "variant": run["variant"], "status": "ok",
            "passes": [{"index": n, "name": f"P{n}", "seconds": 0.0, "functions": [], "ir": text}
                       for n, text in enumerate(passes)]}))
    done: dict[str, Any] = client.get(f"/api/v1/jobs/{answer['id']}").get_json()
    assert done["status"] == "done"
    return done


def shape(matrix: dict[str, Any]) -> dict[str, Any]:
    """The matrix without what differs between a job and its cache hit (run ids, cached)."""
    cells = [[{k: v for k, v in cell.items() if k not in ("run", "cached")} for cell in row]
             for row in matrix["cells"]]
    return {**matrix, "cells": cells}


def test_a_cache_hit_is_done_with_the_matrix_and_comparisons_of_a_fresh_run(
        app: Flask, client: FlaskClient, founding_case: dict[str, Any]) -> None:
    first = finish(app, client, submit(client, founding_case))
    hit = submit(client, founding_case)
    assert hit["status"] == "done" and hit["cached_runs"] == 4
    assert [run["cached_from"] for run in hit["runs"]] == [run["id"] for run in first["runs"]]
    assert shape(hit["matrix"]) == shape(first["matrix"])
    assert hit["symbols"] == first["symbols"]
    comparisons = hit["matrix"]["comparisons"]
    assert [(c["a"]["environment"], c["first_differing_pass"]["index"]) for c in comparisons] \
        == [(OLD_ENV, 1), (NEW_ENV, 1)]
    assert all("# fusetir-twice" in c["diff"] for c in comparisons)
    # The same results run again without the cache are diffed afresh: the same comparisons.
    fresh = finish(app, client, submit(client, founding_case, bypass_cache=True))
    assert fresh["cached_runs"] == 0
    assert fresh["matrix"]["comparisons"] == comparisons
    # Read back as answered (the cancel token is in the answer to POST only).
    assert client.get(f"/api/v1/jobs/{hit['id']}").get_json() == {**hit, "cancel_token": None}


def test_a_hit_copies_the_comparisons_stored_with_the_job_its_results_came_from(
        app: Flask, client: FlaskClient, founding_case: dict[str, Any]) -> None:
    first = finish(app, client, submit(client, founding_case))
    service: JobService = app.extensions["tvmrepro"]
    marked = [{**c, "diff": c["diff"] + "# stored\n"} for c in first["matrix"]["comparisons"]]
    with service.store.engine.begin() as conn:
        conn.execute(schema.comparisons.update()
                     .where(schema.comparisons.c.job_id == first["id"]).values(data=marked))
    hit = submit(client, founding_case)
    assert hit["matrix"]["comparisons"] == marked  # copied, not diffed again


def test_a_hit_whose_variants_ran_in_different_jobs_diffs_them(
        app: Flask, client: FlaskClient, founding_case: dict[str, Any]) -> None:
    once = finish(app, client, submit(client, founding_case, variants=["fusetir-once"]))
    twice = finish(app, client, submit(client, founding_case, variants=["fusetir-twice"]))
    assert once["matrix"]["comparisons"] == twice["matrix"]["comparisons"] == []
    hit = submit(client, founding_case)
    assert hit["status"] == "done" and hit["cached_runs"] == 4
    fresh = finish(app, client, submit(client, founding_case, bypass_cache=True))
    assert len(hit["matrix"]["comparisons"]) == 2
    assert hit["matrix"]["comparisons"] == fresh["matrix"]["comparisons"]


def test_a_hit_takes_the_first_decisive_result_and_the_comparisons_of_its_job(
        app: Flask, client: FlaskClient, founding_case: dict[str, Any]) -> None:
    first = finish(app, client, submit(client, founding_case), release="r1")
    submit(client, founding_case)  # a hit of the first: its runs point at the first's results
    # A later run of the same key (bypassing the cache) does not replace the answer served.
    finish(app, client, submit(client, founding_case, bypass_cache=True), release="r2")
    hit = submit(client, founding_case)
    assert [run["cached_from"] for run in hit["runs"]] == [run["id"] for run in first["runs"]]
    assert hit["matrix"]["comparisons"] == first["matrix"]["comparisons"]
    assert all("of r1" in c["diff"] for c in hit["matrix"]["comparisons"])
