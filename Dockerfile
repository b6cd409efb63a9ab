# The CUDA image: nccl-tests (built from its release tag, with MPI), Nsight Systems' CLI, torch and the suite.
#
#   make image                                    # docker build -t cardtime:cuda .
#   make image-push IMAGE=registry/name:tag       # pre-build once; `make remote IMAGE=…` then pulls it
#   docker run --rm --gpus all --ipc=host --network=host --ulimit memlock=-1 --ulimit stack=67108864 \
#       -v "$PWD/runs:$PWD/runs" cardtime:cuda run --profile nccl-gpu --out "$PWD/runs"
#
# Base: NVIDIA's CUDA *devel* image (nvcc, NCCL headers and library, Ubuntu 24.04) plus torch's
# own CUDA build from PyPI, rather than an NGC PyTorch release. The deciding reason: torch is then
# the very release the rehearsal ran (pyproject.toml's pin), where NGC ships its own pre-release
# build tied to its monthly CUDA/NCCL bundle. Size and first build come out close (estimates:
# ~8 GB to pull, ~17 GB unpacked, against NGC's ~10 GB / 20+ GB, which would save the torch
# install but not the nccl-tests compile). MPI and nsys are one apt line each. BASE may still name
# an NGC PyTorch image: each step below installs only what the base lacks (NCCL headers, nsys, torch).
#
# Layers go from slowest-changing to fastest: a change under suite/ rebuilds only the COPYs at the end.
# Written for the classic builder and BuildKit alike (no cache mounts, no heredocs), so the same
# file builds through `docker build` on a rented host and through the Docker SDK.
ARG BASE=nvidia/cuda:12.9.1-devel-ubuntu24.04
FROM ${BASE}

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV DEBIAN_FRONTEND=noninteractive \
    LANG=C.UTF-8

# Build tools for nccl-tests, Open MPI (nccl-tests' multi-process launcher), Python for the venv,
# and what the topology stage reads (numactl, lspci).
# DL3008: the distribution's point release fixes these versions; the versions that matter are
# printed by the entry point and recorded in every run's manifest.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      build-essential git ca-certificates curl gnupg \
      libopenmpi-dev openmpi-bin \
      python3 python3-venv python3-dev \
      numactl pciutils procps \
 && rm -rf /var/lib/apt/lists/*

# Extra CAs (an inspecting proxy's) for git, curl and pip; pip reads PIP_CERT, not the system store.
COPY docker/certs/ /usr/local/share/ca-certificates/
RUN update-ca-certificates >/dev/null
ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1

# NCCL's headers and library: in CUDA devel images already; from NVIDIA's CUDA repository otherwise.
# DL3008: the repository's NCCL is built for the base's CUDA release; any pin would have to follow it.
# hadolint ignore=DL3008
RUN if [ ! -e /usr/include/nccl.h ]; then \
      apt-get update && apt-get install -y --no-install-recommends libnccl2 libnccl-dev \
      && rm -rf /var/lib/apt/lists/*; \
    fi

# nccl-tests from its upstream release tag, with MPI (multi-process and multi-node runs).
# NVCC_GENCODE: Ampere (A100, sm_80), Hopper (H100/H200, sm_90), Blackwell (B200, sm_100) plus PTX
# for what comes next; nccl-tests' default list is twice as long and doubles the compile time.
ARG NCCL_TESTS_VERSION=v2.19.6
ARG NVCC_GENCODE="-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_100,code=sm_100 -gencode=arch=compute_100,code=compute_100"
ARG MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi
RUN git clone --quiet --depth 1 --branch "${NCCL_TESTS_VERSION}" https://github.com/NVIDIA/nccl-tests.git /tmp/nccl-tests \
 && make -C /tmp/nccl-tests -j"$(nproc)" MPI=1 MPI_HOME="${MPI_HOME}" CUDA_HOME=/usr/local/cuda \
      NCCL_HOME=/usr NVCC_GENCODE="${NVCC_GENCODE}" >/tmp/nccl-tests-build.log \
 && install -d /opt/nccl-tests/bin \
 && install -m 0755 /tmp/nccl-tests/build/*_perf /opt/nccl-tests/bin/ \
 && echo "${NCCL_TESTS_VERSION}" > /opt/nccl-tests/VERSION \
 && rm -rf /tmp/nccl-tests /tmp/nccl-tests-build.log
# The bandwidth stage looks for *_perf in CARDTIME_NCCL_TESTS_DIR, then on PATH.
ENV CARDTIME_NCCL_TESTS_DIR=/opt/nccl-tests/bin \
    PATH=/opt/nccl-tests/bin:$PATH \
    OMPI_ALLOW_RUN_AS_ROOT=1 \
    OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

ARG NSYS_PACKAGE=""
# Nsight Systems' CLI from NVIDIA's CUDA repository (configured in every nvidia/cuda image), unless
# the base has nsys already. The package matches the base's CUDA release (CUDA_VERSION, set by the
# base): cuda-nsight-systems-12-9 for 12.9.1. The build fails here, not on the rented box, without it.
# DL3008: the package name already carries the CUDA release; NSYS_PACKAGE= pins another.
# hadolint ignore=DL3008
RUN if ! command -v nsys >/dev/null; then \
      pkg="${NSYS_PACKAGE:-cuda-nsight-systems-$(echo "${CUDA_VERSION:?the base sets no CUDA_VERSION: pass --build-arg NSYS_PACKAGE=}" | cut -d. -f1,2 | tr . -)}" \
      && apt-get update && apt-get install -y --no-install-recommends "$pkg" \
      && rm -rf /var/lib/apt/lists/* \
      && nsys_bin="$(find /opt/nvidia /usr/local/cuda*/ -path '*/bin/nsys' -type f 2>/dev/null | sort | tail -1)" \
      && ln -sf "$nsys_bin" /usr/local/bin/nsys; \
    fi \
 && nsys --version

# torch: the release the rehearsal ran, its CUDA build (which brings its own NCCL and cuDNN as
# wheels); TORCH_INDEX_URL picks another CUDA flavour for an older driver, e.g.
# https://download.pytorch.org/whl/cu126. A base with torch already (NGC) keeps its own.
ARG TORCH_INDEX_URL=""
COPY pyproject.toml docker/node_requirements.py /opt/cardtime/
RUN if python3 -c 'import torch' 2>/dev/null; then \
      ln -s "$(command -v python3)" /usr/local/bin/python 2>/dev/null || true; \
    else \
      python3 -m venv /opt/venv \
      && /opt/venv/bin/pip install --quiet ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} \
           "$(sed -n 's/^ *"\(torch==[^"]*\)".*/\1/p' /opt/cardtime/pyproject.toml)"; \
    fi
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH

# The suite's other dependencies from pyproject.toml (rebuilt only when it changes). Installing the
# project before its source registers `cardtime`; a .pth file puts the source, copied last, on the path.
# SC2046: node_requirements.py prints one requirement a word, for pip's argument list.
# hadolint ignore=SC2046
RUN pip install --quiet $(python /opt/cardtime/node_requirements.py /opt/cardtime/pyproject.toml --without torch) \
 && pip install --quiet --no-deps --no-build-isolation /opt/cardtime \
 && echo /opt/cardtime > "$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/cardtime-source.pth"

ENV CARDTIME_IMAGE_KIND=cuda
WORKDIR /runs
ENTRYPOINT ["/usr/local/bin/cardtime-entrypoint"]
CMD ["run", "--profile", "nccl-gpu", "--out", "/runs"]

# The suite itself: the only layers a code change rebuilds (no RUN: seconds).
COPY docker/entrypoint.sh /usr/local/bin/cardtime-entrypoint
COPY suite/ /opt/cardtime/suite/
COPY reports/ /opt/cardtime/reports/
COPY provisioning/ /opt/cardtime/provisioning/
ARG CARDTIME_COMMIT=unknown
ENV CARDTIME_COMMIT=${CARDTIME_COMMIT}
