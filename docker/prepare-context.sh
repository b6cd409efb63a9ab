#!/usr/bin/env bash
# Put what an image build needs from this machine into git-ignored folders of the build context:
#   docker/wheels/  torch's CPU wheel (cpu.Dockerfile only; PyPI's linux torch is a multi-GB CUDA build)
#   docker/certs/   the CA certificates this host adds to the system's (an inspecting HTTPS proxy's)
#
#   docker/prepare-context.sh [cpu|cuda]     # run from the repository root; PY (default .venv/bin/python)
set -euo pipefail
kind=${1:-cpu}
py=${PY:-.venv/bin/python}
torch_version=$(sed -n 's/^ *"torch==\([^"]*\)".*/\1/p' pyproject.toml)

mkdir -p docker/certs docker/wheels
find docker/certs -name '*.crt' -delete
for cert in /usr/local/share/ca-certificates/*.crt; do
  [[ -e $cert ]] && cp "$cert" docker/certs/
done
if [[ $kind == cpu ]] && ! compgen -G "docker/wheels/torch-$torch_version*.whl" >/dev/null; then
  # pip resolves torch==X against its configured sources (a local wheel folder, the CPU index);
  # --platform/--python-version make it pick the image's cp311 manylinux wheel whatever this host runs.
  "$py" -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
    --python-version 3.11 -d docker/wheels "torch==$torch_version" \
    || { echo "no torch==$torch_version CPU wheel for cp311: put one in docker/wheels/ (from https://download.pytorch.org/whl/cpu)" >&2; exit 1; }
fi
ls docker/wheels docker/certs | sed 's/^/  /'
