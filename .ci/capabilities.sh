#!/usr/bin/env bash
# What this machine can give the end-to-end tests, probed by name (the names of tests/ci_skips.py's
# CAPABILITIES). .ci/run sources this after its installs and calls probe_capabilities, which prints
#   capability NAME: present (how it was seen)
#   capability NAME: missing because WHY
# for each, and exports CARDTIME_MISSING_CAPABILITIES (the missing names, space-separated). Under CI=true
# a skipped e2e test fails unless a capability it needs is in that list. Run on its own, the script
# prints the same lines and then the variable. The probes install nothing and start no service (the
# netns probe makes one network namespace and deletes it at once).
#
# Environment read: MIRROR, SUITE, CARDTIME_CACHE (as docker/debian-base.sh reads them),
# CARDTIME_DOCKERD_LOG (the log of the dockerd .ci/run started, quoted when no engine answers),
# CARDTIME_CUDA_IMAGE (cardtime:cuda-ci) and CARDTIME_CUDA_IMAGE_LOG (the log of .ci/run's build of it).

_capability_present() { echo "capability $1: present ($2)"; }

_capability_missing() {
  echo "capability $1: missing because $2"
  CARDTIME_MISSING_CAPABILITIES="${CARDTIME_MISSING_CAPABILITIES:+$CARDTIME_MISSING_CAPABILITIES }$1"
}

_probe_sshd() {
  local tool
  for tool in /usr/sbin/sshd /usr/lib/openssh/sftp-server "$(command -v ssh-keygen || echo ssh-keygen)" \
              "$(command -v ssh || echo ssh)"; do
    [[ -x $tool ]] || { _capability_missing sshd "$tool is not installed (apt-get install openssh-server openssh-client)"; return; }
  done
  _capability_present sshd "/usr/sbin/sshd, sftp-server, ssh, ssh-keygen"
}

_probe_s3() {
  # moto's S3 server is a pinned test dependency: `make test` installs it into .venv with the rest.
  if [[ -x .venv/bin/moto_server ]]; then
    _capability_present s3 ".venv/bin/moto_server"
  else
    _capability_present s3 "moto[server] is in pyproject.toml's test extra; make test installs it into .venv"
  fi
}

_probe_chromium() {
  local exe version
  exe=$(command -v chromium || command -v chromium-browser || true)
  if [[ -z $exe ]]; then
    _capability_missing chromium "neither chromium nor chromium-browser is on PATH (apt-get install chromium)"
  elif version=$(timeout 60 "$exe" --headless --version 2>&1 | tail -1) && [[ -n $version ]]; then
    _capability_present chromium "$version"
  else
    _capability_missing chromium "$exe --headless --version failed: ${version:-no output}"
  fi
}

_probe_docker() {
  local server log
  if ! command -v docker >/dev/null; then
    _capability_missing docker "the docker client is not installed (apt-get install docker.io)"
  elif server=$(timeout 30 docker version --format '{{.Server.Version}}' 2>/dev/null) && [[ -n $server ]]; then
    _capability_present docker "engine $server answers"
  else
    log=${CARDTIME_DOCKERD_LOG:-}
    if [[ -n $log && -s $log ]]; then
      _capability_missing docker "no engine answers; dockerd's last words ($log): $(tail -1 "$log")"
    elif ! command -v dockerd >/dev/null; then
      _capability_missing docker "no engine answers and dockerd is not installed (apt-get install docker.io)"
    else
      _capability_missing docker "no engine answers at /var/run/docker.sock (dockerd not started)"
    fi
  fi
}

_probe_debian_base() {
  local suite=${SUITE:-bookworm} mirror=${MIRROR:-http://deb.debian.org/debian}
  local tarball="${CARDTIME_CACHE:-/var/cache/cardtime}/debian-${SUITE:-bookworm}-minbase.tar"
  if [[ -s $tarball ]]; then
    _capability_present debian-base "cached $tarball"
  elif ! command -v debootstrap >/dev/null; then
    _capability_missing debian-base "no cached $tarball and debootstrap is not installed (apt-get install debootstrap)"
  elif [[ $(id -u) != 0 ]]; then
    _capability_missing debian-base "no cached $tarball and debootstrap needs root"
  elif ! command -v wget >/dev/null; then
    _capability_missing debian-base "wget (which debootstrap downloads with) is not installed"
  elif timeout 60 wget -q --spider --tries=1 --timeout=20 "$mirror/dists/$suite/Release" 2>/dev/null; then
    _capability_present debian-base "debootstrap, and $mirror/dists/$suite/Release answers"
  else
    _capability_missing debian-base "the Debian mirror does not answer: wget --spider $mirror/dists/$suite/Release failed"
  fi
}

_probe_cuda_image() {
  # Built by .ci/run before `make test` (docker/build-cuda-image.sh ci); its log says why when it failed.
  local image=${CARDTIME_CUDA_IMAGE:-cardtime:cuda-ci} log=${CARDTIME_CUDA_IMAGE_LOG:-}
  if ! command -v docker >/dev/null || ! timeout 30 docker version >/dev/null 2>&1; then
    _capability_missing cuda-image "no Docker engine answers (capability docker)"
  elif timeout 30 docker image inspect "$image" >/dev/null 2>&1; then
    _capability_present cuda-image "$image, $(docker image inspect --format '{{.Size}}' "$image" | awk '{printf "%d MB", $1 / 1e6}')"
  elif [[ -n $log && -s $log ]]; then
    _capability_missing cuda-image "$image was not built; the build's last words ($log): $(tail -1 "$log")"
  else
    _capability_missing cuda-image "$image was not built (docker/build-cuda-image.sh ci did not run)"
  fi
}

_probe_netns() {
  local name="cardtime-probe-$$"
  if [[ $(id -u) != 0 ]]; then
    _capability_missing netns "network namespaces need root"
  elif ! command -v ip >/dev/null || ! command -v unshare >/dev/null; then
    _capability_missing netns "ip or unshare is not installed (iproute2, util-linux)"
  elif ip netns add "$name" 2>/dev/null && ip netns delete "$name" 2>/dev/null; then
    _capability_present netns "ip netns add/delete works"
  else
    ip netns delete "$name" 2>/dev/null || true
    _capability_missing netns "ip netns add failed (a container without CAP_SYS_ADMIN?)"
  fi
}

_probe_openmpi() {
  local version
  if ! command -v mpirun >/dev/null; then
    _capability_missing openmpi "mpirun is not installed (apt-get install openmpi-bin)"
  elif version=$(timeout 30 mpirun --allow-run-as-root --version 2>&1 | head -1) && [[ -n $version ]]; then
    _capability_present openmpi "$version"
  else
    _capability_missing openmpi "mpirun --version failed: ${version:-no output}"
  fi
}

_probe_slurm() {
  local tool
  for tool in slurmctld slurmd sbatch squeue munged; do
    command -v "$tool" >/dev/null || [[ -x /usr/sbin/$tool ]] || {
      _capability_missing slurm "$tool is not installed (apt-get install slurmctld slurmd slurm-client munge)"; return; }
  done
  _capability_present slurm "slurmctld, slurmd, sbatch, squeue, munged"
}

probe_capabilities() {
  CARDTIME_MISSING_CAPABILITIES=""
  _probe_sshd
  _probe_s3
  _probe_chromium
  _probe_docker
  _probe_debian_base
  _probe_cuda_image
  _probe_netns
  _probe_openmpi
  _probe_slurm
  export CARDTIME_MISSING_CAPABILITIES
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  set -uo pipefail
  probe_capabilities
  echo "CARDTIME_MISSING_CAPABILITIES=$CARDTIME_MISSING_CAPABILITIES"
fi
