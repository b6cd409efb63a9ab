# The CUDA image: nccl-tests (built from its release tag, with MPI), torch and the suite, on the Debian base
# the CPU image uses, with every CUDA piece from PyPI's NVIDIA wheels.
#
#   make image                                    # docker/prepare-context.sh cuda, then the build: cardtime:cuda
#   make image-push IMAGE=registry/name:tag       # pre-build once; `make remote IMAGE=…` then pulls it
#   docker run --rm --gpus all --ipc=host --network=host --ulimit memlock=-1 --ulimit stack=67108864 \
#       -v "$PWD/runs:$PWD/runs" cardtime:cuda run --profile nccl-gpu --out "$PWD/runs"
#
# One source of CUDA: the wheels torch's own metadata pins. torch 2.13.0's CUDA build requires
# cuda-toolkit 13.0.3 and nvidia-nccl-cu13 2.29.7; the image installs exactly those (nvcc, cudart, CCCL
# and the CRT headers compile nccl-tests; NCCL's wheel is the one library both nccl-tests and torch load),
# then torch, which finds its pins already satisfied. No multi-GB CUDA devel base and no registry: the
# base is debian:bookworm-slim (or, where no registry answers, the Debian docker/debian-base.sh imports),
# with Debian's g++, make and Open MPI. The line's numbers are suite/hardware/cuda_lines.py's table
# (tests/unit/test_cuda_image.py keeps the two equal); CUDA_LINE=cu126 passes that line's arguments.
#
# Build arguments that change what the image holds (the defaults are the user's box):
#   TORCH_BUILD=cuda|cpu   cpu: torch's CPU wheel from the context (docker/wheels/torch/) instead of the
#                          ~3 GB CUDA build; CI uses it, the CUDA wheels (toolkit, NCCL) are the same.
#   NCCL_TESTS_TARBALL=    a tarball in docker/vendor/ (sha256 NCCL_TESTS_SHA256 checked) instead of
#                          GitHub's release tag (commit NCCL_TESTS_COMMIT checked); CI cannot reach GitHub.
#   NSYS=1|0               Nsight Systems' CLI from NVIDIA's apt repository (on neither PyPI nor Debian main);
#                          when the repository does not answer the image has no nsys, the build goes on and the
#                          profile stage says so and uses torch.profiler.
#
# Layers go from slowest-changing to fastest: a change under suite/ rebuilds only the COPYs at the end.
# Written for the classic builder and BuildKit alike (no cache mounts, no heredocs), so the same
# file builds through `docker build` on a rented host and through the Docker SDK.
ARG BASE=debian:bookworm-slim
FROM ${BASE}

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV DEBIAN_FRONTEND=noninteractive \
    LANG=C.UTF-8

# Build tools for nccl-tests (g++, make; nvcc comes as a wheel), Open MPI (nccl-tests' multi-process
# launcher), ssh (a multi-node run reaches the other nodes from inside the image), git (the release tag's
# clone), Python for the venv, what the topology stage reads (numactl, lspci) and burnin's ib_write_bw (perftest).
# DL3008: bookworm's point releases fix these versions; the versions that matter are printed by the
# entry point and recorded in every run's manifest.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      g++ make git ca-certificates curl gnupg \
      libopenmpi-dev openmpi-bin openssh-client \
      python3 python3-venv \
      numactl pciutils procps \
      rdma-core ibverbs-providers ibverbs-utils perftest \
 && rm -rf /var/lib/apt/lists/*

# Extra CAs (an inspecting proxy's) for git, curl and pip; pip reads PIP_CERT, not the system store.
COPY docker/certs/ /usr/local/share/ca-certificates/
RUN update-ca-certificates >/dev/null
ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH

# The CUDA wheels, then CUDA_HOME and NCCL_HOME as nccl-tests' Makefile wants them ({bin,include,lib64}):
# links into the wheels, which install under site-packages/nvidia/ (cu13/{bin,include,lib,nvvm} for
# CUDA 13, nccl/{include,lib}). The wheels ship sonames only, so the unversioned names the linker asks
# for are added. An ld.so.conf.d entry makes the two lib folders the loader's (the binaries carry no
# RPATH), for nccl-tests, ldd and anything else in the image alike.
ARG CUDA_LINE=cu130
ARG CUDA_WHEELS="cuda-toolkit[nvcc,cudart,cccl,crt]==13.0.3"
ARG NCCL_WHEEL=nvidia-nccl-cu13==2.29.7
# SC2086: CUDA_WHEELS is a list of requirements, one a word.
# DL3013: every requirement is pinned (==) in CUDA_WHEELS and NCCL_WHEEL, which hadolint cannot read.
# DL3003: the `cd` is inside a command substitution, for `ls` there alone.
# SC2012: `ls` lists sonames, which the wheel names plainly.
# The loop over nvidia/*/ ends on nccl/ (sorted after cu13/ and CUDA 12's cuda_*/), whose `continue` gives
# the loop its status 0; a folder without bin/, include/ or lib/ is skipped by its own test.
# hadolint ignore=SC2086,DL3013,DL3003,SC2012
RUN python3 -m venv /opt/venv \
 && pip install --quiet ${CUDA_WHEELS} "${NCCL_WHEEL}" \
 && site="$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
 && install -d /opt/cuda/lib64 /opt/nccl/lib \
 && for part in "$site"/nvidia/*/; do \
      [ "$(basename "$part")" = nccl ] && continue; \
      for sub in bin include nvvm; do [ -d "$part$sub" ] && cp -rs "$part$sub" /opt/cuda/; done; \
      [ -d "${part}lib" ] && ln -sf "${part}"lib/* /opt/cuda/lib64/; \
    done \
 && cudart="$(cd /opt/cuda/lib64 && ls libcudart.so.* | sort -V | head -n 1)" \
 && ln -sf "$cudart" /opt/cuda/lib64/libcudart.so \
 && ln -s "$site/nvidia/nccl/include" /opt/nccl/include \
 && ln -s "$site/nvidia/nccl/lib/libnccl.so.2" /opt/nccl/lib/libnccl.so.2 \
 && ln -s libnccl.so.2 /opt/nccl/lib/libnccl.so \
 && printf '%s\n' "$site/nvidia/nccl/lib" /opt/cuda/lib64 > /etc/ld.so.conf.d/cardtime-cuda-wheels.conf \
 && ldconfig \
 && nvcc_major="$(/opt/cuda/bin/nvcc --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')" \
 && nccl_major="$(echo "${NCCL_WHEEL%%=*}" | sed -n 's/.*-cu\([0-9]*\)$/\1/p')" \
 && line_major="$(echo "${CUDA_LINE}" | sed -n 's/^cu\([0-9][0-9]\).*/\1/p')" \
 && if [ "$nvcc_major" != "$line_major" ] || [ "$nccl_major" != "$line_major" ]; then \
      echo "build arguments name two CUDA lines: CUDA_LINE ${CUDA_LINE}, nvcc ${nvcc_major}, NCCL_WHEEL ${NCCL_WHEEL}: pass one line's arguments (make image CUDA_LINE=…)" >&2; exit 1; \
    fi
ENV CUDA_HOME=/opt/cuda \
    PATH=/opt/venv/bin:/opt/cuda/bin:$PATH \
    CARDTIME_CUDA_LINE=${CUDA_LINE}

# nccl-tests from its upstream release tag, with MPI (multi-process and multi-node runs), against the
# NCCL wheel. The source: GitHub's tag, its commit checked, or (NCCL_TESTS_TARBALL, CI) a tarball of that
# tag in the context, its sha256 checked. NVCC_GENCODE (the line's, suite/hardware/cuda_lines.py): a cubin for the
# first architecture of every major the line's nvcc claims (a cubin runs on later minors of its major:
# sm_80's on sm_86/sm_89, sm_120's on sm_121) plus PTX of the newest for what comes next.
# NCCL_VERSION beside the binaries is the version they were compiled against (the manifest records it).
ARG NCCL_TESTS_VERSION=v2.19.6
ARG NCCL_TESTS_COMMIT=a0b82b2260cf5152b9f8c061bbf7eaf0ba096432
ARG NCCL_TESTS_TARBALL=""
ARG NCCL_TESTS_SHA256=85c65a240432a5bd8bf8598ac235582921a96e8a968a8a675d23419478a4ab9c
ARG NVCC_GENCODE="-gencode=arch=compute_75,code=sm_75 -gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_100,code=sm_100 -gencode=arch=compute_110,code=sm_110 -gencode=arch=compute_120,code=sm_120 -gencode=arch=compute_120,code=compute_120"
ARG MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi
COPY docker/vendor/ /tmp/vendor/
RUN if [ -n "${NCCL_TESTS_TARBALL}" ]; then \
      echo "${NCCL_TESTS_SHA256}  /tmp/vendor/${NCCL_TESTS_TARBALL}" | sha256sum --check --quiet \
      || { echo "docker/vendor/${NCCL_TESTS_TARBALL} is not nccl-tests ${NCCL_TESTS_VERSION} (sha256 differs from ${NCCL_TESTS_SHA256})" >&2; exit 1; }; \
      install -d /tmp/nccl-tests && tar -xzf "/tmp/vendor/${NCCL_TESTS_TARBALL}" -C /tmp/nccl-tests --strip-components=1; \
    else \
      git clone --quiet --depth 1 --branch "${NCCL_TESTS_VERSION}" https://github.com/NVIDIA/nccl-tests.git /tmp/nccl-tests \
      && commit="$(git -C /tmp/nccl-tests rev-parse HEAD)" \
      && if [ "$commit" != "${NCCL_TESTS_COMMIT}" ]; then echo "nccl-tests tag ${NCCL_TESTS_VERSION} is commit $commit, not ${NCCL_TESTS_COMMIT}: the tag moved; check it before building" >&2; exit 1; fi; \
    fi \
 && make -C /tmp/nccl-tests/src -j"$(nproc)" MPI=1 MPI_HOME="${MPI_HOME}" CUDA_HOME=/opt/cuda \
      NCCL_HOME=/opt/nccl NVCC_GENCODE="${NVCC_GENCODE}" >/tmp/nccl-tests-build.log 2>&1 \
      || { tail -40 /tmp/nccl-tests-build.log >&2; exit 1; } \
 && install -d /opt/nccl-tests/bin \
 && install -m 0755 /tmp/nccl-tests/build/*_perf /opt/nccl-tests/bin/ \
 && echo "${NCCL_TESTS_VERSION}" > /opt/nccl-tests/VERSION \
 && echo "${NVCC_GENCODE}" > /opt/nccl-tests/NVCC_GENCODE \
 && sed -n 's/^#define NCCL_\(MAJOR\|MINOR\|PATCH\) *\([0-9]*\).*/\2/p' /opt/nccl/include/nccl.h | paste -sd. > /opt/nccl-tests/NCCL_VERSION \
 && rm -rf /tmp/nccl-tests /tmp/nccl-tests-build.log /tmp/vendor
# The bandwidth stage looks for *_perf in CARDTIME_NCCL_TESTS_DIR, then on PATH.
ENV CARDTIME_NCCL_TESTS_DIR=/opt/nccl-tests/bin \
    PATH=/opt/venv/bin:/opt/cuda/bin:/opt/nccl-tests/bin:$PATH \
    OMPI_ALLOW_RUN_AS_ROOT=1 \
    OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# torch, the release the rehearsal ran (pyproject.toml's pin). TORCH_BUILD=cuda: PyPI's torch, the CUDA
# build of this line, whose own pins (the wheels above) are already met, so pip adds cuDNN, cuBLAS & co.
# and nothing of CUDA twice; TORCH_INDEX_URL names another index (the cu126 line's). TORCH_BUILD=cpu: the
# CPU wheel from the context. Then the check that torch's CUDA is the line's.
ARG TORCH_BUILD=cuda
ARG TORCH_INDEX_URL=""
COPY pyproject.toml docker/node_requirements.py /opt/cardtime/
# docker/wheels/ is there only when docker/prepare-context.sh made it: README.md, always there, keeps the
# COPY from failing without it (the wildcard without its trailing slash: with one it matches nothing).
COPY docker/vendor/README.md docker/wheel[s] /tmp/wheels/
# DL3013: torch's pin is pyproject.toml's (read into torch_req), NCCL's is NCCL_WHEEL's.
# hadolint ignore=DL3013
RUN torch_req="$(sed -n 's/^ *"\(torch==[^"]*\)".*/\1/p' /opt/cardtime/pyproject.toml)" \
 && case "${TORCH_BUILD}" in \
      cuda) pip install --quiet ${TORCH_INDEX_URL:+--index-url "${TORCH_INDEX_URL}"} "$torch_req" "${NCCL_WHEEL}" ;; \
      cpu) [ -n "$(find /tmp/wheels/torch/ -name 'torch-*.whl' 2>/dev/null)" ] \
           || { echo "TORCH_BUILD=cpu needs torch's CPU wheel in docker/wheels/torch/ (docker/prepare-context.sh cuda-cpu)" >&2; exit 1; } \
           && pip install --quiet --find-links /tmp/wheels/torch /tmp/wheels/torch/torch-*.whl ;; \
      *) echo "TORCH_BUILD=${TORCH_BUILD}: use cuda or cpu" >&2; exit 1 ;; \
    esac \
 && torch_cuda="$(python -c 'import torch; print(torch.version.cuda or "")')" \
 && if [ "${TORCH_BUILD}" = cuda ] && [ "${torch_cuda%%.*}" != "$(echo "${CUDA_LINE}" | cut -c3-4)" ]; then \
      echo "torch is a CUDA ${torch_cuda:-none} build in a ${CUDA_LINE} image: TORCH_INDEX_URL must be the line's index" >&2; exit 1; \
    fi \
 && pip show "${NCCL_WHEEL%%=*}" | grep -x "Version: ${NCCL_WHEEL##*==}" >/dev/null \
 && echo "${TORCH_BUILD}" > /opt/cardtime-torch-build \
 && rm -rf /tmp/wheels

ARG NSYS=1
ARG NSYS_PACKAGE=cuda-nsight-systems-13-0
ARG NSYS_REPO=https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64
# Nsight Systems' CLI from NVIDIA's CUDA repository for Debian 12 (the keyring package, then the line's
# nsys package, which puts nsys on PATH). Optional: whatever fails here leaves the image without nsys,
# says so in the build log, and the build goes on (the profile stage then uses torch.profiler).
# DL3008: the package name carries the CUDA release; NSYS_PACKAGE= names another.
# hadolint ignore=DL3008
RUN if [ "${NSYS}" = 1 ]; then \
      ( curl -fsSL --retry 2 -o /tmp/cuda-keyring.deb "${NSYS_REPO}/cuda-keyring_1.1-1_all.deb" \
        && dpkg -i /tmp/cuda-keyring.deb >/dev/null \
        && apt-get update -qq && apt-get install -y -qq --no-install-recommends "${NSYS_PACKAGE}" >/dev/null \
        && command -v nsys >/dev/null && nsys --version ) \
      || echo "nsys: not installed (${NSYS_REPO} or ${NSYS_PACKAGE} unavailable); the profile stage will use torch.profiler"; \
      rm -rf /tmp/cuda-keyring.deb /var/lib/apt/lists/*; \
    else echo "nsys: not installed (NSYS=0)"; fi

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
