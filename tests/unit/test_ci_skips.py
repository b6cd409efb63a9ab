"""Skips CI cannot hide (tests/ci_skips.py) and the probes that declare what a machine lacks
(.ci/capabilities.sh).

The plugin is tried for real: pytest runs a small generated test file in a subprocess, with and
without CI=true and a declaration, and the outcome of every generated test is read from pytest's -v lines.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.ci_skips import CAPABILITIES, MISSING_ENV

REPO = Path(__file__).resolve().parents[2]
PROBES = REPO / ".ci" / "capabilities.sh"

GENERATED = """
import pytest

pytestmark = pytest.mark.e2e

@pytest.mark.needs("docker")
def test_image():
    pytest.skip("no Docker engine: dockerd did not start")

@pytest.mark.needs("docker")
def test_image_present():
    pass

@pytest.fixture
def sshd():
    pytest.skip("needs openssh-server")

@pytest.mark.needs("sshd")
def test_remote(sshd):
    pass

def test_unmarked():
    pytest.skip("something is not here")

@pytest.mark.skipif(True, reason="chromium is not installed")
@pytest.mark.needs("chromium")
def test_browser():
    pass
"""

GENERATED_NOT_E2E = """
import pytest

@pytest.mark.gpu
def test_gpu():
    pytest.skip("needs CUDA")
"""


def run_pytest(tmp_path: Path, files: dict[str, str], env: dict[str, str]) -> tuple[int, dict[str, str], str]:
    """(exit code, {test name: PASSED/FAILED/ERROR/SKIPPED}, output) of pytest over the generated files."""
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    e2e: end to end\n    gpu: needs CUDA\n")
    clean = {k: v for k, v in os.environ.items() if k not in ("CI", MISSING_ENV, "PYTEST_ADDOPTS")}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "tests.ci_skips",
            "-p",
            "no:cacheprovider",
            "-v",
            str(tmp_path),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**clean, "PYTHONPATH": str(REPO), **env},
    )
    text = out.stdout + out.stderr
    outcomes = {}
    for test, status in re.findall(r"^\S+::(test_\w+) (PASSED|FAILED|ERROR|SKIPPED)", text, re.M):
        outcomes[test] = status
    return out.returncode, outcomes, text


def test_in_ci_an_undeclared_e2e_skip_fails_the_run(tmp_path):
    code, outcomes, text = run_pytest(tmp_path, {"test_gen.py": GENERATED}, {"CI": "true"})
    assert code == 1, text
    assert outcomes == {
        "test_image": "FAILED",
        "test_image_present": "PASSED",
        "test_remote": "ERROR",
        "test_unmarked": "FAILED",
        "test_browser": "ERROR",
    }, text
    assert (
        "did not declare capability docker missing" in text
        and "no Docker engine: dockerd did not start" in text
    )
    assert "names no capability it needs" in text


def test_in_ci_a_skip_whose_capability_is_declared_missing_stays_a_skip(tmp_path):
    code, outcomes, text = run_pytest(
        tmp_path, {"test_gen.py": GENERATED}, {"CI": "true", MISSING_ENV: "docker sshd chromium"}
    )
    assert outcomes == {
        "test_image": "SKIPPED",
        "test_image_present": "PASSED",
        "test_remote": "SKIPPED",
        "test_unmarked": "FAILED",
        "test_browser": "SKIPPED",
    }, text
    assert code == 1, text  # the unmarked skip still fails: no declaration can cover it
    assert "CI: capabilities .ci/run declared missing: chromium, docker, sshd" in text


def test_a_declaration_of_another_capability_does_not_cover_a_skip(tmp_path):
    _, outcomes, text = run_pytest(tmp_path, {"test_gen.py": GENERATED}, {"CI": "true", MISSING_ENV: "netns"})
    assert outcomes["test_image"] == "FAILED" and outcomes["test_remote"] == "ERROR", text


def test_outside_ci_skips_are_skips_and_listed_at_the_end(tmp_path):
    code, outcomes, text = run_pytest(
        tmp_path, {"test_gen.py": GENERATED, "test_gpu.py": GENERATED_NOT_E2E}, {}
    )
    assert code == 0, text
    assert outcomes == {
        "test_image": "SKIPPED",
        "test_image_present": "PASSED",
        "test_remote": "SKIPPED",
        "test_unmarked": "SKIPPED",
        "test_browser": "SKIPPED",
        "test_gpu": "SKIPPED",
    }, text
    listed = re.findall(r"^SKIP  \S+::(test_\w+): (.*)$", text, re.M)
    assert sorted(listed) == sorted(
        [
            ("test_image", "no Docker engine: dockerd did not start"),
            ("test_remote", "needs openssh-server"),
            ("test_unmarked", "something is not here"),
            ("test_browser", "chromium is not installed"),
            ("test_gpu", "needs CUDA"),
        ]
    ), text
    assert "skipped: 5 test(s)" in text


def test_in_ci_a_skip_outside_e2e_stays_a_skip(tmp_path):
    code, outcomes, text = run_pytest(tmp_path, {"test_gpu.py": GENERATED_NOT_E2E}, {"CI": "true"})
    assert (code, outcomes) == (0, {"test_gpu": "SKIPPED"}), text


def test_in_ci_an_e2e_module_skipped_at_import_fails(tmp_path):
    e2e = tmp_path / "e2e"
    e2e.mkdir()
    module = 'import pytest\n\npytest.skip("no engine", allow_module_level=True)\n\ndef test_x():\n    pass\n'
    code, _, text = run_pytest(
        tmp_path, {"e2e/test_module.py": module}, {"CI": "true", MISSING_ENV: "docker"}
    )
    # pytest's "errors in collection"
    assert code == 2 and "skipped in CI at import (no engine)" in text, text
    code, _, text = run_pytest(tmp_path, {"e2e/test_module.py": module}, {})
    assert code == 5 and "no engine" in text, text  # outside CI: a skip (and so no test ran)


def test_an_unknown_capability_name_is_refused_in_one_line(tmp_path):
    code, _, text = run_pytest(
        tmp_path, {"test_gen.py": GENERATED.replace('needs("sshd")', 'needs("ssh")')}, {}
    )
    assert code == 4, text  # pytest's usage error
    assert "unknown capability ssh in pytest.mark.needs" in text and "Traceback" not in text


# ---------------------------------------------------------------- .ci/capabilities.sh


def probe(env: dict[str, str]) -> tuple[dict[str, str], list[str], str]:
    """({name: "present …"/"missing because …"}, the exported missing list, output) of the probe script."""
    out = subprocess.run(
        ["bash", str(PROBES)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
    )
    assert out.returncode == 0, out.stderr
    lines = re.findall(r"^capability ([\w-]+): (present \(.*\)|missing because .*)$", out.stdout, re.M)
    names = [name for name, _ in lines]
    assert len(names) == len(set(names)), out.stdout
    exported = re.search(rf"^{MISSING_ENV}=(.*)$", out.stdout, re.M)
    assert exported, out.stdout
    return dict(lines), exported.group(1).split(), out.stdout


def unreachable_mirror(tmp_path: Path) -> dict[str, str]:
    """A cache with no tarball and a mirror on a closed loopback port: debian-base is missing, whatever the
    host."""
    return {"CARDTIME_CACHE": str(tmp_path / "cache"), "MIRROR": "http://127.0.0.1:9/debian"}


def test_every_capability_is_probed_and_the_missing_ones_exported(tmp_path):
    found, exported, text = probe(unreachable_mirror(tmp_path))
    assert set(found) == set(CAPABILITIES), text  # the script and the plugin speak of the same capabilities
    assert exported == [name for name, line in found.items() if line.startswith("missing")], text
    assert found["debian-base"].startswith("missing because"), text
    assert "debian-base" in exported


def test_a_cached_base_tarball_makes_debian_base_present(tmp_path):
    env = unreachable_mirror(tmp_path)
    Path(env["CARDTIME_CACHE"]).mkdir()
    (Path(env["CARDTIME_CACHE"]) / "debian-bookworm-minbase.tar").write_bytes(b"x" * 1024)
    found, exported, text = probe(env)
    assert found["debian-base"].startswith("present (cached "), text
    assert "debian-base" not in exported


def test_an_engine_that_does_not_answer_is_missing_with_dockerds_last_words(tmp_path):
    # a docker client on PATH whose engine is not there, as on a machine where dockerd failed to start
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    client = bin_dir / "docker"
    client.write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n")
    client.chmod(0o755)
    log = tmp_path / "dockerd.log"
    log.write_text("starting\nfailed to start daemon: Error initializing network controller\n")
    found, exported, text = probe(
        {
            **unreachable_mirror(tmp_path),
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "CARDTIME_DOCKERD_LOG": str(log),
        }
    )
    assert found["docker"] == (
        "missing because no engine answers; dockerd's last words "
        f"({log}): failed to start daemon: Error initializing network controller"
    ), text
    assert "docker" in exported


def test_ci_run_probes_after_the_installs_and_before_the_tests():
    text = (REPO / ".ci" / "run").read_text()
    assert subprocess.run(["bash", "-n", str(REPO / ".ci" / "run")]).returncode == 0
    steps = [text.index(s) for s in ("apt-get install", "nohup dockerd", "probe_capabilities", "make test")]
    assert steps == sorted(steps), steps
    assert "export CI=true" in text
