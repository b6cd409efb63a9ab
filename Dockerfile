# The CUDA image: nccl-tests (built from its release tag, with MPI), Nsight Systems' CLI, torch and the suite.
#
#   make image                                    # docker build -t cardtime:cuda .
#   make image-push IMAGE=registry/name:tag       # pre-build once; `make remote IMAGE=…` then pulls it
#   docker run --rm --gpus all --ipc=host --network=host --ulimit memlock=-1 --ulimit stack=67108864 \
#       -v "$PWD/runs:$PWD/runs" cardtime:cuda run --profile nccl-gpu --out "$PWD/runs"
#
# Base: NVIDIA's CUDA *devel* image (nvcc, Ubuntu 24.04) plus torch's own CUDA build, rather than
# an NGC PyTorch release: torch is then the very release the rehearsal ran (pyproject.toml's pin),
# where NGC ships its own pre-release build tied to its monthly CUDA/NCCL bundle. MPI and nsys are
# one apt line each.
#
# One CUDA line for everything in the image: the base's toolkit (which compiles nccl-tests), torch's
# build, nsys, and the NCCL that nccl-tests links, which is the NCCL wheel torch itself loads, so
# that `torch_vs_nccl` compares two programs on one library. The lines are suite/cuda_lines.py's
# table; the defaults below are its newest line, CUDA 13.0 (driver >= 580). For the CUDA 12 line
# (drivers 525–579), `make image CUDA_LINE=cu126` passes that line's four build arguments:
#   --build-arg BASE=nvidia/cuda:12.6.3-devel-ubuntu24.04
#   --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu126
#   --build-arg NCCL_PACKAGE=nvidia-nccl-cu12
#   --build-arg NVCC_GENCODE="-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90"
# A build whose arguments name two lines stops at the first RUN after the torch install, saying which.
#
# Layers go from slowest-changing to fastest: a change under suite/ rebuilds only the COPYs at the end.
# Written for the classic builder and BuildKit alike (no cache mounts, no heredocs), so the same
# file builds through `docker build` on a rented host and through the Docker SDK.
ARG BASE=nvidia/cuda:13.0.2-devel-ubuntu24.04
FROM ${BASE}

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV DEBIAN_FRONTEND=noninteractive \
    LANG=C.UTF-8

# Build tools for nccl-tests, Open MPI (nccl-tests' multi-process launcher), ssh (a multi-node run reaches
# the other nodes from inside the image), Python for the venv, and what the topology stage reads (numactl, lspci).
# DL3008: the distribution's point release fixes these versions; the versions that matter are
# printed by the entry point and recorded in every run's manifest.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      build-essential git ca-certificates curl gnupg \
      libopenmpi-dev openmpi-bin openssh-client \
      python3 python3-venv python3-dev \
      numactl pciutils procps \
      rdma-core ibverbs-providers ibverbs-utils \
 && rm -rf /var/lib/apt/lists/*

# Extra CAs (an inspecting proxy's) for git, curl and pip; pip reads PIP_CERT, not the system store.
COPY docker/certs/ /usr/local/share/ca-certificates/
RUN update-ca-certificates >/dev/null
ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1

# torch: the release the rehearsal ran, from the wheel index of the base's CUDA line; it brings
# its own NCCL (NCCL_PACKAGE) and cuDNN as wheels. Then the build checks that base, index, NCCL
# wheel and torch's own CUDA are one major, and exposes the NCCL wheel as /opt/nccl (include/,
# lib/) for nccl-tests to compile and link against.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cu130
ARG NCCL_PACKAGE=nvidia-nccl-cu13
COPY pyproject.toml docker/node_requirements.py /opt/cardtime/
RUN base_major="${CUDA_VERSION:?the base sets no CUDA_VERSION: use an nvidia/cuda devel image}" \
 && base_major="${base_major%%.*}" && index_major="$(echo "${TORCH_INDEX_URL##*/cu}" | cut -c1-2)" && nccl_major="${NCCL_PACKAGE##*-cu}" \
 && if [ "$index_major" != "$base_major" ] || [ "$nccl_major" != "$base_major" ]; then \
      echo "build arguments name two CUDA lines: base CUDA ${CUDA_VERSION}, TORCH_INDEX_URL ${TORCH_INDEX_URL}, NCCL_PACKAGE ${NCCL_PACKAGE}: pass all four of one line (make image CUDA_LINE=…)" >&2; exit 1; \
    fi \
 && python3 -m venv /opt/venv \
 && /opt/venv/bin/pip install --quiet --index-url "$TORCH_INDEX_URL" \
      "$(sed -n 's/^ *"\(torch==[^"]*\)".*/\1/p' /opt/cardtime/pyproject.toml)" \
 && torch_major="$(/opt/venv/bin/python -c 'import torch; print(torch.version.cuda.split(".")[0])')" \
 && if [ "$torch_major" != "$base_major" ]; then echo "torch is a CUDA ${torch_major} build on a CUDA ${CUDA_VERSION} base" >&2; exit 1; fi \
 && /opt/venv/bin/pip show "$NCCL_PACKAGE" >/dev/null \
 && site="$(/opt/venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
 && header="$(find "$site/nvidia" -name nccl.h -path '*include*' | head -n 1)" \
 && library="$(find "$site/nvidia" -name 'libnccl.so.2' | head -n 1)" \
 && test -n "$header" && test -n "$library" \
 && install -d /opt/nccl/lib \
 && ln -s "$(dirname "$header")" /opt/nccl/include \
 && ln -s "$library" /opt/nccl/lib/libnccl.so.2 && ln -s libnccl.so.2 /opt/nccl/lib/libnccl.so
# nccl-tests and torch load the same libnccl.so.2 (torch finds it by its own rpath, nccl-tests here).
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    LD_LIBRARY_PATH=/opt/nccl/lib

# nccl-tests from its upstream release tag, with MPI (multi-process and multi-node runs), against
# torch's NCCL. NVCC_GENCODE (the line's): Ampere (sm_80), Hopper (sm_90), and on CUDA 13 Blackwell
# (sm_100), plus PTX for what comes next; nccl-tests' default list is twice as long.
# NCCL_VERSION beside the binaries is the version they were compiled against (the manifest records it).
ARG NCCL_TESTS_VERSION=v2.19.6
ARG NVCC_GENCODE="-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_100,code=sm_100 -gencode=arch=compute_100,code=compute_100"
ARG MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi
RUN git clone --quiet --depth 1 --branch "${NCCL_TESTS_VERSION}" https://github.com/NVIDIA/nccl-tests.git /tmp/nccl-tests \
 && make -C /tmp/nccl-tests -j"$(nproc)" MPI=1 MPI_HOME="${MPI_HOME}" CUDA_HOME=/usr/local/cuda \
      NCCL_HOME=/opt/nccl NVCC_GENCODE="${NVCC_GENCODE}" >/tmp/nccl-tests-build.log \
 && install -d /opt/nccl-tests/bin \
 && install -m 0755 /tmp/nccl-tests/build/*_perf /opt/nccl-tests/bin/ \
 && echo "${NCCL_TESTS_VERSION}" > /opt/nccl-tests/VERSION \
 && sed -n 's/^#define NCCL_\(MAJOR\|MINOR\|PATCH\) *\([0-9]*\).*/\2/p' /opt/nccl/include/nccl.h | paste -sd. > /opt/nccl-tests/NCCL_VERSION \
 && rm -rf /tmp/nccl-tests /tmp/nccl-tests-build.log
# The bandwidth stage looks for *_perf in CARDTIME_NCCL_TESTS_DIR, then on PATH.
ENV CARDTIME_NCCL_TESTS_DIR=/opt/nccl-tests/bin \
    PATH=/opt/nccl-tests/bin:$PATH \
    OMPI_ALLOW_RUN_AS_ROOT=1 \
    OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

ARG NSYS_PACKAGE=""
# Nsight Systems' CLI from NVIDIA's CUDA repository (configured in every nvidia/cuda image), unless
# the base has nsys already. The package matches the base's CUDA release (CUDA_VERSION, set by the
# base): cuda-nsight-systems-13-0 for 13.0.2. The build fails here, not on the rented box, without it.
# DL3008: the package name already carries the CUDA release; NSYS_PACKAGE= pins another.
# hadolint ignore=DL3008
RUN if ! command -v nsys >/dev/null; then \
      pkg="${NSYS_PACKAGE:-cuda-nsight-systems-$(echo "${CUDA_VERSION}" | cut -d. -f1,2 | tr . -)}" \
      && apt-get update && apt-get install -y --no-install-recommends "$pkg" \
      && rm -rf /var/lib/apt/lists/* \
      && nsys_bin="$(find /opt/nvidia /usr/local/cuda*/ -path '*/bin/nsys' -type f 2>/dev/null | sort | tail -1)" \
      && ln -sf "$nsys_bin" /usr/local/bin/nsys; \
    fi \
 && nsys --version

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
