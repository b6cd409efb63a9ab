# cardtime — two commands on a fresh machine: `make rehearse` and `make test`.
SHELL := /bin/bash
export PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: help rehearse test bench lint format report demo
help:
	@echo "make rehearse   the whole suite on CPU (gloo, 4 processes), ending in runs/<id>/report.html"
	@echo "make rehearse PROFILE=nccl-1gpu   the one-card profile on a machine with one CUDA device"
	@echo "make test       the test suite"
	@echo "make test-load  the rehearsal's e2e tests 3 times beside 4 busy loops: fails if any verdict differs"
	@echo "make format     apply the house style (ruff: layout, import order); make lint checks it, as make test does"
	@echo "make golden     rewrite the report-structure golden file after an intended report change"
	@echo "make bench      timing figures (rehearsal wall time, report render time and size, harness overhead, parse of 50 MB inputs)"
	@echo "make demo       a GPU report in one command: suite ingest on real captured outputs kept in tests/data/"
	@echo "make plan       before renting: expected minutes per stage on the GPU profile, cost at RATE=\$$/hour"
	@echo "make remote     HOST=user@host[:port]: run on a rented host, fetch, report, archive (ARCHIVE=s3://…)"
	@echo "make remote     HOSTS=user@a,user@b | HOSTFILE=f: a multi-node run (RUNTIME=host|docker), fetched with every node's output"
	@echo "make slurm      PARTITION=… [NODES=2] [GPUS_PER_NODE=8] [SLURM_HOST=user@login]: the sbatch script, submitted, followed, reported"
	@echo "make remote-status HOST=…   where the host's run is"
	@echo 'make compare RUNS="runs/a runs/b"   runs side by side in runs/compare.html'
	@echo "make image      the CUDA image (nccl-tests, nsys, torch, the suite); make image-push IMAGE=registry/name:tag"
	@echo "make rehearse-docker   the rehearsal inside the CPU image"

# Command-line variables reach Python through the environment ("$$HOST"), never pasted into the recipe,
# so quotes, `;` or `$$(…)` in a value cannot run anything on this machine. ARGS and PYTEST_ARGS are split
# into words by bash ($${ARGS} unquoted), which runs nothing that is inside them.

# The venv is (re)built when pyproject.toml changes. torch==2.13.0 is pinned: pip takes the CPU
# build from local disk; an unpinned torch would pull a multi-GB CUDA build.
$(STAMP): pyproject.toml
	@test -x $(PY) || "$$PYTHON" -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	@touch $(STAMP)

# Each rehearsal records its run in a file of its own, so two at once each report their own run, and one that
# was refused (a bad PROFILE) reports nothing rather than the run before it; runs/LAST then names the newest.
export RUNS ?= runs
rehearse: $(STAMP)
	@mkdir -p "$$RUNS"; status=0; last=$$(mktemp "$$RUNS/.last.XXXXXX"); \
	$(PY) -m suite run --profile "$${PROFILE:-gloo-cpu}" --out "$$RUNS" --record-last "$$last" $${ARGS} || status=$$?; \
	if [ -s "$$last" ]; then \
	  $(PY) -m reports "$$(cat "$$last")" || status=$$((status ? status : 1)); \
	  cp "$$last" "$$RUNS/LAST"; \
	fi; rm -f "$$last"; exit $$status

# make demo: `suite ingest` on real public captures (sources in tests/data/*/README.md and the .json beside
# each): an 8×H100 NVSwitch box's `nvidia-smi topo -m` (an SGLang environment dump) and an 8×H100
# all_reduce_perf (p5.48xlarge, a separate box of the same build: the demo pairs them, it does not claim one
# box), plus a README that is not a tool output, listed and skipped. Ends in runs/<id>/report.html, INCONCLUSIVE
# (no health capture among them): ingest's exit 3, as `suite check` gives, is this demo's success.
DEMO_INPUTS := tests/data/topo/30-h100-8gpu-nv18-8nic-env-dump.txt \
	tests/data/nccl-tests/21-h100-all_reduce-8gpu-mpirun-tag-output.txt tests/data/nccl-tests/README.md
DEMO_GPU := NVIDIA H100 80GB HBM3
demo: $(STAMP)
	@mkdir -p runs
	$(PY) -m suite ingest $(DEMO_INPUTS) --gpu-model "$(DEMO_GPU)" --out runs --record-last runs/LAST || test $$? = 3

report: $(STAMP)
	$(PY) -m reports $${RUN:+"$$RUN"}

# make compare RUNS="runs/a runs/b ..." [OUT=runs/compare.html]: runs side by side, ratios to the first.
.PHONY: compare
compare: $(STAMP)
	@test -n "$$RUNS" || { echo 'usage: make compare RUNS="runs/a runs/b" [OUT=runs/compare.html]' >&2; exit 2; }
	$(PY) -m reports compare $$RUNS -o "$${OUT:-runs/compare.html}"

# The slowest tests are listed at the end so that a run over the 12-minute goal says where the time went.
# Two workers (pytest-xdist): the end-to-end tests in two serial lines, one per worker (the namespace labs; the
# rest), then the other modules (tests/parallel_groups.py); TEST_WORKERS=0 runs everything in this one process.
export PYTEST_ARGS ?= --durations=25
export TEST_WORKERS ?= 2
test: $(STAMP)
	$(PY) -m pytest -q -n "$$TEST_WORKERS" $${PYTEST_ARGS}

# The house style (pyproject.toml's [tool.ruff]): make test checks it (tests/unit/test_house_format.py).
format: $(STAMP)
	$(PY) -m ruff format --quiet .
	$(PY) -m ruff check --quiet --fix --select I .
lint: $(STAMP)
	$(PY) -m ruff format --check .
	$(PY) -m ruff check .

# make test-load [LOAD_RUNS=3] [LOAD_LOOPS=4]: the rehearsal's e2e tests beside busy loops (tests/loadgen.py),
# LOAD_RUNS times; prints the verdict ids whose status differed between runs and fails on any (tests/load_verdicts.py).
.PHONY: test-load
export LOAD_RUNS ?= 3
export LOAD_LOOPS ?= 4
test-load: $(STAMP)
	$(PY) -m tests.load_verdicts --runs "$$LOAD_RUNS" --loops "$$LOAD_LOOPS"

# The report-structure golden file (tests/data/report_structure.golden.txt): the test only compares;
# this is the one command that writes it. Review `git diff` before committing.
.PHONY: golden
golden: $(STAMP)
	$(PY) -m tests.update_golden

bench: $(STAMP)
	$(PY) -m tests.bench

# Multi-node: HOSTS=user@a,user@b[:port] or HOSTFILE=path (one node a line) instead of HOST= preflights every
#   node and refuses, in one line naming the node, any that is unreachable, differs from the first (GPUs,
#   driver, Python, remote folder) or that the first cannot reach over ssh; then the code on every node, the
#   venv on every node and `python -m suite run --nodes a,b` detached on the first node, followed, fetched
#   (raw/<stage>/<node>/), reported, archived (provisioning/drive.py). RUNTIME=docker / IMAGE=: one image
#   built (or pulled) on the first node, carried (or pulled) to the others, its ID checked on every node;
#   [NODE_SSH_CONFIG=: the ssh_config on the first node] [SOCKET_IFNAME=ens5] [NPROC=: processes per node]
#   [NODE_ADDRS=: each node's address toward the others (default: asked of the nodes)] [MASTER_PORT=29400]
#   [NCCL_ENV=file: NCCL/libfabric/UCX/CUDA settings, NAME=value a line, for every rank of every node]
# Remote (provisioning/): make remote HOST=user@host[:port] [PROFILE=nccl-gpu] [RUNTIME=docker|host]
#   [STAGES=a,b] [ARCHIVE=s3://bucket/prefix] [KEY=~/.ssh/id] [ACCEPT_NEW_HOST=1] [ALLOW_DIRTY=1] [NEW_RUN=1]
#   [IMAGE=…] [CUDA_LINE=cu130|cu126] [REMOTE_DIR=…] [KNOWN_HOSTS=…] [SSH_CONFIG=…: HOST resolved by `ssh -G`]
#   [DETACH=tmux|setsid] [FETCH_EXPORTS=1] [FETCH=<job-id>: fetch, report, archive a run left on the host;
#   `make remote-status` lists them] [NPROC=n: fewer processes per node than its GPUs; by default the run,
#   on one host as on several, starts one per GPU that preflight's `nvidia-smi -L` lists, as make plan HOST= plans]
.PHONY: remote remote-status plan
remote: $(STAMP)
	@test -n "$$HOST$$HOSTS$$HOSTFILE" || { echo "usage: make remote HOST=user@host[:port] | HOSTS=user@a,user@b[:port] | HOSTFILE=path [PROFILE=nccl-gpu] [RUNTIME=docker|host] [STAGES=a,b] [TIER=quick|standard|soak [BURNIN_MIN=…]] [ARCHIVE=s3://bucket/prefix]" >&2; exit 2; }
	@mkdir -p runs
	@$(PY) -m provisioning remote --host "$$HOST" --hosts "$$HOSTS" --hostfile "$$HOSTFILE" --profile "$${PROFILE:-nccl-gpu}" --stages "$$STAGES" \
	  --tier "$$TIER" --burnin-min "$$BURNIN_MIN" --runtime "$$RUNTIME" --image "$$IMAGE" --cuda-line "$$CUDA_LINE" --archive "$$ARCHIVE" --key "$$KEY" --known-hosts "$$KNOWN_HOSTS" \
	  --ssh-config "$$SSH_CONFIG" --accept-new-host "$${ACCEPT_NEW_HOST:-0}" --allow-dirty "$${ALLOW_DIRTY:-0}" --new-run "$${NEW_RUN:-0}" \
	  --remote-dir "$$REMOTE_DIR" --detach "$$DETACH" --fetch-exports "$${FETCH_EXPORTS:-0}" \
	  --fetch "$$FETCH" --node-ssh-config "$$NODE_SSH_CONFIG" --socket-ifname "$$SOCKET_IFNAME" --nproc "$$NPROC" \
	  --node-addrs "$$NODE_ADDRS" --master-port "$$MASTER_PORT" --nccl-env "$$NCCL_ENV" \
	  $${ENDPOINT_URL:+--endpoint-url "$$ENDPOINT_URL"}

# make slurm PARTITION=… [NODES=2] [GPUS_PER_NODE=8] [ACCOUNT=…] [TIME=HH:MM:SS] [STAGES=a,b] [IMAGE=…: pyxis]
#   [SOCKET_IFNAME=ib0] [NODE_ADDRS=: the nodes' addresses toward each other, in the allocation's order (default:
#   slurmctld's NodeAddr)] [NCCL_ENV=file] [SUBMIT=0]: on the cluster's login node, writes runs/cardtime-<time>.sbatch and (unless
#   SUBMIT=0) submits it, follows it and ends in its report; inside the job the suite takes the allocation's nodes
#   and launches with one srun each. FETCH=<job id>: follow that job (again) to its report.
# make slurm SLURM_HOST=user@login[:port] PARTITION=… REMOTE_DIR=<a folder on the shared storage> …: the same from
#   the laptop over SSH (provisioning/slurm/driver.py): code and venv on the login node, the job followed, its run
#   fetched into runs/, reported and archived (ARCHIVE=) as make remote does; FETCH=<job id> comes back to a job
#   (a cardtime job of yours still queued refuses a second submission, naming it; NEW_RUN=1 submits anyway).
#   SLURM_CONF= names the login node's slurm.conf where it is not /etc/slurm/slurm.conf.
.PHONY: slurm
slurm: $(STAMP)
	@test -n "$$PARTITION$$FETCH" || { echo "usage: make slurm PARTITION=… [NODES=2] [GPUS_PER_NODE=8] [ACCOUNT=…] [SLURM_HOST=user@login[:port] REMOTE_DIR=…] | FETCH=<job id>" >&2; exit 2; }
	@mkdir -p runs
	@if [ -n "$$SLURM_HOST" ]; then \
	  $(PY) -m provisioning slurm --host "$$SLURM_HOST" --key "$$KEY" --known-hosts "$$KNOWN_HOSTS" --ssh-config "$$SSH_CONFIG" \
	    --accept-new-host "$${ACCEPT_NEW_HOST:-0}" --remote-dir "$$REMOTE_DIR" --partition "$$PARTITION" --nodes "$${NODES:-2}" \
	    --gpus-per-node "$${GPUS_PER_NODE:-8}" --account "$$ACCOUNT" --time "$$TIME" --profile "$${PROFILE:-nccl-gpu}" \
	    --stages "$$STAGES" --image "$$IMAGE" --cuda-line "$$CUDA_LINE" --slurm-conf "$$SLURM_CONF" \
	    --socket-ifname "$$SOCKET_IFNAME" --node-addrs "$$NODE_ADDRS" --archive "$$ARCHIVE" --allow-dirty "$${ALLOW_DIRTY:-0}" --new-run "$${NEW_RUN:-0}" \
	    --fetch "$$FETCH" --nccl-env "$$NCCL_ENV" \
	    --fetch-exports "$${FETCH_EXPORTS:-0}" $${ENDPOINT_URL:+--endpoint-url "$$ENDPOINT_URL"}; \
	elif [ -n "$$FETCH" ]; then \
	  $(PY) -m suite slurm --attach "$$FETCH" --out runs; \
	else \
	  $(PY) -m suite slurm --partition "$$PARTITION" --nodes "$${NODES:-2}" --gpus-per-node "$${GPUS_PER_NODE:-8}" \
	    --account "$$ACCOUNT" --time "$$TIME" --profile "$${PROFILE:-nccl-gpu}" --stages "$$STAGES" \
	    --container-image "$$IMAGE" --socket-ifname "$$SOCKET_IFNAME" --node-addrs "$$NODE_ADDRS" --out runs \
	    $${NCCL_ENV:+--env-file "$$NCCL_ENV"} $$( [ "$${SUBMIT:-1}" = 0 ] || echo --submit); \
	fi

remote-status: $(STAMP)
	@test -n "$$HOST" || { echo "usage: make remote-status HOST=user@host[:port]" >&2; exit 2; }
	@$(PY) -m provisioning status --host "$$HOST" --key "$$KEY" --known-hosts "$$KNOWN_HOSTS" --ssh-config "$$SSH_CONFIG" \
	  --accept-new-host "$${ACCEPT_NEW_HOST:-0}" --remote-dir "$$REMOTE_DIR"

# Before renting: every stage's expected duration on the GPU profile and the cost at RATE $/hour.
# GPU= names the model (A100, "NVIDIA L40S"; default H100), GPUS= the count. With HOST=, the host's own GPUs
# (count and model, from nvidia-smi -L over SSH) are planned for (NPROC=: fewer).
# NODES=2 or HOSTS=a,b: a multi-node run (every launch across the nodes, β the inter-node hop: INTER_NODE=GB/s per GPU).
plan: $(STAMP)
	@if [ -n "$$HOST" ]; then \
	  $(PY) -m provisioning plan --host "$$HOST" --key "$$KEY" --known-hosts "$$KNOWN_HOSTS" --ssh-config "$$SSH_CONFIG" \
	    --accept-new-host "$${ACCEPT_NEW_HOST:-0}" --profile "$${PROFILE:-nccl-gpu}" $${RATE:+--rate "$$RATE"} --nproc "$$NPROC"; \
	else \
	  $(PY) -m suite plan --profile "$${PROFILE:-nccl-gpu}" $${GPUS:+--gpus "$$GPUS"} $${GPU:+--gpu "$$GPU"} $${RATE:+--rate "$$RATE"} $${TIER:+--tier "$$TIER"} \
	    --nodes "$${HOSTS:-$$NODES}" $${INTER_NODE:+--inter-node "$$INTER_NODE"} \
	    $${IMAGE:+--image pull} $${RUNTIME:+--runtime "$$RUNTIME"} $${DOWNLOAD_RATE:+--download-rate "$$DOWNLOAD_RATE"}; \
	fi

# Container images (Dockerfile, docker/), through the Docker SDK (provisioning/runtime/container_cli.py):
#   make image [IMAGE=cardtime:cuda] [CUDA_LINE=cu126] [BASE=…]   the CUDA image, built on the local engine;
#                                                  CUDA_LINE: suite/hardware/cuda_lines.py's line (default cu130, driver ≥ 580)
#   make image-push IMAGE=registry/name:tag        build, tag and push it; then `make remote IMAGE=…` pulls it
#   make rehearse-docker [STAGES=a,b] [BASE=…]     the rehearsal inside docker/cpu.Dockerfile, runs/ mounted
# BASE= replaces an image's FROM (an engine without registry access: docker/debian-base.sh makes one);
# NETWORK=host gives the build's RUN steps the host's network (an engine started with --bridge=none).
.PHONY: image image-push rehearse-docker
image: $(STAMP)
	docker/prepare-context.sh cuda
	$(PY) -m provisioning image-build --dockerfile Dockerfile --tag "$${IMAGE:-cardtime:cuda}" \
	  $${CUDA_LINE:+--cuda-line "$$CUDA_LINE"} $${BASE:+--base "$$BASE"} $${NETWORK:+--network "$$NETWORK"} --verbose

image-push: $(STAMP)
	@test -n "$$IMAGE" || { echo "usage: make image-push IMAGE=registry/name:tag" >&2; exit 2; }
	docker/prepare-context.sh cuda
	$(PY) -m provisioning image-build --dockerfile Dockerfile --tag "$$IMAGE" $${CUDA_LINE:+--cuda-line "$$CUDA_LINE"} \
	  $${BASE:+--base "$$BASE"} --verbose
	$(PY) -m provisioning image-push "$$IMAGE" --source "$$IMAGE"

# The CUDA image as CI builds it (torch's CPU wheel, nccl-tests from ../shared/vendor, no nsys) or as the user's
# box does (make image); docker/build-cuda-image.sh records the build's time and size for make bench.
.PHONY: image-ci
image-ci: $(STAMP)
	docker/build-cuda-image.sh ci

rehearse-docker: $(STAMP)
	PY=$(PY) docker/prepare-context.sh cpu
	@mkdir -p runs; status=0; \
	$(PY) -m provisioning rehearse-docker --runs runs $${BASE:+--base "$$BASE"} $${STAGES:+--stages "$$STAGES"} \
	  || status=$$?; \
	$(PY) -m reports "$$(cat runs/LAST)" || status=$$((status ? status : 1)); \
	exit $$status
