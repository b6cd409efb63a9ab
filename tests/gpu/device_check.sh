#!/usr/bin/env bash
# What one GPU can check of the nccl-gpu face, in one command and at most 8 minutes, with every raw output kept.
#
#   tests/gpu/device_check.sh [OUT_DIR]            # default $OUT, else ./device-check
#   tests/gpu/device_check.sh --dry-run [OUT_DIR]  # the plan: every step, its limit and the total, run nothing
#   tests/gpu/device_check.sh --cpu [OUT_DIR]      # the same steps on gloo-cpu (checks this script on a CPU;
#                                                  # the steps that need a GPU are skipped, saying so)
#   DEVICE_CHECK_STEPS=torch,versions tests/gpu/device_check.sh   # only these steps (a rerun of a few)
#
# A torch at least MIN_TORCH (a CUDA build on a GPU; the one a lent machine brings — torch 2.11.0+cu130 on the H200 —
# is taken as it is, its version recorded in python.txt and versions.txt), found by the first step, in this order:
#   PYTHON=/path/to/python          an interpreter you name
#   $OUT_DIR/venv                   made by an earlier run of this script
#   TORCH_WHEELS=DIR (default tests/gpu/wheels)   a wheel folder: a venv is made in $OUT_DIR/venv from it,
#                                   offline. Make it once where the network is:
#       pip download --only-binary=:all: --python-version 3.11 --platform manylinux_2_28_x86_64 \
#           -d tests/gpu/wheels torch==2.13.0 $(python docker/node_requirements.py --without torch)
#     (PyPI's linux torch 2.13.0 is the CUDA 13.0 build; ~3 GB with its nvidia-* wheels; git-ignored.)
#   .venv/bin/python, then python3     when their torch is usable (≥ MIN_TORCH; a CUDA build on a GPU)
# Anything else (an older torch, a CPU build on a GPU, none) fails the step, and nothing after it runs.
#
# The steps, one-card stages first, each with a limit; the limits and the reserve add up to under 480 s
# (tests/unit/test_device_check_script.py checks the sum and the order):
#   torch      the pinned torch above                                         → python.txt
#   versions   driver, compute capability, CUDA, torch, torch's NCCL, nsys, nccl-tests → versions.txt
#   captures   nvidia-smi -L, topo -m, -q, nvlink -s, the compute_cap query   → captures/*.txt
#   onecard    suite run --profile nccl-1gpu --stages nccl1gpu,pinned,precision,baseline: NCCL on one card (two
#              ranks refused), pinned copies and overlap, mixed precision, the bf16 baseline; each stage's limit
#              at least the suite's own estimate for it (`make plan PROFILE=nccl-1gpu`: nccl1gpu 85 s). The
#              memory stage's OOM search (~80 s) does not fit the 8 minutes beside them: DEVICE_CHECK_STEPS=memory
#              runs it alone                                                    → runs/<run-id>/ (raw/ inside)
#   parse      the suite's topology parser on the capture                     → parsed/topo.json
#   links      suite run --profile nccl-1gpu --stages topology,bandwidth: the sweep is that profile's,
#              up to 256 MiB (under the 1-GiB cap), nccl-tests when its binaries exist → runs/<run-id>/
#   check      suite check on both runs: every fail verdict named             → check.json, links-check.json
#   report     python -m reports on the one-card run                          → its report.html
# Two-GPU drills (pp, cp) are tests/gpu/test_pp_gpu.py and test_cp_ep_gpu.py on a box with two cards.
#
# Prints one line per step as it ends (ok | FAIL | skip, seconds, limit, what) and keeps them in
# summary.txt; every step's output is in steps/<name>.log. Exit 0 when no step failed; 1 naming the
# failed steps; 2 on bad usage.

# The step functions run through `bash -c` (so that timeout can bound them): shellcheck cannot see the calls.
# shellcheck disable=SC2317
set -uo pipefail

BUDGET_S=480        # the whole check: 8 minutes on one GPU
RESERVE_S=15        # kept for the summary after the last step
KILL_AFTER_S=5      # a step that ignores its TERM gets KILL this much later: counted in its limit
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
TORCH_PIN="$(sed -n 's/^ *"torch==\([^"]*\)".*/\1/p' "$REPO/pyproject.toml")"
MIN_TORCH=2.9       # the oldest torch the suite's stages run on (DTensor, FSDP2 and the profiler as they use them)
TORCH_WHEELS="${TORCH_WHEELS:-$REPO/tests/gpu/wheels}"
PYTHON_GIVEN="${PYTHON:-}"
PYTHON="${PYTHON:-python3}"

ONECARD_PROFILE=nccl-1gpu
[ "$MODE" = cpu ] && ONECARD_PROFILE=gloo-cpu
# The stages' own limits fit inside their step's, with ~15 s for the launcher and the run's own start.
ONECARD_STAGES=nccl1gpu,pinned,precision,baseline
ONECARD_TIMEOUTS=nccl1gpu=90,pinned=15,precision=25,baseline=30
LINKS_STAGES=topology,bandwidth
LINKS_TIMEOUTS=topology=20,bandwidth=45

mkdir -p "$OUT_DIR/steps" "$OUT_DIR/captures" "$OUT_DIR/parsed" "$OUT_DIR/runs" || exit 2
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
SUMMARY="$OUT_DIR/summary.txt"
: > "$SUMMARY"
FAILED=()
PLANNED_S=0

# step NAME LIMIT_S NEEDS WHAT -- COMMAND…   (NEEDS: gpu = skipped in --cpu mode, any = always runs)
step() {
  local name="$1" limit="$2" needs="$3" what="$4"
  shift 5
  local left=$((BUDGET_S - SECONDS - RESERVE_S - KILL_AFTER_S))
  if [ -n "${DEVICE_CHECK_STEPS:-}" ] && [[ ",$DEVICE_CHECK_STEPS," != *",$name,"* ]]; then return 0; fi
  if [ "$MODE" = dry ]; then
    PLANNED_S=$((PLANNED_S + limit + KILL_AFTER_S))
    printf 'step %-9s ≤%4ss  %s\n    %s\n' "$name" "$limit" "$what" "$*"
    return 0
  fi
  if [ "$needs" = gpu ] && [ "$MODE" = cpu ]; then
    record skip "$name" 0 "$limit" "$what: needs a GPU (--cpu)"
    return 0
  fi
  if [ "$left" -lt 10 ]; then
    record FAIL "$name" 0 "$limit" "$what: not started, the ${BUDGET_S}-s budget is spent"
    return 1
  fi
  [ "$limit" -gt "$left" ] && limit="$left"
  local start=$SECONDS code
  # bash -c: a step may be one of the functions below (exported), which timeout cannot run by itself
  timeout --kill-after="$KILL_AFTER_S" "$limit" bash -c '"$@"' "$name" "$@" > "$OUT_DIR/steps/$name.log" 2>&1
  code=$?
  local took=$((SECONDS - start))
  if [ "$code" -eq 0 ]; then
    record ok "$name" "$took" "$limit" "$what"
  elif [ "$code" -eq 124 ] || [ "$code" -eq 137 ]; then
    record FAIL "$name" "$took" "$limit" "$what: timed out after ${limit} s (steps/$name.log)"
  else
    record FAIL "$name" "$took" "$limit" "$what: exit $code — $(tail -n 1 "$OUT_DIR/steps/$name.log" | cut -c1-160)"
  fi
  return "$code"
}

record() {  # record STATUS NAME SECONDS LIMIT WHAT: one line, printed as the step ends and kept in summary.txt
  printf '%-4s  %-9s %4ss of ≤%3ss  %s\n' "$1" "$2" "$3" "$4" "$5" | tee -a "$SUMMARY"
  [ "$1" = FAIL ] && FAILED+=("$2")
  return 0
}

torch_is_usable() {  # torch_is_usable PYTHON: its torch is at least MIN_TORCH (and a CUDA build unless --cpu)
  "$1" -c 'import re, sys, torch
least, mode = sys.argv[1], sys.argv[2]
have = tuple(int(x) for x in re.findall(r"\d+", torch.__version__.split("+")[0])[:2])
ok = have >= tuple(int(x) for x in least.split(".")) and (mode == "cpu" or torch.version.cuda is not None)
print(f"{sys.executable}: torch {torch.__version__} (CUDA {torch.version.cuda})")
sys.exit(0 if ok else 1)' "$MIN_TORCH" "$MODE" 2>&1
}

usable_torch() {  # the first interpreter of the header's list whose torch is usable → python.txt
  local candidate
  rm -f "$OUT_DIR/python.txt"
  if [ -n "$PYTHON_GIVEN" ]; then
    torch_is_usable "$PYTHON_GIVEN" && echo "$PYTHON_GIVEN" > "$OUT_DIR/python.txt" && return 0
    echo "PYTHON=$PYTHON_GIVEN has no torch ≥ $MIN_TORCH$([ "$MODE" = cpu ] || echo ' (a CUDA build)')"
    return 1
  fi
  if [ -x "$OUT_DIR/venv/bin/python" ] && torch_is_usable "$OUT_DIR/venv/bin/python"; then
    echo "$OUT_DIR/venv/bin/python" > "$OUT_DIR/python.txt"
    return 0
  fi
  if compgen -G "$TORCH_WHEELS/torch-$TORCH_PIN*.whl" > /dev/null; then
    echo "a venv from the wheels in $TORCH_WHEELS (offline)"
    local deps
    deps="$(python3 "$REPO/docker/node_requirements.py" "$REPO/pyproject.toml" --without torch)" || return 1
    # shellcheck disable=SC2086  # one requirement a word
    python3 -m venv "$OUT_DIR/venv" &&
      "$OUT_DIR/venv/bin/pip" install --quiet --no-index --find-links "$TORCH_WHEELS" "torch==$TORCH_PIN" $deps &&
      torch_is_usable "$OUT_DIR/venv/bin/python" && echo "$OUT_DIR/venv/bin/python" > "$OUT_DIR/python.txt" && return 0
    echo "the venv from $TORCH_WHEELS failed (above)"
    return 1
  fi
  for candidate in "$REPO/.venv/bin/python" "$(command -v python3)"; do
    [ -x "$candidate" ] && torch_is_usable "$candidate" && echo "$candidate" > "$OUT_DIR/python.txt" && return 0
  done
  echo "no torch ≥ $MIN_TORCH: pass PYTHON=, or put torch==$TORCH_PIN's wheels in $TORCH_WHEELS (the pip download line in this script's header)"
  return 1
}

versions() {
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(hostname)"
  command -v nvidia-smi > /dev/null &&
    nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max --format=csv
  "$PYTHON" - "$MODE" <<'PY' || return 1
import sys
import torch
print("python:", sys.version.split()[0], sys.executable)
print("torch:", torch.__version__, "cuda:", torch.version.cuda)
if torch.cuda.is_available():
    print("torch nccl:", ".".join(map(str, torch.cuda.nccl.version())))
    for i in range(torch.cuda.device_count()):
        free, total = torch.cuda.mem_get_info(i)
        cap = "sm_%d%d" % torch.cuda.get_device_capability(i)
        print(f"cuda:{i}: {torch.cuda.get_device_name(i)} ({cap}), {free / 2**30:.1f} of {total / 2**30:.1f} GiB free")
elif sys.argv[1] == "gpu":
    sys.exit("torch sees no CUDA device: a CPU build of torch, or the driver is not visible (--gpus all?)")
PY
  echo "nsys: $(command -v nsys > /dev/null && nsys --version || echo 'not on PATH (the profile stage uses torch.profiler)')"
  echo "nccl-tests: $(command -v all_reduce_perf || ls "${CARDTIME_NCCL_TESTS_DIR:-/nonexistent}"/all_reduce_perf 2>/dev/null || echo 'not found (the bandwidth stage skips it)')"
}

versions_to_file() {
  set -o pipefail  # a step runs in its own bash: the script's options do not reach it
  versions | tee "$OUT_DIR/versions.txt"
}

captures() {
  local c="$OUT_DIR/captures"
  nvidia-smi -L > "$c/nvidia-smi-L.txt" &&
    nvidia-smi topo -m > "$c/nvidia-smi-topo-m.txt" &&
    nvidia-smi -q > "$c/nvidia-smi-q.txt" &&
    nvidia-smi --query-gpu=index,name,compute_cap,driver_version --format=csv > "$c/nvidia-smi-query-compute-cap.csv" ||
    return 1
  nvidia-smi nvlink -s > "$c/nvidia-smi-nvlink-s.txt" 2>&1 || echo "nvidia-smi nvlink -s: no NVLink reported"
  wc -c "$c"/*
}

suite_run() {  # suite_run NAME STAGES TIMEOUTS: a run of its own, its directory in NAME-run-dir.txt
  rm -f "$OUT_DIR/$1-run-dir.txt"
  "$PYTHON" -m suite run --profile "$ONECARD_PROFILE" --nproc 1 --stages "$2" --stage-timeout "$3" \
    --out "$OUT_DIR/runs" --record-last "$OUT_DIR/$1-run-dir.txt"
  local code=$?
  # 1 is a verdict "no" (the check step names them): a complete run to judge, if the run was recorded
  if [ "$code" -le 1 ] && [ -s "$OUT_DIR/$1-run-dir.txt" ]; then return 0; fi
  echo "suite run exited $code$([ -s "$OUT_DIR/$1-run-dir.txt" ] || echo ', no run directory recorded')"
  return $((code == 0 ? 1 : code))
}

check_runs() {  # every fail verdict of both runs, named
  local name run code=0
  for name in onecard links; do
    run="$(cat "$OUT_DIR/$name-run-dir.txt" 2>/dev/null)" || { echo "$name: no run directory recorded"; code=1; continue; }
    "$PYTHON" -m suite check "$run" --json > "$OUT_DIR/$name-check.json" || code=1
    "$PYTHON" - "$name" "$OUT_DIR/$name-check.json" <<'PY' || code=1
import json, sys
data = json.load(open(sys.argv[2]))
bad = [v for v in data.get("verdicts", []) if v.get("status") == "fail"]
print(f"{sys.argv[1]}: {data.get('counts')}; unfinished: {data.get('unfinished') or 'none'}")
for v in bad:
    print(f"fail {v['id']}: {v.get('observed', '')} — {v.get('reason', '')}"[:300])
print(f"{sys.argv[1]} failed verdicts: " + (", ".join(v["id"] for v in bad) or "none"))
PY
  done
  return "$code"
}

report() {
  local run
  run="$(cat "$OUT_DIR/onecard-run-dir.txt" 2>/dev/null)" || { echo "no run directory recorded by the onecard step"; return 1; }
  "$PYTHON" -m reports "$run"
}

parse_topo() {
  "$PYTHON" -m suite parse topo "$OUT_DIR/captures/nvidia-smi-topo-m.txt" > "$OUT_DIR/parsed/topo.json" &&
    head -c 600 "$OUT_DIR/parsed/topo.json"
}

export -f versions versions_to_file captures parse_topo suite_run check_runs report torch_is_usable usable_torch
export OUT_DIR PYTHON PYTHON_GIVEN MODE TORCH_PIN MIN_TORCH TORCH_WHEELS REPO ONECARD_PROFILE

main() {
  step torch 80 any "a torch ≥ $MIN_TORCH (PYTHON=, \$OUT_DIR/venv, TORCH_WHEELS=, .venv, python3)" -- usable_torch
  if [ "$MODE" != dry ]; then
    [ -s "$OUT_DIR/python.txt" ] || return 1  # without the pin nothing after it would say anything true
    PYTHON="$(cat "$OUT_DIR/python.txt")"
    export PYTHON
  fi
  step versions 20 any "driver, compute capability, CUDA, torch and NCCL versions" -- versions_to_file
  step captures 15 gpu "nvidia-smi -L, topo -m, -q, the compute_cap query, nvlink -s kept as captures" -- captures
  step onecard 180 any "suite run --profile $ONECARD_PROFILE --stages $ONECARD_STAGES" -- \
    suite_run onecard "$ONECARD_STAGES" "$ONECARD_TIMEOUTS"
  step parse 10 gpu "the suite's topology parser on the capture" -- parse_topo
  step links 75 any "suite run --profile $ONECARD_PROFILE --stages $LINKS_STAGES (sweep ≤ 256 MiB)" -- \
    suite_run links "$LINKS_STAGES" "$LINKS_TIMEOUTS"
  step check 15 any "every verdict of both runs; a fail names its id" -- check_runs
  step report 20 any "the one-card run's report.html" -- report
}

main
if [ "$MODE" = dry ]; then
  echo "plan: ≤ $((PLANNED_S + RESERVE_S)) s (the steps' limits and ${KILL_AFTER_S} s of kill grace each: ${PLANNED_S} s; reserve ${RESERVE_S} s) of the ${BUDGET_S}-s budget"
  exit 0
fi

echo "device check ($MODE, $ONECARD_PROFILE) in $OUT_DIR, ${SECONDS} s:"
cat "$SUMMARY"
if [ -f "$OUT_DIR/steps/check.log" ]; then grep 'failed verdicts:' "$OUT_DIR/steps/check.log"; fi
if [ "${#FAILED[@]}" -gt 0 ]; then
  echo "FAILED: ${FAILED[*]} (see $OUT_DIR/steps/<name>.log)"
  exit 1
fi
echo "all steps passed"
exit 0
