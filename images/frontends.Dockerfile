# The frontend flavour of one pinned environment: its plain image (BASE_IMAGE, the image
# `tvmrepro images build ENV` made, by id) plus the frontend packages (torch's CPU build, onnx,
# onnxruntime, onnxscript and what they pull in) in /opt/frontends, which the environment's
# Python finds through a .pth file. Built FROM the plain image, so the two share its layers; the
# plain image never carries torch (tvm-ffi imports torch whenever it finds it: `import tvm`
# 0.65 s -> 3.2 s). `tvmrepro images build ENV --frontends` passes the pins as build arguments
# and tags the image as the plain one plus "-frontends". The context holds this file and
# wheels/ (the frontend wheels, from a wheelhouse or torch's folder; possibly empty).
ARG BASE_IMAGE

FROM ${BASE_IMAGE} AS build
# Space-separated exact requirements, e.g. "torch==2.13.0 onnx==1.23.2 ...".
ARG FRONTEND_PACKAGES
# Where pip finds them: "--no-index --find-links /tmp/wheels" (a wheelhouse: no network),
# "--find-links /tmp/wheels" (torch from a folder, the rest from PyPI), or
# "--extra-index-url URL" (torch from an index of CPU builds; PyPI's torch is a CUDA build).
ARG PIP_SOURCE=""
LABEL tvmrepro.stage="build"
# Root for the install only: this stage is left behind, its last user never runs anything.
# hadolint ignore=DL3002
USER 0:0
COPY wheels/ /tmp/wheels/
# A directory of their own (--target) rather than /opt/tvm: the image below copies only it, so
# the plain image's /opt/tvm layer is shared, not copied again. The pins are complete: --no-deps.
# hadolint ignore=SC2086
RUN test -n "${FRONTEND_PACKAGES}" || { echo "build argument FRONTEND_PACKAGES is required" >&2; exit 1; }; \
    /opt/tvm/bin/pip install --no-cache-dir --no-deps --disable-pip-version-check \
        --target /opt/frontends ${PIP_SOURCE} ${FRONTEND_PACKAGES}

# The image itself: the plain image's layers, then /opt/frontends; the wheels stay behind.
FROM ${BASE_IMAGE}
ARG ENV_ID=""
ARG PACKAGES
ARG HARNESS_DIGEST=""
ARG PLAIN_IMAGE=""
LABEL org.opencontainers.image.title="tvm-repro pinned TVM environment, with its frontends" \
      tvmrepro.environment="${ENV_ID}" \
      tvmrepro.packages="${PACKAGES}" \
      tvmrepro.harness="${HARNESS_DIGEST}" \
      tvmrepro.plain-image="${PLAIN_IMAGE}"
USER 0:0
COPY --from=build /opt/frontends /opt/frontends
# The .pth puts /opt/frontends after the environment's own site-packages (no package is in
# both); then what a report imports must import, TVM's importers included.
RUN /opt/tvm/bin/python -c "import pathlib, sysconfig; \
pathlib.Path(sysconfig.get_paths()['purelib'], 'tvmrepro-frontends.pth').write_text('/opt/frontends\n')" \
    && /opt/tvm/bin/python -c "import torch, onnx, onnxruntime, tvm.relax.frontend.onnx, \
tvm.relax.frontend.torch; print('torch', torch.__version__, 'onnx', onnx.__version__)"
USER 10001:10001
