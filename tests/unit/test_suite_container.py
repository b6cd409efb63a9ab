"""The suite container's settings are spelled once (provisioning/suite_container.RunSettings): the
SDK's arguments, the job's `docker run` line and the flags the README and the Dockerfile document
all come from them. The engine's own reading of both is tests/e2e/test_docker_image.py's."""

from __future__ import annotations

import re
from pathlib import Path

from provisioning.runtime import remote_docker, suite_container
from provisioning.runtime.suite_container import RunSettings, host_user

ROOT = Path(__file__).resolve().parents[2]


def flags_as_settings(flags: list[str]) -> dict:
    """`docker run` flags read back the way the SDK spells them (what `docker create` would send)."""
    out = {"ulimits": {}, "volumes": {}, "environment": {}, "user": None, "gpus": None}
    it = iter(flags)
    for flag in it:
        if flag == "--gpus":
            out["gpus"] = next(it)
        elif flag.startswith(("--ipc=", "--network=")):
            key, value = flag[2:].split("=")
            out[{"ipc": "ipc_mode", "network": "network_mode"}[key]] = value
        elif flag == "--ulimit":
            name, limit = next(it).split("=")
            out["ulimits"][name] = int(limit)
        elif flag == "-v":
            src, dst, mode = next(it).split(":")
            out["volumes"][src] = {"bind": dst, "mode": mode}
        elif flag == "-e":
            key, value = next(it).split("=", 1)
            out["environment"][key] = value
        elif flag == "--user":
            out["user"] = next(it)
        else:
            raise AssertionError(f"unexpected flag {flag}")
    return out


def test_docker_run_flags_and_sdk_arguments_are_the_same_settings():
    for settings in (
        RunSettings(gpus=True, mounts=("/b/runs", "/b/jobs/J"), user="1000:1000"),
        RunSettings(gpus=False, mounts=("/r",)),
    ):
        flags = flags_as_settings(settings.docker_flags())
        sdk = settings.sdk_create_kwargs()
        assert (
            flags["ipc_mode"] == sdk["ipc_mode"] == "host"
            and flags["network_mode"] == sdk["network_mode"] == "host"
        )
        assert flags["ulimits"] == {u["Name"]: u["Hard"] for u in sdk["ulimits"]}
        assert all(u["Soft"] == u["Hard"] for u in sdk["ulimits"])
        assert flags["volumes"] == sdk["volumes"] and len(sdk["volumes"]) == len(settings.mounts)
        assert flags["environment"] == sdk["environment"] and flags["user"] == sdk["user"]
        assert (flags["gpus"] == "all") == bool(sdk["device_requests"]) == settings.gpus


def test_gpus_add_memlock_and_a_cpu_run_pins_nothing():
    assert dict(RunSettings(gpus=True).ulimits()) == {"memlock": -1, "stack": 67108864}
    assert dict(RunSettings(gpus=False).ulimits()) == {"stack": 67108864}


def test_documented_docker_run_lines_are_the_settings():
    """The guide's and the Dockerfile's `docker run … --gpus all …` show exactly the GPU settings' flags."""
    # less -e PYTHONUNBUFFERED=1 (the image sets it)
    shown = " ".join(RunSettings(gpus=True).docker_flags()[:-2])
    assert shown == "--gpus all --ipc=host --network=host --ulimit memlock=-1 --ulimit stack=67108864"
    for doc in (ROOT / "docs" / "guide.md", ROOT / "Dockerfile"):
        lines = [ln for ln in doc.read_text().splitlines() if re.search(r"docker run( --rm)? --gpus", ln)]
        assert lines, doc
        for line in lines:
            assert shown in line, (doc.name, line)


def test_non_root_host_user_runs_the_container_as_itself():
    assert host_user(0, 0) is None and host_user(None, 1000) is None
    assert host_user(1000, 1001) == "1000:1001"
    argv = remote_docker.run_argv(
        "img",
        job_id="J",
        job_dir="/j",
        runs_dir="/r",
        suite_args=["run"],
        gpus=True,
        user=host_user(1000, 1000),
    )
    assert argv[argv.index("--user") + 1] == "1000:1000"
    env = [argv[i + 1] for i, a in enumerate(argv) if a == "-e"]
    assert "HOME=/tmp" in env  # a uid the image does not know has no home to write caches into
    root = remote_docker.run_argv(
        "img", job_id="J", job_dir="/j", runs_dir="/r", suite_args=["run"], gpus=True
    )
    assert "--user" not in root and "HOME=/tmp" not in " ".join(root)
    assert suite_container.docker_run_argv("img", RunSettings(gpus=False), ["run"], name="n")[-2:] == [
        "img",
        "run",
    ]
