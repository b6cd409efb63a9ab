#!/usr/bin/env bash
# The images' entry point: print the version of everything a result depends on, then run the suite.
#
#   docker run … IMAGE run --profile nccl-gpu --out /runs     # → python -m suite run …
#   docker run … IMAGE bash                                   # any command on PATH runs as itself
#
# The versions go first in the log so that a run that dies early still says what it ran on.
set -uo pipefail

version_of() {  # version_of NAME COMMAND...: the first line the command prints, or "none"
  local name=$1 out
  shift
  out=$("$@" 2>/dev/null | sed -n '/[0-9]/{p;q}') || true
  printf '%-12s %s\n' "$name" "${out:-none}"
}

print_versions() {
  echo "cardtime image ${CARDTIME_IMAGE_KIND:-?} (commit ${CARDTIME_COMMIT:-unknown})"
  version_of driver nvidia-smi --query-gpu=driver_version --format=csv,noheader
  version_of gpus sh -c 'nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | sed "s/^ *//" | paste -sd, -'
  echo "cuda-line    ${CARDTIME_CUDA_LINE:-none}"
  version_of cuda-toolkit sh -c 'nvcc --version | sed -n "s/.*release \([0-9.]*\).*/\1/p"'
  version_of nccl-wheel sh -c 'pip list 2>/dev/null | sed -n "s/^\(nvidia-nccl-cu[0-9]*\) *\([0-9.]*\)$/\1 \2/p"'
  version_of nccl-tests cat "${CARDTIME_NCCL_TESTS_DIR:-/opt/nccl-tests/bin}/../VERSION"
  version_of nccl-tests-nccl cat "${CARDTIME_NCCL_TESTS_DIR:-/opt/nccl-tests/bin}/../NCCL_VERSION"
  version_of nsys sh -c 'nsys --version | sed "s/.*version //"'
  version_of mpirun sh -c 'mpirun --allow-run-as-root --version | head -1'
  python - <<'PY' 2>&1
import platform
try:
    import torch
except Exception as e:  # the suite itself reports this properly; here we only show it
    print(f"{'torch':<12} not importable: {e}")
else:
    cuda = torch.version.cuda or "none, a CPU build"
    nccl = ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else "n/a (no CUDA device)"
    print(f"{'python':<12} {platform.python_version()}")
    print(f"{'torch':<12} {torch.__version__} (CUDA {cuda})")
    print(f"{'torch-nccl':<12} {nccl}")
    print(f"{'devices':<12} {torch.cuda.device_count() if torch.cuda.is_available() else 0} CUDA, {__import__('os').cpu_count()} CPUs")
PY
}

if [[ $# -gt 0 && $1 != -* ]] && command -v -- "$1" >/dev/null 2>&1; then
  exec "$@"
fi
print_versions
echo "---- python -m suite $*"
exec python -m suite "$@"
