"""Security and refusals of `make remote`, over a real sshd on 127.0.0.1 (no venv, no run: seconds).

Host keys: unknown refused unless ACCEPT_NEW_HOST=1; changed always refused. Hostile values
(remote folder and branch names with spaces, quotes, `;`, `$(…)`, backticks) reach the host as
literal values and execute nothing. A dirty tree and a host that cannot run the profile are
refused before anything is copied.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from remote_loopback import clean_env, git_repo, provisioning, sshd_available, start_sshd  # noqa: E402

from provisioning.job import codesync, jobs  # noqa: E402
from provisioning.session.connection import Remote  # noqa: E402
from provisioning.session.hosts import parse_host  # noqa: E402
from provisioning.session.login import run_preflight  # noqa: E402
from provisioning.session.options import RemoteOptions  # noqa: E402
from provisioning.session.steps import Steps  # noqa: E402

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.needs("sshd"),
    pytest.mark.skipif(not sshd_available(), reason="needs openssh-server (.ci/run installs it)"),
]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    server = start_sshd(tmp_path_factory.mktemp("sshd-security"))
    yield server
    server.stop()


def test_unknown_host_key_is_refused_with_its_fingerprint(sshd, tmp_path):
    kh = tmp_path / "known_hosts"
    before = sshd.audit()
    r = provisioning("status", "--host", sshd.host, "--key", str(sshd.client_key), "--known-hosts", str(kh))
    assert r.returncode == 2
    assert "host key unknown" in r.stderr and "SHA256:" in r.stderr and "ACCEPT_NEW_HOST=1" in r.stderr
    assert not kh.exists()
    assert sshd.audit() == before  # refused before authenticating: no session, no command


def test_accept_new_host_records_and_then_the_key_is_known(sshd, tmp_path):
    kh = tmp_path / "known_hosts"
    r = provisioning(
        "status",
        "--host",
        sshd.host,
        "--key",
        str(sshd.client_key),
        "--known-hosts",
        str(kh),
        "--accept-new-host",
        "1",
        "--remote-dir",
        str(tmp_path / "nothing-here"),
    )
    assert "trusting [127.0.0.1]" in r.stderr
    assert kh.read_text() == sshd.known_hosts_line()
    # Second time: known, no acceptance needed, nothing printed about trust.
    r2 = provisioning(
        "status",
        "--host",
        sshd.host,
        "--key",
        str(sshd.client_key),
        "--known-hosts",
        str(kh),
        "--remote-dir",
        str(tmp_path / "nothing-here"),
    )
    assert "trusting" not in r2.stderr and "host key" not in r2.stderr
    assert "nothing was run here" in r2.stdout


def test_changed_host_key_is_always_refused(sshd, tmp_path):
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    kind, blob = (tmp_path / "other.pub").read_text().split()[:2]
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[127.0.0.1]:{sshd.port} {kind} {blob}\n")
    r = provisioning(
        "status",
        "--host",
        sshd.host,
        "--key",
        str(sshd.client_key),
        "--known-hosts",
        str(kh),
        "--accept-new-host",
        "1",
    )
    assert r.returncode == 2 and "HOST KEY CHANGED" in r.stderr


def test_hostile_folder_and_branch_names_execute_nothing(sshd, tmp_path):
    marker = tmp_path / "pwned"
    # git allows ; $ ( ) ' " in branch names; sh would run $(…) if it ever saw it unquoted.
    branch = f"x;$(touch${{IFS}}{marker})'\"`touch${{IFS}}{marker}`"
    repo = git_repo(tmp_path / "laptop", branch=branch)
    remote_dir = str(tmp_path / "host") + f"/my dir 'q' \"d\" ;$(touch {marker.name}) `touch {marker.name}`"
    kh = tmp_path / "known_hosts"
    kh.write_text(sshd.known_hosts_line())
    remote = Remote.open(parse_host(sshd.host), key=str(sshd.client_key), known_hosts=kh)
    # A relative `touch pwned` runs wherever the shell that ran it stood: the remote user's home
    # (an SSH session's working directory), the remote folder or its parents, or this process's cwd.
    session_cwd = Path(remote.run(["pwd", "-P"]).stdout.strip())
    places = {session_cwd, Path.home(), Path.cwd(), tmp_path, *Path(remote_dir).parents, Path(remote_dir)}
    assert session_cwd.is_dir() and all(not (p / marker.name).exists() for p in places), "a stale marker"
    try:
        opts = RemoteOptions(host=remote.spec, profile="gloo-cpu", runtime="host", remote_dir=remote_dir)
        facts, decision = run_preflight(remote, opts, Steps(open(os.devnull, "w")))
        assert facts.base == remote_dir and decision.problems == []
        local = codesync.local_checkout(repo, allow_dirty=False)
        assert local.branch == branch
        code_dir, how = codesync.ship(remote, local, facts.base, say=lambda s: None)
        assert how == "bundle"
        assert (
            subprocess.run(
                ["git", "-C", code_dir, "rev-parse", "refs/heads/" + branch], capture_output=True, text=True
            ).stdout.strip()
            == local.commit
        )
        # A detached job whose arguments are hostile too: they arrive as one literal argv each.
        key = jobs.JobKey(commit=local.commit, profile="gloo-cpu", stages="", runtime="host")
        argv = [
            "python3",
            "-c",
            "import json, sys; json.dump(sys.argv[1:], open(sys.argv[1], 'w'))",
            f"{facts.base}/argv.json",
            branch,
            remote_dir,
        ]
        jobs.start(remote, facts.base, key, code_dir, argv, use_tmux=False)
        for _ in range(150):
            st = jobs.status(remote, facts.base)
            if st.state == "finished":
                break
            time.sleep(0.2)
        assert st.state == "finished" and st.exit_code == 0, st
        assert json.loads(Path(facts.base, "argv.json").read_text()) == [
            f"{facts.base}/argv.json",
            branch,
            remote_dir,
        ]
    finally:
        remote.close()
    assert not marker.exists()
    executed = [str(p / marker.name) for p in places if (p / marker.name).exists()]
    assert not executed and not list(tmp_path.rglob("pwned")), f"a hostile value was executed: {executed}"
    assert Path(remote_dir).is_dir()  # the folder exists under its literal name
    assert Path(remote_dir, "code", local.commit, "README").read_text() == "hello\n"


def test_make_passes_hostile_values_without_running_them(sshd, tmp_path):
    marker = tmp_path / "pwned-by-make"
    kh = tmp_path / "known_hosts"
    kh.write_text(sshd.known_hosts_line())
    hostile = f'{tmp_path}/d"; touch {marker}; echo "`touch {marker}`\''
    r = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-C",
            str(ROOT),
            "remote-status",
            f"VENV={ROOT / '.venv'}",
            "-o",
            f"{ROOT / '.venv'}/.installed",
            f"HOST={sshd.host}",
            f"KEY={sshd.client_key}",
            f"KNOWN_HOSTS={kh}",
            f"REMOTE_DIR={hostile}",
        ],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "nothing was run here" in r.stdout, r.stdout + r.stderr
    assert not marker.exists()


def test_dirty_tree_is_refused_before_any_connection(sshd, tmp_path):
    repo = git_repo(tmp_path / "dirty")
    (repo / "README").write_text("changed\n")
    before = sshd.audit()
    r = provisioning(
        "remote",
        "--host",
        sshd.host,
        "--key",
        str(sshd.client_key),
        "--profile",
        "gloo-cpu",
        "--runtime",
        "host",
        cwd=repo,
    )
    assert r.returncode == 2
    assert "uncommitted change" in r.stderr and "ALLOW_DIRTY=1" in r.stderr and "M README" in r.stderr
    assert sshd.audit() == before


def remote_from_a_clean_repo(
    server, tmp_path: Path, profile: str
) -> tuple[subprocess.CompletedProcess, Path]:
    """`provisioning remote` of a fresh one-commit repository to `server` (key known), RUNTIME=host."""
    repo = git_repo(tmp_path / "clean")
    kh = tmp_path / "known_hosts"
    kh.write_text(server.known_hosts_line())
    remote_dir = tmp_path / "host"
    r = provisioning(
        "remote",
        "--host",
        server.host,
        "--key",
        str(server.client_key),
        "--known-hosts",
        str(kh),
        "--profile",
        profile,
        "--runtime",
        "host",
        "--remote-dir",
        str(remote_dir),
        cwd=repo,
    )
    return r, remote_dir


def test_host_that_cannot_run_the_profile_is_refused_before_copying(sshd, tmp_path):
    r, remote_dir = remote_from_a_clean_repo(sshd, tmp_path, "nccl-gpu")
    assert r.returncode == 2
    assert "REFUSED: no NVIDIA GPU visible" in r.stderr
    assert not (remote_dir / "code").exists() and not (remote_dir / "jobs").exists()


def test_make_plan_with_and_without_a_host(sshd, tmp_path):
    kh = tmp_path / "known_hosts"
    kh.write_text(sshd.known_hosts_line())
    base = [
        "make",
        "--no-print-directory",
        "-C",
        str(ROOT),
        "plan",
        f"VENV={ROOT / '.venv'}",
        "-o",
        f"{ROOT / '.venv'}/.installed",
        "RATE=10",
    ]
    r = subprocess.run(base, env=clean_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "cost at $10/hour: $" in r.stdout, r.stdout + r.stderr
    # This host has no GPU: the plan says so and what to do instead.
    r = subprocess.run(
        [*base, f"HOST={sshd.host}", f"KEY={sshd.client_key}", f"KNOWN_HOSTS={kh}"],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert (
        r.returncode != 0 and "no GPU listed by nvidia-smi -L" in r.stdout and "make plan GPUS=8" in r.stdout
    )


def test_clone_from_origin_when_the_host_reaches_it_else_bundle(sshd, tmp_path):
    """origin served by `git daemon` on loopback: a pushed HEAD is cloned, an unpushed one bundled."""
    from remote_loopback import free_port, wait_port

    repo = git_repo(tmp_path / "laptop")
    served = tmp_path / "served"
    served.mkdir()
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(served / "laptop.git")], check=True)
    port = free_port()
    daemon = subprocess.Popen(
        [
            "git",
            "daemon",
            "--reuseaddr",
            "--export-all",
            f"--base-path={served}",
            "--listen=127.0.0.1",
            f"--port={port}",
            str(served),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_port(port, daemon, "git daemon")
        subprocess.run(
            ["git", "-C", str(repo), "remote", "add", "origin", f"git://127.0.0.1:{port}/laptop.git"],
            check=True,
        )
        kh = tmp_path / "known_hosts"
        kh.write_text(sshd.known_hosts_line())
        remote = Remote.open(parse_host(sshd.host), key=str(sshd.client_key), known_hosts=kh)
        try:
            base = str(tmp_path / "host")
            Path(base).mkdir()
            local = codesync.local_checkout(repo, allow_dirty=False)
            code_dir, how = codesync.ship(remote, local, base, say=lambda s: None)
            assert how == "clone" and Path(code_dir, "README").read_text() == "hello\n"
            assert codesync.ship(remote, local, base, say=lambda s: None) == (code_dir, "reused")
            # A commit that origin does not have: the host cannot clone it, so it travels as a bundle.
            (repo / "README").write_text("two\n")
            subprocess.run(
                [
                    "git",
                    "-C",
                    str(repo),
                    "-c",
                    "user.name=t",
                    "-c",
                    "user.email=t@example.invalid",
                    "commit",
                    "-q",
                    "-am",
                    "two",
                ],
                check=True,
            )
            messages = []
            local2 = codesync.local_checkout(repo, allow_dirty=False)
            code_dir2, how2 = codesync.ship(remote, local2, base, say=messages.append)
            assert how2 == "bundle" and Path(code_dir2, "README").read_text() == "two\n"
            assert any("not pushed" in m for m in messages)
        finally:
            remote.close()
    finally:
        daemon.terminate()
        daemon.wait(timeout=10)


def test_remote_errors_carry_host_command_exit_code_and_output(sshd, tmp_path):
    from provisioning.session.connection import RemoteError

    kh = tmp_path / "known_hosts"
    kh.write_text(sshd.known_hosts_line())
    remote = Remote.open(parse_host(sshd.host), key=str(sshd.client_key), known_hosts=kh)
    try:
        with pytest.raises(RemoteError) as err:
            remote.run(
                "echo first; echo 'the last line' >&2; exit 7", what="the step failed", hint="do this next"
            )
    finally:
        remote.close()
    text = str(err.value)
    assert text.startswith(f"{sshd.host}: the step failed")
    assert "command: echo first; echo 'the last line' >&2; exit 7" in text
    assert "exit code: 7" in text and "the last line" in text and "next: do this next" in text


def test_credentials_in_the_origin_url_never_reach_the_host(sshd, tmp_path):
    """origin = https://user:token@…: the host is asked about the URL without the token (and,
    unable to read it, gets a bundle); the token is in no command line and no file there."""
    token = "ghp_SENTINELtokenThatStaysOnTheLaptop"
    repo = git_repo(tmp_path / "laptop")
    subprocess.run(
        [
            "git",
            "-C",
            str(repo),
            "remote",
            "add",
            "origin",
            f"https://someone:{token}@127.0.0.1:1/private/repo.git",
        ],
        check=True,
    )
    local = codesync.local_checkout(repo, allow_dirty=False)
    assert local.origin == "https://127.0.0.1:1/private/repo.git"
    kh = tmp_path / "known_hosts"
    kh.write_text(sshd.known_hosts_line())
    base = tmp_path / "host"
    before = len(sshd.audit())
    remote = Remote.open(parse_host(sshd.host), key=str(sshd.client_key), known_hosts=kh)
    try:
        code_dir, how = codesync.ship(remote, local, str(base), say=lambda s: None)
    finally:
        remote.close()
    audit = sshd.audit()[before:]
    assert "127.0.0.1:1/private/repo.git" in audit  # the host was asked about origin, without the token
    assert how == "bundle" and token not in audit
    leaked = [p for p in base.rglob("*") if p.is_file() and token.encode() in p.read_bytes()]
    assert not leaked, leaked
    for url, clean in [
        ("https://tok@h/r.git", "https://h/r.git"),
        ("ssh://git:pw@h:22/r", "ssh://git@h:22/r"),
        ("git@github.com:o/r.git", "git@github.com:o/r.git"),
        ("https://h/r", "https://h/r"),
    ]:
        assert codesync.without_credentials(url) == clean


def test_an_endpoint_without_sftp_is_refused_before_shipping(tmp_path):
    """A proxied "basic SSH" endpoint: logins and commands work, the sftp subsystem does not."""
    from remote_loopback import start_sshd as start

    server = start(tmp_path / "sshd-nosftp", sftp=False)
    try:
        r, remote_dir = remote_from_a_clean_repo(server, tmp_path, "gloo-cpu")
    finally:
        server.stop()
    assert r.returncode == 2, r.stderr
    assert "offers no SFTP" in r.stderr and "direct SSH connection" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert not remote_dir.exists()  # nothing shipped, not even the folder made
    assert "CMD " not in server.audit()  # refused before the first command


def test_host_is_resolved_by_ssh_and_the_jump_host_is_trusted_only_on_first_use(sshd, tmp_path):
    """HOST=box, an alias in a file that ~/.ssh/config-like `Include`s, reached through a ProxyJump
    gateway (a second sshd): resolved as the user's ssh resolves it; the gateway's unknown key is
    refused like the box's, and accepted only with ACCEPT_NEW_HOST=1, printed and recorded."""
    from remote_loopback import start_sshd as start

    jump = start(tmp_path / "sshd-jump")
    try:
        (tmp_path / "included.conf").write_text(
            f"Host box\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User root\n  ProxyJump "
            f"root@127.0.0.1:{jump.port}\n"
            f"Host *\n  IdentityFile {sshd.client_key}\n  IdentityFile {jump.client_key}\n"
        )
        config = tmp_path / "ssh_config"
        config.write_text(f"Include {tmp_path / 'included.conf'}\n")
        kh = tmp_path / "known_hosts"
        kh.write_text(sshd.known_hosts_line())  # the box is known, its gateway is not
        base = [
            "status",
            "--host",
            "box",
            "--ssh-config",
            str(config),
            "--known-hosts",
            str(kh),
            "--remote-dir",
            str(tmp_path / "nothing-here"),
        ]
        r = provisioning(*base)
        assert r.returncode == 2 and f"host key unknown: [127.0.0.1]:{jump.port}" in r.stderr, (
            r.stdout + r.stderr
        )
        assert "Traceback" not in r.stderr
        before = sshd.audit()
        r = provisioning(*base, "--accept-new-host", "1")
        assert f"trusting [127.0.0.1]:{jump.port} on first use" in r.stderr, r.stdout + r.stderr
        assert "nothing was run here" in r.stdout, r.stdout + r.stderr
        assert kh.read_text() == sshd.known_hosts_line() + jump.known_hosts_line()
        # commands on the box, the jump only relayed
        assert sshd.audit() != before and "CMD " not in jump.audit()
        assert "Accepted publickey" in (jump.folder / "sshd.log").read_text()
        r = provisioning(*base)  # both known now: no question, no trust message
        assert r.returncode == 1 and "trusting" not in r.stderr and "nothing was run here" in r.stdout
        import base64
        import hashlib

        from provisioning.session.login import host_key_record

        remote = Remote.open(parse_host("box"), ssh_config=str(config), known_hosts=kh)
        try:
            remote.connect()
            record = host_key_record(remote)
            # the alias's real name, as known_hosts files it
            assert record["name"] == f"[127.0.0.1]:{sshd.port}"
            assert [v["name"] for v in record["via"]] == [f"[127.0.0.1]:{jump.port}"]
            blob = base64.b64decode(jump.host_pub.split()[1])
            assert record["via"][0]["fingerprint"] == "SHA256:" + base64.b64encode(
                hashlib.sha256(blob).digest()
            ).decode().rstrip("=")
        finally:
            remote.close()
    finally:
        jump.stop()
