# The service's own image: the API (gunicorn) and the worker (Celery), from this
# checkout. It holds no TVM: runs happen in the environment images, started by
# the worker through the Docker socket. Built from the repository root
# (`docker compose build`, online), or by `tvmrepro images build --service`
# from a context with wheels/ (a wheelhouse: the build is then offline).
# Every dependency is pinned by requirements.lock: the image builds the same way twice.
ARG BASE_IMAGE=python:3.11-slim

FROM ${BASE_IMAGE} AS build
LABEL tvmrepro.stage="build"
COPY . /src
# hadolint ignore=SC2086
RUN if ls /src/wheels/*.whl >/dev/null 2>&1; then from="--no-index --find-links /src/wheels"; \
    else from=""; fi; \
    python3 -m venv /opt/service \
    && /opt/service/bin/pip install --no-cache-dir --disable-pip-version-check $from \
        -c /src/requirements.lock /src

FROM ${BASE_IMAGE}
LABEL org.opencontainers.image.title="tvm-repro service (API and worker)"
RUN useradd --system --uid 10000 --user-group --create-home --home-dir /home/tvmrepro \
        --shell /usr/sbin/nologin tvmrepro \
    && mkdir -p /data /artifacts \
    && chown tvmrepro:tvmrepro /data /artifacts \
    && chmod 2775 /artifacts
COPY --from=build /opt/service /opt/service
ENV PATH=/opt/service/bin:/usr/local/bin:/usr/bin:/bin \
    PYTHONUNBUFFERED=1 \
    LANG=C.UTF-8 \
    TVMREPRO_HOME=/data
USER 10000:10000
WORKDIR /data
EXPOSE 8000
CMD ["gunicorn", "--bind", "0.0.0.0:8000", "--workers", "2", "service.app:create_app()"]
