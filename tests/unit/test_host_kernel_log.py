"""RUNTIME=docker's kernel log: the job's set-up reads the host's (as the stage would read it there), the
stage in the container judges that file and names the window it covers; a gVisor sandbox's own log is never
a host's. The set-up's lines run here for real in sh, against stand-in dmesg/sudo/journalctl on PATH that
replay a real capture (or refuse, as an ordinary login's dmesg does)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from provisioning.runtime import host_kernel_log
from suite.parsers import xid
from suite.stages.health import host_log, read_kernel_log, rules

DATA = Path(__file__).resolve().parents[1] / "data" / "health"
FALLEN = DATA / "xid-06-dmesg-fallen-off-bus-multiline-570.txt"
SMI_Q = DATA / "nvsmi-q-08-h200-550-healthy.txt"  # no kernel log at all
# gVisor's dmesg: the sandbox's own invented boot lines (as runsc prints them), not a capture of a host
GVISOR = "[    0.000000] Starting gVisor...\n[    0.123456] Digging up root...\n[    0.234567] Ready!\n"


def fake_bin(folder: Path, **tools: str | None) -> Path:
    """`tool=path`: the tool prints that file; `tool=None`: refused as an ordinary login's dmesg is."""
    folder.mkdir()
    for tool, source in tools.items():
        refuse = "echo 'dmesg: read kernel buffer failed: Operation not permitted' >&2; exit 1"
        body = f"cat {source}" if source else refuse
        (folder / tool).write_text(f"#!/bin/sh\n{body}\n")
        (folder / tool).chmod(0o755)
    return folder


def capture(folder: Path, **tools) -> Path:
    """The set-up's lines run in `folder`/job with `tools` first on PATH; the log file they wrote."""
    job = folder / "job"
    job.mkdir(parents=True)
    path = f"{fake_bin(folder / 'bin', **tools)}:/usr/bin:/bin"
    done = subprocess.run(
        ["sh", "-c", f"PATH={path}; export PATH\n" + host_kernel_log.capture_lines(str(job))],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    return job / host_kernel_log.FILE


@pytest.mark.parametrize(
    "tools, how",
    [
        ({"dmesg": FALLEN}, "dmesg"),
        ({"dmesg": None, "sudo": FALLEN}, "sudo-dmesg"),
        ({"dmesg": None, "sudo": None, "journalctl": FALLEN}, "journalctl-k"),
    ],
)
def test_the_set_up_reads_the_hosts_log_the_first_way_it_may_and_the_stage_judges_it(
    tmp_path, monkeypatch, tools, how
):
    log = capture(tmp_path, **tools)
    assert log.read_text() == FALLEN.read_text()
    assert log.with_name(log.name + ".source").read_text().startswith(how + " ")
    monkeypatch.setenv(*host_kernel_log.environment(str(log.parent)).popitem())
    parsed, why = read_kernel_log(tmp_path / "raw")
    assert why == "" and parsed["fallen_off_bus"], parsed  # the XID 79 of the real capture
    assert rules.kernel_log_verdict(parsed, why).status == "fail"
    assert (tmp_path / "raw" / "kernel-log-host.txt").read_text() == FALLEN.read_text()  # kept in raw/


def test_a_clean_handed_log_passes_naming_the_window_it_covers(tmp_path, monkeypatch):
    clean = tmp_path / "clean.txt"  # the real capture with its NVIDIA lines taken out: a clean host's log
    xid119 = DATA / "xid-01-h100-xe9680-xid119-gsp-timeout.txt"
    clean.write_text("".join(line for line in xid119.read_text().splitlines(True) if "NVRM" not in line))
    assert xid.parse(clean.read_text())["xid_events"] == []
    log = capture(tmp_path / "box", dmesg=clean)
    monkeypatch.setenv(host_log.HANDED_ENV, str(log))
    verdict = rules.kernel_log_verdict(*read_kernel_log(tmp_path / "raw"))
    assert verdict.status == "pass"
    assert "the host's log (dmesg) from boot to 20" in verdict.reason
    assert "when the container started: XIDs after it are not seen" in verdict.reason


def test_a_login_that_may_not_read_it_and_a_sandboxs_own_log_leave_the_check_open(tmp_path, monkeypatch):
    refused = capture(tmp_path / "refused", dmesg=None, sudo=None, journalctl=None)
    monkeypatch.setenv(host_log.HANDED_ENV, str(refused))
    parsed, why = read_kernel_log(tmp_path / "raw")
    assert parsed is None and "not readable by this login" in why and "sudo -n dmesg" in why
    assert rules.kernel_log_verdict(parsed, why).status == "skip"
    sandbox = tmp_path / "gvisor.txt"
    sandbox.write_text(GVISOR)
    sandboxed = capture(tmp_path / "sandbox", dmesg=sandbox)
    assert sandboxed.with_name(sandboxed.name + ".source").read_text().startswith("gvisor ")
    monkeypatch.setenv(host_log.HANDED_ENV, str(sandboxed))
    parsed, why = read_kernel_log(tmp_path / "raw")
    assert parsed is None and "gVisor sandbox" in why
    not_a_log = capture(tmp_path / "not-a-log", dmesg=SMI_Q)
    monkeypatch.setenv(host_log.HANDED_ENV, str(not_a_log))
    parsed, why = read_kernel_log(tmp_path / "raw")
    assert parsed is None and why.startswith("the host's kernel log (dmesg) handed by the job is unreadable")


def test_a_sandboxs_dmesg_read_by_the_stage_itself_is_no_host_log(tmp_path, monkeypatch):
    sandbox = tmp_path / "gvisor.txt"
    sandbox.write_text(GVISOR)
    monkeypatch.delenv(host_log.HANDED_ENV, raising=False)
    monkeypatch.setenv("PATH", f"{fake_bin(tmp_path / 'bin', dmesg=sandbox)}:/usr/bin:/bin")
    (tmp_path / "raw").mkdir()
    parsed, why = read_kernel_log(tmp_path / "raw")
    assert parsed is None and "gVisor sandbox" in why
    assert xid.parse(GVISOR)["xid_events"] == []  # what a plain parse would have called clean


def test_the_suites_container_is_told_the_file_on_one_host_and_on_the_first_node():
    from provisioning.cluster.image import first_node_run_argv
    from provisioning.runtime.remote_docker import run_argv

    told = f"{host_log.HANDED_ENV}=/b/jobs/j1/{host_kernel_log.FILE}"
    one = run_argv("img", job_id="j1", job_dir="/b/jobs/j1", runs_dir="/b/runs", suite_args=[], gpus=True)
    first = first_node_run_argv(
        "img",
        [],
        job_id="j1",
        runs_dir="/b/runs",
        job_dir="/b/jobs/j1",
        home="/root",
        ssh_config="",
        gpus=True,
        user=None,
    )
    for argv in (one, first):
        assert told in argv and "/b/jobs/j1:/b/jobs/j1" in " ".join(argv), argv  # and the folder is mounted
