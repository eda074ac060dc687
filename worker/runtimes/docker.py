"""The Docker runtime: each run in a fresh, locked-down container of the environment's image.

A run is one container, created detached with every security flag of
`sandbox_host_config` (docker_config.py), timed and killed by us (never by the
engine), and always removed. Its process is the harness's supervisor: it imports TVM and
waits for the case on stdin (sent through an attach socket, then the key it
signs its events with); the case runs in its child. The events come out
through an anonymous volume at /out, seeded from the image: there only
events.jsonl is writable by the sandbox user, and its size is capped by the
file-size limit, so the volume cannot fill the disk. The case's child can
write that file too, but not sign a line: only the supervisor's lines count.
(A tmpfs would not do: the engine cannot copy from one, and it vanishes when
the container stops.) stdout and stderr are read from an
attach stream opened before the start, keeping the first `log_cap_bytes` of
each. Every container carries labels naming its run, job, owner process and
deadline; containers whose owner process is gone, or that outlived their
deadline, are swept when a runtime starts.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Callable

import docker
import docker.errors
import requests.exceptions

from tvmrepro.environments import Environment
from tvmrepro.errors import RuntimeFault
from tvmrepro.lifecycle import harness_digest
from tvmrepro.liveness import process_token, token_alive
from tvmrepro.settings import Settings
from worker.environments.frontend_images import build_command
from worker.environments.images import ENVIRONMENT_LABEL, HARNESS_LABEL, PACKAGES_LABEL, pins_text
from worker.environments.provision import TVM_FACTS_PROBE
from worker.runtimes.base import (
    EVENTS_READ_CAP,
    CancelCheck,
    Execution,
    Fingerprint,
    Limits,
    SandboxJob,
    cancelled_before_start,
    fingerprint_tvm,
    handover_bytes,
    new_key,
    signal_name,
    wait_cancellable,
)
from worker.runtimes.docker_config import EVENTS_FILE, container_config, harness_command, isolation
from worker.runtimes.docker_io import OutputReader, read_archived, write_stdin
from worker.runtimes.events import cgroup_oom_kills, exit_status, verified_events
from worker.runtimes.warm import WarmSandboxes

RUN_LABEL, JOB_LABEL = "tvmrepro.run", "tvmrepro.job"
OWNER_LABEL, DEADLINE_LABEL = "tvmrepro.owner", "tvmrepro.deadline"
# Beyond its time limit a run is killed by us; this much later the container ends itself
# (timeout(1) inside it), for when the worker that timed it died.
SELF_LIMIT_GRACE_S = 60
ENGINE_TIMEOUT_S = 120
FINGERPRINT_TIMEOUT_S, FINGERPRINT_MEMORY_MB = 120, 2048
READY_TIMEOUT_S = 300  # importing TVM in a fresh container on a loaded machine
READY_POLL_S = 0.1


def connect(settings: Settings) -> docker.DockerClient:
    """A client of the engine DOCKER_HOST names (else the default socket); RuntimeFault if none."""
    try:
        client = (docker.DockerClient(base_url=settings.docker_host, timeout=ENGINE_TIMEOUT_S)
                  if settings.docker_host else docker.from_env(timeout=ENGINE_TIMEOUT_S))
        client.ping()
    except docker.errors.DockerException as exc:
        where = settings.docker_host or "the default socket"
        raise RuntimeFault(f"cannot reach the Docker engine at {where}: {exc}") from exc
    return client


class DockerSandbox:
    """A started container whose supervisor waits for its one case."""

    def __init__(self, runtime: DockerRuntime, container_id: str, output: OutputReader) -> None:
        self.runtime, self.container_id, self.output = runtime, container_id, output

    def alive(self) -> bool:
        """Whether the container still runs."""
        try:
            state = self.runtime.client.api.inspect_container(self.container_id)["State"]
        except docker.errors.DockerException:
            return False
        return bool(state.get("Running"))

    def discard(self) -> None:
        """Remove the container."""
        self.runtime._remove(self.container_id)


class DockerRuntime:
    """Runs the harness in a fresh container of the environment's image, one per run."""

    name = "docker"

    def __init__(self, settings: Settings, client: docker.DockerClient | None = None) -> None:
        self.settings = settings
        self.client = client or connect(settings)
        self.owner = process_token()
        self._images: dict[str, str] = {}
        self._harness: dict[str, str | None] = {}  # image id -> its harness digest label
        self._fingerprints: dict[str, Fingerprint] = {}  # image id -> what its TVM has
        self.warm: WarmSandboxes[DockerSandbox] = WarmSandboxes(settings, self._start_warm)
        self.swept = self.sweep()

    def sweep(self) -> list[str]:
        """Remove sandbox containers whose owner process is gone or whose deadline passed."""
        removed = []
        try:
            leftovers = self.client.api.containers(all=True, filters={"label": RUN_LABEL})
        except docker.errors.DockerException as exc:
            raise RuntimeFault(f"cannot list containers: {exc}") from exc
        for info in leftovers:
            labels = info.get("Labels") or {}
            if self._abandoned(labels):
                self._remove(info["Id"])
                removed.append(labels.get(RUN_LABEL, info["Id"]))
        return removed

    def _abandoned(self, labels: dict[str, str]) -> bool:
        owner = labels.get(OWNER_LABEL, "")
        if owner and owner != self.owner and token_alive(owner) is False:
            return True
        try:
            return time.time() > float(labels.get(DEADLINE_LABEL, "inf"))
        except ValueError:
            return False

    def _remove(self, container_id: str) -> None:
        try:
            self.client.api.remove_container(container_id, force=True, v=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.DockerException as exc:
            # Left for the next sweep (its deadline label makes it removable by anyone).
            print(f"tvmrepro: could not remove container {container_id[:12]}: {exc}", flush=True)

    def image_id(self, env: Environment) -> str:
        """The id of env's image (its frontend image, for a frontend flavour), checked to carry
        every package env installs and this harness; else RuntimeFault naming the build."""
        if env.key in self._images:
            return self._images[env.key]
        hint = f"build it with: {build_command(env)}"
        try:
            info = self.client.api.inspect_image(env.image)
        except docker.errors.ImageNotFound as exc:
            raise RuntimeFault(f"image {env.image} is not on the engine; {hint}") from exc
        except docker.errors.DockerException as exc:
            raise RuntimeFault(f"cannot inspect image {env.image}: {exc}") from exc
        labels = (info.get("Config") or {}).get("Labels") or {}
        if labels.get(PACKAGES_LABEL) != pins_text(env):  # env.installed, frontends included
            raise RuntimeFault(f"image {env.image} does not carry the pins of {env.key}; {hint}")
        # Its results would be cached under this harness's key: a stale harness must not run.
        if labels.get(HARNESS_LABEL) != harness_digest():
            raise RuntimeFault(f"image {env.image} carries harness {labels.get(HARNESS_LABEL)!r}, "
                               f"not this service's {harness_digest()}; {hint} --rebuild")
        self._images[env.key] = info["Id"]
        self._harness[info["Id"]] = labels.get(HARNESS_LABEL)
        return str(info["Id"])

    def _create(self, job: SandboxJob, command: list[str] | None = None,
                self_limit_s: float | None = None) -> str:
        """A container for `job`; it ends itself `self_limit_s` after its start (else its time
        limit, plus TVM's import, plus a grace), and anyone may sweep it after that."""
        self_limit = self_limit_s or job.timeout_s + SELF_LIMIT_GRACE_S + READY_TIMEOUT_S
        deadline = time.time() + self_limit + ENGINE_TIMEOUT_S
        labels = {RUN_LABEL: job.run_id, JOB_LABEL: job.job_id, OWNER_LABEL: self.owner,
                  DEADLINE_LABEL: str(int(deadline)), ENVIRONMENT_LABEL: job.env.id}
        config = container_config(self.client, job, self.settings, self.image_id(job.env),
                                  command or harness_command(self_limit), labels)
        created = self.client.api.create_container_from_config(config)
        container_id: str = created["Id"]
        return container_id

    def execute(self, job: SandboxJob) -> Execution:
        """Run the harness for this job in a (warm, else new) container and collect the run."""
        with self.warm.running():  # the replacements of warm sandboxes wait: their CPU is its
            return self._execute(job)

    def _execute(self, job: SandboxJob) -> Execution:
        image_id = self.image_id(job.env)
        cancelled = CancelCheck(job)
        sandbox = self.warm.take(job.env, Limits.of(job, self.settings), stop=cancelled)
        warm = sandbox is not None
        try:
            if sandbox is None and cancelled():  # while it waited for the one being started
                return cancelled_before_start(isolation(job, self.settings, image_id,
                                                        self._harness.get(image_id)))
            if sandbox is None or not sandbox.alive():  # it died while waiting: costs no run
                warm, sandbox = False, self._launch(job)
            if not self._ready(sandbox.container_id, cancelled):  # a reserved or cold one may
                if cancelled():  # still import TVM: a cancel meanwhile ends the run at once
                    return cancelled_before_start(isolation(job, self.settings, image_id,
                                                            self._harness.get(image_id)))
                raise RuntimeFault(f"the sandbox of {job.env.id} did not get ready (TVM did "
                                       f"not import): {sandbox.output.text(1)[-2000:]}")
            execution = self._run(job, sandbox, image_id)
            execution.isolation["warm"] = warm
            execution.tvm = fingerprint_tvm(self.fingerprint(job.env))
            return execution
        except docker.errors.DockerException as exc:
            raise RuntimeFault(f"the Docker engine failed the run: {exc}") from exc
        finally:
            if sandbox is not None:
                sandbox.discard()
            if job.env.frontends:  # warm from its first run on: torch's import is its cost
                self.warm.serve(job.env)
            self.warm.refill(job.env)  # once the run is over

    def _launch(self, job: SandboxJob, self_limit_s: float | None = None) -> DockerSandbox:
        """Create and start a container whose supervisor imports TVM and waits for its case."""
        container_id = self._create(job, self_limit_s=self_limit_s)
        try:
            stream = self.client.api.attach(container_id, stdout=True, stderr=True, stream=True,
                                            logs=False, demux=True)
            output = OutputReader(stream, self.settings.log_cap_bytes)
            output.start()
            self.client.api.start(container_id)
        except BaseException:
            self._remove(container_id)
            raise
        return DockerSandbox(self, container_id, output)

    def prewarm(self, envs: list[Environment], processes: int = 1) -> None:
        """Keep containers waiting for each of `envs`, as warm.py says."""
        self.warm.prewarm(envs, processes)

    def start_zygotes(self, envs: list[Environment]) -> None:
        """Nothing: each container imports TVM itself (a fork cannot cross containers)."""

    def reserve(self, env: Environment, timeout_s: int, memory_mb: int, count: int = 1) -> None:
        """Start `count` containers for env now, without waiting for them to import TVM: the
        next runs of env with these limits take them (see the local runtime)."""
        job = SandboxJob(f"reserved-{uuid.uuid4().hex}", "reserved", env,
                         {"timeout_s": timeout_s, "memory_mb": memory_mb}, "")
        for _ in range(count):
            self.warm.reserve(env, Limits.of(job, self.settings), self._launch(job))

    def close(self) -> None:
        """Remove the waiting containers."""
        self.warm.close()

    def _start_warm(self, env: Environment, limits: Limits) -> DockerSandbox:
        """A warm container, ready: it ends itself once it waited longer than a warm one may."""
        job = SandboxJob(f"warm-{uuid.uuid4().hex}", "warm", env,
                         {"timeout_s": limits.timeout_s, "memory_mb": limits.memory_mb}, "")
        sandbox = self._launch(job, self_limit_s=self.warm.idle_s + limits.timeout_s)
        if not self._ready(sandbox.container_id):
            sandbox.discard()
            raise RuntimeFault(f"a warm container of {env.id} did not get ready")
        return sandbox

    def _run(self, job: SandboxJob, sandbox: DockerSandbox, image_id: str) -> Execution:
        api, container_id, output = self.client.api, sandbox.container_id, sandbox.output
        key = new_key()
        # The request and the key, on the supervisor's stdin.
        write_stdin(api, container_id, handover_bytes(job, Limits.of(job, self.settings), key))
        started = time.monotonic()  # the time limit counts from the hand-over
        timed_out, cancelled = self._wait_run(container_id, job, started)
        if timed_out or cancelled:
            self._kill(container_id)
        seconds = time.monotonic() - started
        state = api.inspect_container(container_id)["State"]
        output.join(timeout=30)
        events = verified_events(self._raw_events(container_id), key)
        code = state.get("ExitCode")
        said = exit_status(events)
        return Execution(
            events=[e for e in events if e["event"] != "exit"],
            returncode=said[0] if said else code,
            signal=said[1] if said else (
                signal_name(code - 128) if isinstance(code, int) and 128 < code < 193 else None),
            timed_out=timed_out,
            cancelled=cancelled,
            # A container is its own memory cgroup: an OOM kill counted there is evidence.
            oom_killed=(bool(state.get("OOMKilled")) or (said is not None and said[1] == "SIGKILL"
                                                         and cgroup_oom_kills(events) > 0))
            and not timed_out and not cancelled,
            stdout=output.text(0),
            stderr=output.text(1),
            truncated=output.truncated,
            seconds=seconds,
            isolation=isolation(job, self.settings, image_id, self._harness.get(image_id)),
        )

    def _ready(self, container_id: str, stop: Callable[[], bool] = lambda: False) -> bool:
        """Wait until the supervisor imported TVM and waits for its case; False if it died (or
        `stop` said so: the run was cancelled)."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline and not stop():
            if b'"event": "ready"' in self._raw_events(container_id):
                return True
            if not self.client.api.inspect_container(container_id)["State"]["Running"]:
                return False
            time.sleep(READY_POLL_S)
        return False

    def _wait_run(self, container_id: str, job: SandboxJob, started: float) -> tuple[bool, bool]:
        """Wait for a run's container to exit within the run's time; (timed out, cancelled): a
        cancelled job's run is stopped within CANCEL_POLL_S."""
        return wait_cancellable(lambda timeout_s: self._wait(container_id, timeout_s), job,
                                started + job.timeout_s)

    def _wait(self, container_id: str, timeout_s: float) -> bool:
        """Wait for the container to exit, at most timeout_s; whether it did."""
        try:
            self.client.api.wait(container_id, timeout=timeout_s)
        except (requests.exceptions.ConnectionError, requests.exceptions.ReadTimeout):
            # The engine answers `wait` only at exit: a read timeout is our time limit.
            return self.client.api.inspect_container(container_id)["State"]["Running"] is False
        return True

    def _kill(self, container_id: str) -> None:
        with contextlib.suppress(docker.errors.APIError):  # it exited meanwhile
            self.client.api.kill(container_id)
        self.client.api.wait(container_id, timeout=ENGINE_TIMEOUT_S)

    def _raw_events(self, container_id: str) -> bytes:
        """The events file, read back through the engine: at most EVENTS_READ_CAP bytes."""
        return read_archived(self.client.api, container_id, EVENTS_FILE, EVENTS_READ_CAP)

    def fingerprint(self, env: Environment) -> Fingerprint:
        """What the TVM of env's image has (as a provisioned environment's fingerprint says)."""
        image_id = self.image_id(env)
        if image_id not in self._fingerprints:
            self._fingerprints[image_id] = self._probe(env)
        return self._fingerprints[image_id]

    def _probe(self, env: Environment) -> Fingerprint:
        job = SandboxJob(f"fingerprint-{env.id}-{time.time_ns()}", "fingerprint", env,
                         {"timeout_s": FINGERPRINT_TIMEOUT_S, "memory_mb": FINGERPRINT_MEMORY_MB},
                         "fingerprint")
        container_id = ""
        try:
            container_id = self._create(job, ["python3", "-c", TVM_FACTS_PROBE])
            self.client.api.start(container_id)
            exited = self._wait(container_id, job.timeout_s)
            output = self.client.api.logs(container_id, stdout=True, stderr=not exited)
        except docker.errors.DockerException as exc:
            raise RuntimeFault(f"cannot probe image {env.image}: {exc}") from exc
        finally:
            if container_id:
                self._remove(container_id)
        try:
            facts: Fingerprint = json.loads(output.decode().strip().splitlines()[-1])
        except (ValueError, IndexError) as exc:
            raise RuntimeFault(f"TVM in image {env.image} does not import: {output[-2000:]!r}"
                               ) from exc
        return {"id": env.id, "packages": env.installed, "image": env.image, **facts}
