"""What each environment's TVM has, recorded in the store when a worker starts to serve it."""

from __future__ import annotations

import logging

from tvmrepro.environments import Environment
from tvmrepro.errors import RuntimeFault
from tvmrepro.store import Store
from worker.runtimes.base import Runtime

log = logging.getLogger(__name__)
# What the API needs of a fingerprint: pass names validate cases; the rest is shown.
FINGERPRINT_FIELDS = ("version", "python", "libinfo", "passes", "commit")


def prepare(runtime: Runtime, envs: list[Environment], store: Store) -> None:
    """Record what each environment's TVM has (the local runtime provisions it first).

    An environment the runtime cannot fingerprint (no image yet) is still served:
    its runs end as infra_error naming the cause, and its pass names go unchecked.
    A local environment that cannot be provisioned stops the worker (ProvisionError).
    """
    for env in envs:
        try:
            facts = runtime.fingerprint(env)
        except RuntimeFault as exc:
            log.warning("no fingerprint for %s (%s): its pass names go unchecked", env.id, exc)
            continue
        store.save_fingerprint(env.id, {k: facts.get(k) for k in FINGERPRINT_FIELDS})
