"""The worker side: provisioning pinned environments, runtimes that sandbox a run, Celery tasks."""
