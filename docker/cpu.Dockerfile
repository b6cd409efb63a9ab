# The suite on a CPU: the rehearsal (gloo, 4 processes) inside a container, as `make rehearse-docker` runs it.
#
#   docker/prepare-context.sh cpu          # wheels into docker/wheels/, host CAs into docker/certs/
#   docker build --network host -f docker/cpu.Dockerfile -t cardtime:cpu .
#   docker run --rm --network host --ipc=host -v "$PWD/runs:/runs" cardtime:cpu
#
# BASE is a build argument so that an engine without registry access can use a locally made
# Debian (docker/debian-base.sh). Debian bookworm's Python is 3.11, the CPU wheel's.
# Layers go from slowest-changing to fastest: a change under suite/ rebuilds only the COPYs at the end.
ARG BASE=debian:bookworm-slim
FROM ${BASE}

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV DEBIAN_FRONTEND=noninteractive \
    LANG=C.UTF-8

# DL3008: bookworm's point releases fix these versions; pinning them would only break the build.
# openssh-client: across nodes (RUNTIME=docker HOSTS=a,b) the suite in this image starts the other nodes' commands
# over ssh; provisioning/cluster/image.py refuses an image without it before the run.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates procps openssh-client \
 && rm -rf /var/lib/apt/lists/*

# Extra CAs (an inspecting proxy's) for pip's HTTPS; pip reads PIP_CERT, not the system store.
COPY docker/certs/ /usr/local/share/ca-certificates/
RUN update-ca-certificates >/dev/null
ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH

# torch from its CPU wheel in the context (~190 MB), never from PyPI, whose linux torch is a CUDA build.
COPY docker/wheels/torch/ /tmp/wheels/
RUN python3 -m venv /opt/venv \
 && pip install --quiet --find-links /tmp/wheels /tmp/wheels/torch-*.whl \
 && rm -rf /tmp/wheels

# The suite's dependencies, from pyproject.toml (rebuilt only when it changes): wheels from the
# context where prepare-context.sh put them, PyPI for the rest. Installing the project with no
# source yet registers `cardtime`; a .pth file puts the source, copied last, on the path.
COPY pyproject.toml docker/node_requirements.py /opt/cardtime/
COPY docker/wheels/deps/ /tmp/wheels/
# SC2046: node_requirements.py prints one requirement a word, for pip's argument list.
# hadolint ignore=SC2046
RUN pip install --quiet --find-links /tmp/wheels $(python /opt/cardtime/node_requirements.py /opt/cardtime/pyproject.toml) \
 && pip install --quiet --no-deps --no-build-isolation /opt/cardtime \
 && echo /opt/cardtime > "$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/cardtime-source.pth" \
 && rm -rf /tmp/wheels

ENV CARDTIME_IMAGE_KIND=cpu
WORKDIR /runs
ENTRYPOINT ["/usr/local/bin/cardtime-entrypoint"]
CMD ["run", "--profile", "gloo-cpu", "--out", "/runs"]

# The suite itself: the only layers a code change rebuilds (no RUN: seconds).
COPY docker/entrypoint.sh /usr/local/bin/cardtime-entrypoint
COPY suite/ /opt/cardtime/suite/
COPY reports/ /opt/cardtime/reports/
COPY provisioning/ /opt/cardtime/provisioning/
ARG CARDTIME_COMMIT=unknown
ENV CARDTIME_COMMIT=${CARDTIME_COMMIT}
