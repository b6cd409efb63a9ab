#!/usr/bin/env bash
# Put what an image build takes from this machine into git-ignored folders of the build context:
#   docker/certs/         the CA certificates this host adds to the system's (an inspecting HTTPS proxy's)
#   docker/wheels/torch/  torch's CPU wheel and its dependencies   (cpu only: PyPI's linux torch is a CUDA build)
#   docker/wheels/deps/   wheels of the suite's node-side dependencies (cpu only: the build then needs no
#                         download; anything missing still comes from PyPI inside the build)
#   docker/vendor/        nccl-tests' release tarball, when NCCL_TESTS_TARBALL names one (the CUDA image's
#                         build then takes it, sha256 checked, instead of cloning the tag from GitHub)
#
#   docker/prepare-context.sh [cpu|cuda|cuda-cpu]   # from the repository root; PY (default .venv/bin/python)
#
# cuda-cpu: the CUDA image with torch's CPU wheel (TORCH_BUILD=cpu, as CI builds it): the cpu kind's wheels.
# NCCL_TESTS_TARBALL=../shared/vendor/nccl-tests-v2.19.6.tar.gz (CI) is copied into docker/vendor/.
#
# Wheels are fetched once into $CARDTIME_CACHE/wheels (default /var/cache/cardtime) by pip, through its
# configured sources, and linked into the context from there: a fresh clone (CI) reuses them.
set -euo pipefail
kind=${1:-cpu}
py=${PY:-.venv/bin/python}
cache=${CARDTIME_CACHE:-/var/cache/cardtime}/wheels
torch_req=$(sed -n 's/^ *"\(torch==[^"]*\)".*/\1/p' pyproject.toml)

mkdir -p docker/certs
find docker/certs -name '*.crt' -delete
for cert in /usr/local/share/ca-certificates/*.crt; do
  if [[ -e $cert ]]; then cp "$cert" docker/certs/; fi
done

find docker/vendor -name '*.tar.gz' -delete
if [[ -n ${NCCL_TESTS_TARBALL:-} ]]; then
  [[ -s $NCCL_TESTS_TARBALL ]] || { echo "NCCL_TESTS_TARBALL=$NCCL_TESTS_TARBALL: no such file" >&2; exit 1; }
  cp "$NCCL_TESTS_TARBALL" docker/vendor/
fi

rm -rf docker/wheels
mkdir -p docker/wheels  # the CUDA Dockerfile copies it, wheels or not
[[ $kind == cpu || $kind == cuda-cpu ]] || exit 0
download() {  # download DIR REQUIREMENT...: pip keeps files already there
  mkdir -p "$1"
  "$py" -m pip download --quiet --only-binary=:all: -d "$@" 2>&1 | grep -v 'is ignored: it is neither' >&2 || true
}
download "$cache/torch" "$torch_req"
compgen -G "$cache/torch/torch-*.whl" >/dev/null \
  || { echo "no $torch_req wheel for this Python: put the CPU one in $cache/torch/ (https://download.pytorch.org/whl/cpu)" >&2; exit 1; }
# shellcheck disable=SC2046  # one requirement a word
download "$cache/deps" $("$py" docker/node_requirements.py --without torch)
mkdir -p docker/wheels
cp -al "$cache/torch" "$cache/deps" docker/wheels/ 2>/dev/null || cp -a "$cache/torch" "$cache/deps" docker/wheels/
echo "build context: $(du -sh docker/wheels | cut -f1) of wheels in docker/wheels/, $(find docker/certs -name '*.crt' | wc -l) extra CA certificate(s)"
