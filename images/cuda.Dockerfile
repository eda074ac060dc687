# One pinned TVM environment (CUDA): as images/Dockerfile, on an NVIDIA CUDA
# runtime base. The TVM wheels are built with USE_CUDA=ON; NVRTC (pinned in the
# environment's packages) compiles TVM's CUDA C at run time, and the driver
# (libcuda) is mounted in by the NVIDIA container toolkit when the container
# asks for a GPU. The CUDA runtime images carry no Python: the distribution's
# python3 is added (Ubuntu 24.04: 3.12, for which every pinned package has
# wheels; a wheelhouse for this image is made with --python-version 3.12).
ARG BASE_IMAGE=nvidia/cuda:13.0.1-runtime-ubuntu24.04

FROM ${BASE_IMAGE} AS with-python
# Only when the base has no python3 (a stand-in base may have it, and then the
# build needs no network). Versions come with the base's release, hence no pins.
# hadolint ignore=DL3008
RUN if ! command -v python3 >/dev/null; then \
        apt-get update \
        && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
            python3 python3-venv ca-certificates \
        && rm -rf /var/lib/apt/lists/*; \
    fi

FROM with-python AS build
# Space-separated exact requirements, e.g. "apache-tvm==0.27.0.post1 nvidia-cuda-nvrtc==13.0.88 ...".
ARG PACKAGES
LABEL tvmrepro.stage="build"
COPY wheels/ /tmp/wheels/
# As in images/Dockerfile: complete pins (--no-deps); a wheelhouse makes it offline.
# hadolint ignore=SC2086
RUN test -n "${PACKAGES}" || { echo "build argument PACKAGES is required" >&2; exit 1; }; \
    if ls /tmp/wheels/*.whl >/dev/null 2>&1; then from="--no-index --find-links /tmp/wheels"; \
    else from=""; fi; \
    python3 -m venv /opt/tvm \
    && /opt/tvm/bin/pip install --no-cache-dir --no-deps --disable-pip-version-check $from ${PACKAGES} \
    && /opt/tvm/bin/python -c "import tvm, tvm.relax, tvm.script; print('TVM', tvm.__version__)"

FROM with-python
ARG ENV_ID=""
ARG PACKAGES
ARG HARNESS_DIGEST=""
LABEL org.opencontainers.image.title="tvm-repro pinned TVM environment (CUDA)" \
      tvmrepro.environment="${ENV_ID}" \
      tvmrepro.packages="${PACKAGES}" \
      tvmrepro.harness="${HARNESS_DIGEST}"
RUN useradd --system --uid 10001 --user-group --no-create-home --home-dir /tmp \
        --shell /usr/sbin/nologin sandbox \
    && mkdir -p /out \
    && touch /out/events.jsonl \
    && chown 10001:10001 /out/events.jsonl \
    && chmod 0600 /out/events.jsonl
COPY --from=build /opt/tvm /opt/tvm
COPY harness/ /opt/harness/harness/
# Compiled here: the sandbox may not write bytecode, and would compile the harness in every run.
RUN /opt/tvm/bin/python -m compileall -q /opt/harness
# The toolkit reads these; the official base sets them too, a stand-in base does not.
ENV NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    PATH=/opt/tvm/bin:/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/local/bin:/usr/bin:/bin \
    PYTHONPATH=/opt/harness \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp \
    LANG=C.UTF-8 \
    TVM_BACKTRACE=1
USER 10001:10001
WORKDIR /tmp
CMD ["python3", "-m", "harness", "--help"]
