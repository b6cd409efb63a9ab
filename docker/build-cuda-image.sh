#!/usr/bin/env bash
# Build the CUDA image (Dockerfile) the way CI does, or the user's way, and record how long it took and its size.
#
#   docker/build-cuda-image.sh ci      # cardtime:cuda-ci: local Debian base, torch's CPU wheel, nccl-tests from
#                                      # ../shared/vendor, no nsys (NVIDIA's repository is not reachable from CI)
#   docker/build-cuda-image.sh box     # cardtime:cuda: the Dockerfile's defaults (CUDA torch, the tag from GitHub,
#                                      # nsys when NVIDIA's repository answers)
#   docker/build-cuda-image.sh ci KEY=VALUE…   # more build arguments, e.g. NVCC_GENCODE=… for a quicker
#                                              # compile of fewer architectures (recorded; the image's own
#                                              # /opt/nccl-tests/NVCC_GENCODE says which)
#
# .ci/run calls the ci kind before `make test`, so the test suite's 12 minutes do not hold this build (the wheels'
# download and nccl-tests' compile take ~10 minutes on 2 cores the first time; layers are cached after).
# Environment: IMAGE (the tag), NCCL_TESTS_TARBALL (ci: ../shared/vendor/nccl-tests-v2.19.6.tar.gz),
# PY (.venv/bin/python), CARDTIME_CACHE (/var/cache/cardtime: where the record goes, build-<tag>.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:-ci}
shift || true
py=${PY:-.venv/bin/python}
cache=${CARDTIME_CACHE:-/var/cache/cardtime}
args=()
case $kind in
  ci)
    image=${IMAGE:-cardtime:cuda-ci}
    tarball=${NCCL_TESTS_TARBALL:-../shared/vendor/nccl-tests-v2.19.6.tar.gz}
    [[ -s $tarball ]] || { echo "no nccl-tests tarball at $tarball (NCCL_TESTS_TARBALL=…; CI has ../shared/vendor)" >&2; exit 2; }
    docker/debian-base.sh cardtime-base:bookworm
    NCCL_TESTS_TARBALL=$tarball PY=$py docker/prepare-context.sh cuda-cpu
    args=(--base cardtime-base:bookworm --network host --build-arg TORCH_BUILD=cpu --build-arg NSYS=0
          --build-arg "NCCL_TESTS_TARBALL=$(basename "$tarball")")
    ;;
  box)
    image=${IMAGE:-cardtime:cuda}
    PY=$py docker/prepare-context.sh cuda
    ;;
  *) echo "usage: docker/build-cuda-image.sh ci|box" >&2; exit 2 ;;
esac
for item in "$@"; do args+=(--build-arg "$item"); done
started=$(date +%s)
"$py" -m provisioning image-build --dockerfile Dockerfile --tag "$image" "${args[@]}" --verbose
seconds=$(( $(date +%s) - started ))
size=$(docker image inspect --format '{{.Size}}' "$image")
mkdir -p "$cache"
record="$cache/build-${image//[:\/]/_}.txt"
printf 'image=%s\nkind=%s\nbuild_s=%s\nsize_bytes=%s\ndate=%s\ncpus=%s\nextra_args=%s\n' "$image" "$kind" "$seconds" \
  "$size" "$(date -u +%FT%TZ)" "$(nproc)" "$*" > "$record"
echo "built $image ($kind) in ${seconds} s, $((size / 1000000)) MB; recorded in $record"
