#!/usr/bin/env bash
# Every nccl-gpu path one GPU can run, in one command and at most 8 minutes, with what it saw kept.
#
#   tests/gpu/device_check.sh [OUT_DIR]            # default $OUT, else ./device-check
#   tests/gpu/device_check.sh --dry-run [OUT_DIR]  # print the steps and their commands, run nothing
#   tests/gpu/device_check.sh --cpu [OUT_DIR]      # the same steps on gloo-cpu (checks this script on a CPU;
#                                                  # the steps that need a GPU are skipped, saying so)
#   PYTHON=/path/to/python tests/gpu/device_check.sh   # an interpreter with CUDA torch (default: .venv, python3)
#
# What it runs (one card; NCCL refuses two ranks on one device, so nothing here needs a second):
#   versions     driver, CUDA, torch, torch's NCCL, nsys, nccl-tests as found  → versions.txt
#   captures     nvidia-smi -L, topo -m, -q, nvlink -s                         → captures/*.txt
#   health       the health stage on this card (nvidia-smi -q, kernel log, GEMM and copy bandwidth) → runs/
#   health       python -m suite run --stages health --nproc 1: nvidia-smi -q idle and under load, nvlink,
#                the kernel log, IB ports, dcgmi diag -r 1 when installed, GEMM and copies → runs/<run-id>/
#   parse        the suite's own topology parser on that capture               → parsed/topo.json
#   suite        python -m suite run --profile nccl-gpu --nproc 1: topology (capture and parse), bandwidth
#                (the primitive probe, then the torch sweep with one rank, memory-capped; nccl-tests when its
#                binaries exist), crossover (hand ring/tree), baseline (bf16, MFU), profile (nsys or torch.profiler and
#                the overlap analysis)                                        → runs/<run-id>/
#   check        python -m suite check on that run: every fail verdict named  → check.json
#   report       python -m reports: the run's report.html
#   onecard      python -m suite run --profile nccl-1gpu --stages memory,precision,nccl1gpu,pinned, then
#                suite check on it: the memory budget, mixed precision, NCCL on one card (two ranks refused),
#                pinned copies and copy/compute overlap                        → runs/<run-id>/, onecard-check.json
#   pytest       the one-GPU tests under tests/gpu (two-GPU ones skip; cp/ep below) → steps/pytest.log
#   pp           the pipeline over NCCL at PP = 2 (tests/gpu/test_pp_gpu.py): needs two GPUs, so on one
#                card it is skipped, saying why — a pipeline needs two ranks and NCCL refuses two ranks
#                on one device; the one-card parts (the CUDA-event clock) run in the pytest step
#   ep           expert parallel over NCCL at EP = 1 (tests/gpu/test_cp_ep_gpu.py -k test_ep_): one rank
#                dispatches to all its experts; the golden check against one process runs on one card
#   cp           context parallel at CP = 2 (tests/gpu/test_cp_ep_gpu.py -k test_cp_): needs two GPUs (the
#                sequence is split over two ranks, one per card), so on one card it is skipped, saying why
# Other one-card drills add a `step` line in main() below, inside the same 8-minute budget.
#
# Writes summary.txt (one line per step: ok | FAIL | skip, seconds, what) and prints it; every step's
# output is in steps/<name>.log. Exit 0 when no step failed; 1 naming the failed steps; 2 on bad usage.

# The step functions run through `bash -c` (so that timeout can bound them): shellcheck cannot see the calls.
# shellcheck disable=SC2317
set -uo pipefail

BUDGET_S=480        # the whole check: 8 minutes on one GPU
RESERVE_S=15        # kept for the summary after the last step
MODE=gpu
OUT_DIR=""
for arg in "$@"; do
  case "$arg" in
    --dry-run) MODE=dry ;;
    --cpu) MODE=cpu ;;
    -h|--help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    -*) echo "device_check: unknown option $arg (use --dry-run, --cpu or an output folder)" >&2; exit 2 ;;
    *) OUT_DIR="$arg" ;;
  esac
done
OUT_DIR="${OUT_DIR:-${OUT:-./device-check}}"

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO" || exit 2
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
if [ -n "${PYTHON:-}" ]; then :
elif [ -x "$REPO/.venv/bin/python" ]; then PYTHON="$REPO/.venv/bin/python"
else PYTHON="$(command -v python3 || echo python3)"; fi

PROFILE=nccl-gpu
[ "$MODE" = cpu ] && PROFILE=gloo-cpu
STAGES=topology,bandwidth,crossover,baseline,profile
STAGE_TIMEOUTS=topology=40,bandwidth=120,crossover=60,baseline=60,profile=100
ONECARD_PROFILE=nccl-1gpu
[ "$MODE" = cpu ] && ONECARD_PROFILE=gloo-cpu
ONECARD_STAGES=memory,precision,nccl1gpu,pinned
ONECARD_TIMEOUTS=memory=90,precision=60,nccl1gpu=150,pinned=60

mkdir -p "$OUT_DIR/steps" "$OUT_DIR/captures" "$OUT_DIR/parsed" "$OUT_DIR/runs" || exit 2
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
SUMMARY="$OUT_DIR/summary.txt"
: > "$SUMMARY"
FAILED=()

# step NAME TIMEOUT_S NEEDS WHAT -- COMMAND…   (NEEDS: gpu = skipped in --cpu mode, gpus2 = skipped with
# fewer than two GPUs visible, any = always runs)
step() {
  local name="$1" limit="$2" needs="$3" what="$4"
  shift 5
  local left=$((BUDGET_S - SECONDS - RESERVE_S))
  if [ "$MODE" = dry ]; then
    printf 'step %-9s ≤%4ss  %s\n    %s\n' "$name" "$limit" "$what" "$*"
    return 0
  fi
  if [ "$needs" = gpu ] && [ "$MODE" = cpu ]; then
    record skip "$name" 0 "$what: needs a GPU (--cpu)"
    return 0
  fi
  if [ "$needs" = gpus2 ] && [ "$(gpu_count)" -lt 2 ]; then
    record skip "$name" 0 "$what: needs 2 GPUs, $(gpu_count) visible (NCCL refuses two ranks on one device)"
    return 0
  fi
  if [ "$left" -lt 10 ]; then
    record FAIL "$name" 0 "$what: not started, the ${BUDGET_S}-s budget is spent"
    return 1
  fi
  [ "$limit" -gt "$left" ] && limit="$left"
  local start=$SECONDS code
  # bash -c: a step may be one of the functions below (exported), which timeout cannot run by itself
  timeout --kill-after=10 "$limit" bash -c '"$@"' "$name" "$@" > "$OUT_DIR/steps/$name.log" 2>&1
  code=$?
  local took=$((SECONDS - start))
  if [ "$code" -eq 0 ]; then
    record ok "$name" "$took" "$what"
  elif [ "$code" -eq 124 ] || [ "$code" -eq 137 ]; then
    record FAIL "$name" "$took" "$what: timed out after ${limit} s (steps/$name.log)"
  else
    record FAIL "$name" "$took" "$what: exit $code — $(tail -n 1 "$OUT_DIR/steps/$name.log" | cut -c1-160)"
  fi
  return "$code"
}

gpu_count() {
  if [ "$MODE" = cpu ]; then echo 0; else nvidia-smi -L 2>/dev/null | grep -c '^GPU '; fi
}

record() {  # record STATUS NAME SECONDS WHAT
  printf '%-4s  %-9s %4ss  %s\n' "$1" "$2" "$3" "$4" >> "$SUMMARY"
  [ "$1" = FAIL ] && FAILED+=("$2")
  return 0
}

versions() {
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(hostname)"
  command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max --format=csv
  "$PYTHON" - "$MODE" <<'EOF' || return 1
import sys
import torch
print("python:", sys.version.split()[0])
print("torch:", torch.__version__, "cuda:", torch.version.cuda)
if torch.cuda.is_available():
    print("torch nccl:", ".".join(map(str, torch.cuda.nccl.version())))
    for i in range(torch.cuda.device_count()):
        free, total = torch.cuda.mem_get_info(i)
        print(f"cuda:{i}: {torch.cuda.get_device_name(i)}, {free / 2**30:.1f} of {total / 2**30:.1f} GiB free")
elif sys.argv[1] == "gpu":
    sys.exit("torch sees no CUDA device: a CPU build of torch, or the driver is not visible (--gpus all?)")
EOF
  echo "nsys: $(command -v nsys > /dev/null && nsys --version || echo 'not on PATH (the profile stage uses torch.profiler)')"
  echo "nccl-tests: $(command -v all_reduce_perf || ls "${CARDTIME_NCCL_TESTS_DIR:-/nonexistent}"/all_reduce_perf 2>/dev/null || echo 'not found (the bandwidth stage skips it)')"
}

captures() {
  local c="$OUT_DIR/captures"
  nvidia-smi -L > "$c/nvidia-smi-L.txt" &&
    nvidia-smi topo -m > "$c/nvidia-smi-topo-m.txt" &&
    nvidia-smi -q > "$c/nvidia-smi-q.txt" || return 1
  nvidia-smi nvlink -s > "$c/nvidia-smi-nvlink-s.txt" 2>&1 || echo "nvidia-smi nvlink -s: no NVLink reported"
  wc -c "$c"/*.txt
}

suite_run() {
  rm -f "$OUT_DIR/run-dir.txt"
  "$PYTHON" -m suite run --profile "$PROFILE" --nproc 1 --stages "$STAGES" --stage-timeout "$STAGE_TIMEOUTS" \
    --out "$OUT_DIR/runs" --record-last "$OUT_DIR/run-dir.txt"
  local code=$?
  # 1 is a verdict "no" (the check step names them): a complete run to judge, if the run was recorded
  if [ "$code" -le 1 ] && [ -s "$OUT_DIR/run-dir.txt" ]; then return 0; fi
  echo "suite run exited $code$([ -s "$OUT_DIR/run-dir.txt" ] || echo ', no run directory recorded')"
  return $((code == 0 ? 1 : code))
}

check_run() {
  local run
  run="$(cat "$OUT_DIR/run-dir.txt" 2>/dev/null)" || { echo "no run directory recorded by the suite step"; return 1; }
  "$PYTHON" -m suite check "$run" --json > "$OUT_DIR/check.json"
  local code=$?
  "$PYTHON" - "$OUT_DIR/check.json" <<'EOF'
import json, sys
data = json.load(open(sys.argv[1]))
bad = [v for v in data.get("verdicts", []) if v.get("status") == "fail"]
print(f"{data.get('counts')}; unfinished: {data.get('unfinished') or 'none'}")
for v in bad:
    print(f"fail {v['id']}: {v.get('observed', '')} — {v.get('reason', '')}"[:300])
print("failed verdicts: " + (", ".join(v["id"] for v in bad) or "none"))
EOF
  return "$code"
}

report() {
  local run
  run="$(cat "$OUT_DIR/run-dir.txt" 2>/dev/null)" || { echo "no run directory recorded by the suite step"; return 1; }
  "$PYTHON" -m reports "$run"
}

main() {
  step versions 60 any "driver, CUDA, torch and NCCL versions" -- versions_to_file
  step captures 30 gpu "nvidia-smi -L, topo -m, -q, nvlink -s kept as captures" -- captures
  step health 120 any "the health stage on this card (its raw outputs under runs/<run-id>/raw/health/)" -- \
    "$PYTHON" -m suite run --profile "$PROFILE" --nproc 1 --stages health --stage-timeout health=110 --out "$OUT_DIR/runs"
  step parse 30 gpu "the suite's topology parser on the capture" -- parse_topo
  step suite 400 any "suite run --profile $PROFILE --nproc 1 --stages $STAGES" -- suite_run
  step check 30 any "every verdict of that run; a fail names its id" -- check_run
  step report 60 any "the run's report.html" -- report
  step onecard 240 any "suite run --profile $ONECARD_PROFILE --stages $ONECARD_STAGES, checked" -- onecard_run
  step pytest 90 gpu "tests/gpu on this card (two-GPU tests skip; cp/ep in their own steps)" -- \
    "$PYTHON" -m pytest -q -p no:cacheprovider -m gpu tests/gpu -x --ignore=tests/gpu/test_cp_ep_gpu.py
  step pp 120 gpus2 "pipeline at PP = 2 over NCCL: golden, bubble, activation memory" -- \
    "$PYTHON" -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_pp_gpu.py -k nccl
  step ep 90 gpu "expert parallel at EP = 1 over NCCL: tokens per expert, output and grads vs one process" -- \
    "$PYTHON" -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_cp_ep_gpu.py -k test_ep_
  step cp 120 gpus2 "context parallel at CP = 2 over NCCL: ring, Ulysses and torch's context_parallel()" -- \
    "$PYTHON" -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_cp_ep_gpu.py -k test_cp_
}

onecard_run() {  # the one-card profile's own stages in a run of their own, then every fail verdict named
  rm -f "$OUT_DIR/onecard-run-dir.txt"
  "$PYTHON" -m suite run --profile "$ONECARD_PROFILE" --stages "$ONECARD_STAGES" --stage-timeout "$ONECARD_TIMEOUTS" \
    --out "$OUT_DIR/runs" --record-last "$OUT_DIR/onecard-run-dir.txt"
  local code=$? run
  run="$(cat "$OUT_DIR/onecard-run-dir.txt" 2>/dev/null)" || { echo "suite run exited $code, no run directory"; return 1; }
  "$PYTHON" -m suite check "$run" --json > "$OUT_DIR/onecard-check.json" || code=1
  "$PYTHON" -c 'import json, sys; d = json.load(open(sys.argv[1])); print(d.get("counts")); [print("fail", v["id"], v.get("observed", "")[:200]) for v in d.get("verdicts", []) if v.get("status") == "fail"]' \
    "$OUT_DIR/onecard-check.json"
  return "$code"
}

versions_to_file() {
  set -o pipefail  # a step runs in its own bash: the script's options do not reach it
  versions | tee "$OUT_DIR/versions.txt"
}

parse_topo() {
  "$PYTHON" -m suite parse topo "$OUT_DIR/captures/nvidia-smi-topo-m.txt" > "$OUT_DIR/parsed/topo.json" &&
    head -c 600 "$OUT_DIR/parsed/topo.json"
}

export -f versions versions_to_file captures parse_topo suite_run check_run report onecard_run
export OUT_DIR PYTHON PROFILE MODE STAGES STAGE_TIMEOUTS ONECARD_PROFILE ONECARD_STAGES ONECARD_TIMEOUTS
main
[ "$MODE" = dry ] && exit 0

echo "device check ($MODE, $PROFILE) in $OUT_DIR, ${SECONDS} s:"
cat "$SUMMARY"
if [ -f "$OUT_DIR/steps/check.log" ]; then grep '^failed verdicts:' "$OUT_DIR/steps/check.log"; fi
if [ "${#FAILED[@]}" -gt 0 ]; then
  echo "FAILED: ${FAILED[*]} (see $OUT_DIR/steps/<name>.log)"
  exit 1
fi
echo "all steps passed"
exit 0
