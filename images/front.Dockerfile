# The API's front in compose: nginx, from the distribution's packages, buffering every request
# and answer so that slow or reconnecting clients cost it a connection, not one of the API's
# threads (the API runs with TVMREPRO_FRONT=0 behind it). Built from the repository root
# (`docker compose build`). BASE_IMAGE: a Debian release, or, where no registry or package
# mirror can be reached, a local one that has nginx already (scripts/base-image with
# BASE_PACKAGES=nginx-light): apt is run only where nginx is missing.
ARG BASE_IMAGE=debian:bookworm-slim

FROM ${BASE_IMAGE}
LABEL org.opencontainers.image.title="tvm-repro front (nginx)"
# hadolint ignore=DL3008
RUN if ! command -v nginx >/dev/null; then \
        apt-get update && apt-get install -y --no-install-recommends nginx-light \
        && rm -rf /var/lib/apt/lists/*; \
    fi
COPY images/front/nginx.conf /etc/tvmrepro/nginx.conf
USER 65534:65534
EXPOSE 8080
CMD ["nginx", "-c", "/etc/tvmrepro/nginx.conf", "-e", "stderr"]
