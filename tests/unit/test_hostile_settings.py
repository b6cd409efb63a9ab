"""Settings that are not what they should be — from the environment, from make's options, names that are not
UTF-8 — each refused in one line naming the setting, exit 2, before any connection and with nothing written;
`--json` output is JSON whatever a figure came out as."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import time
from pathlib import Path

import pytest

from provisioning.__main__ import main as provisioning_main
from provisioning.job.archive import ArchiveError, archive_run
from reports.__main__ import main as reports_main
from suite import env_settings, strict_json
from suite.__main__ import main as suite_main
from suite.cluster import hostlist

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "data"
NOBODY = "u@127.0.0.1:1"
"""A HOST on loopback that nothing answers: a command that connects fails with "cannot connect", never
hangs."""
LATIN1 = os.fsdecode(b"caf\xe9")


def said(main, argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as e:  # argparse's refusal
            code = e.code
    return code, err.getvalue()


def one_error(code: int, text: str, *names: str) -> None:
    lines = text.strip().splitlines()
    assert code == 2, text
    assert len(lines) == 1 or lines[-1].startswith("python -m"), text  # one line, or argparse's usage + error
    assert "Traceback" not in text and all(name in lines[-1] for name in names), text


@pytest.mark.parametrize(
    "name, value, shown",
    [
        ("BURNIN_MIN", "nan", "above 0"),
        ("BURNIN_MIN", "inf", "above 0"),
        ("BURNIN_MIN", "1e400", "above 0"),
        ("BURNIN_MIN", "-5", "above 0"),
        ("BURNIN_MIN", "ninety", "not a number"),
        ("SLURM_JOB_NODELIST", "n[1-99999999999]", "more than 4096"),
        ("SLURM_JOB_NODELIST", "n[1-3,x", "'[' with no ']'"),
        ("SLURM_NODELIST", "n[9-2]", "backwards"),
        ("SLURM_JOB_NODELIST", "n[1-2]]", "']' with no '['"),
        ("CARDTIME_SRUN_ARGS", '--container-image "nvcr.io/x', "no closing quotation"),
        ("AWS_ENDPOINT_URL", "minio:9000 extra", "endpoint URL"),
        ("AWS_ENDPOINT_URL_S3", "ftp://x", "endpoint URL"),
        ("XDG_CACHE_HOME", "relative/cache", "absolute"),
        ("HOME", "home", "absolute"),
        ("CARDTIME_PREDRAW", "maybe", "on or off"),
        ("BURNIN_MIN", "9" * 70000, "characters"),
    ],
)
def test_an_unusable_variable_is_named_before_any_work(tmp_path, monkeypatch, name, value, shown):
    monkeypatch.setenv(name, value)
    start = time.monotonic()
    for main, argv in (
        (
            suite_main,
            ["run", "--profile", "gloo-cpu", "--stages", "topology", "--out", str(tmp_path / "runs")],
        ),
        (suite_main, ["plan", "--tier", "standard"]),
        (provisioning_main, ["remote", "--host", NOBODY]),
        (reports_main, [str(tmp_path / "runs")]),
    ):
        code, text = said(main, argv)
        one_error(code, text, name, shown)
        assert "cannot connect" not in text
    assert time.monotonic() - start < 30  # a host range is counted, never expanded
    assert not (tmp_path / "runs").exists()


def test_a_host_list_is_counted_before_it_is_expanded():
    assert hostlist.expand("rack[1-2]-n[01-02],login") == [
        "rack1-n01",
        "rack1-n02",
        "rack2-n01",
        "rack2-n02",
        "login",
    ]
    assert hostlist.count("n[1-4096]") == 4096
    start = time.monotonic()
    with pytest.raises(hostlist.HostListError, match="more than 4096"):
        hostlist.expand("n[0-99999999999999999999]-r[0-99999999999999]")
    assert time.monotonic() - start < 1
    for bad in ("n[a-b]", "n[1-2", "n[[1]]", "n[5-1]"):
        with pytest.raises(hostlist.HostListError):
            hostlist.count(bad)
    assert env_settings.problem({"SLURM_JOB_NODELIST": "gpu-[01-16]", "BURNIN_MIN": "90"}) is None


def test_json_output_stays_json_when_a_figure_overflows():
    code = None
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = suite_main(["model", "--beta", "1e-320", "--cards", "8", "--sizes", "1G", "--json"])
    assert code == 0
    rows = strict_json.loads(out.getvalue())  # no NaN, no Infinity
    assert rows and any(value is None for row in rows for value in row.values())
    assert (
        strict_json.dumps({"a": [float("nan"), 1.5, {"b": float("-inf")}]})
        == '{"a": [null, 1.5, {"b": null}]}'
    )


@pytest.mark.parametrize(
    "argv, names",
    [
        (["remote", "--host", NOBODY, "--tier", "standard", "--burnin-min", "nan"], ["BURNIN_MIN"]),
        (["remote", "--host", NOBODY, "--archive", "ftp://bucket/x"], ["ARCHIVE"]),
        (["remote", "--host", NOBODY, "--archive", "s3://Bad_Bucket/x"], ["ARCHIVE", "bucket name"]),
        (
            ["remote", "--host", NOBODY, "--archive", "s3://bucket/x", "--endpoint-url", "not a url"],
            ["ENDPOINT_URL"],
        ),
        (["remote", "--host", NOBODY, "--master-port", "99999"], ["MASTER_PORT"]),
        (["remote", "--host", NOBODY, "--cuda-line", "cu99"], ["cu99"]),
        (["remote", "--host", NOBODY, "--tier", "weekly"], ["--tier"]),
        (["plan", "--host", NOBODY, "--rate", "nan"], ["--rate"]),
        (["plan", "--host", NOBODY, "--rate", "-3"], ["--rate"]),
        (["slurm", "--host", NOBODY, "--partition", "gpu", "--archive", "gopher://x"], ["ARCHIVE"]),
    ],
)
def test_make_remote_checks_every_setting_before_the_first_connection(argv, names):
    one_error(*said(provisioning_main, argv), *names)


def test_an_archive_without_credentials_or_endpoint_is_one_line(tmp_path, monkeypatch):
    run = tmp_path / "20261207T0000Z-box-nccl-gpu"
    run.mkdir()
    (run / "manifest.json").write_text("{}")
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    code, text = said(provisioning_main, ["remote", "--host", NOBODY, "--archive", "s3://cardtime-runs/x"])
    one_error(code, text, "ARCHIVE", "no S3 credentials", "local folder")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "cardtime")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "cardtime")
    start = time.monotonic()
    with pytest.raises(ArchiveError, match="cannot reach s3://cardtime-runs/") as caught:
        archive_run(run, "s3://cardtime-runs/x", endpoint_url="http://127.0.0.1:1")  # nothing listens there
    assert "\n" not in str(caught.value) and time.monotonic() - start < 60
    # the run kept as it was
    assert sorted(p.name for p in tmp_path.iterdir()) == ["20261207T0000Z-box-nccl-gpu"]


def test_resume_with_recheck_or_tier_is_refused(tmp_path):
    (tmp_path / "run").mkdir()
    for extra in (["--recheck", str(tmp_path / "run")], ["--tier", "quick"]):
        one_error(
            *said(suite_main, ["run", "--resume", str(tmp_path / "run"), *extra]), "--resume", "--recheck"
        )


def test_names_that_are_not_utf8_are_refused_before_anything_is_written(tmp_path):
    latin = tmp_path / LATIN1
    latin.mkdir()
    for main, argv in (
        (suite_main, ["run", "--profile", "gloo-cpu", "--stages", "topology", "--out", str(latin / "runs")]),
        (suite_main, ["ingest", str(FIXTURES / "topo"), "--out", str(latin / "runs")]),
        (suite_main, ["check", str(latin / "run")]),
        (reports_main, [str(latin / "run")]),
        (reports_main, ["compare", str(latin / "run"), str(latin / "run")]),
    ):
        one_error(*said(main, argv), "caf\\xe9", "not UTF-8", "rename")
    assert list(latin.iterdir()) == []


def test_a_capture_whose_name_is_not_utf8_is_named_unused_and_the_rest_ingested(tmp_path):
    pile = tmp_path / "pile"
    pile.mkdir()
    shutil.copy(FIXTURES / "health" / "nvsmi-q-08-h200-550-healthy.txt", pile / "q.txt")
    shutil.copy(FIXTURES / "topo" / "11-h100-4gpu-nv18-8nic-phb.txt", pile / f"topo-{LATIN1}.txt")
    code, text = said(
        suite_main,
        ["ingest", str(pile), "--out", str(tmp_path / "runs"), "--record-last", str(tmp_path / "LAST")],
    )
    assert code in (0, 3), text
    assert (
        "not used: " in text
        and "topo-caf\\xe9.txt: its name is not UTF-8" in text
        and "Traceback" not in text
    )
    run = Path((tmp_path / "LAST").read_text().strip())
    manifest = json.loads((run / "manifest.json").read_text())
    assert [f["kept_as"] for f in manifest["ingested"]["files"]] == ["raw/topology/q.txt", "raw/health/q.txt"]
    assert manifest["ingested"]["unused"][0]["path"].endswith("topo-caf\\xe9.txt")


def test_a_host_without_user_says_whom_it_logs_in_as_before_connecting(tmp_path):
    import getpass

    from provisioning.session.hosts import parse_host, unnamed_user_note

    config = tmp_path / "ssh_config"
    config.write_text("Host gpu-box\n  HostName 127.0.0.1\n  User ubuntu\n")
    assert unnamed_user_note(parse_host("root@127.0.0.1")) is None
    mine = unnamed_user_note(parse_host("127.0.0.1:1"))
    assert (
        f"logging in as {getpass.getuser()!r} (this laptop's user)" in mine and "HOST=user@127.0.0.1" in mine
    )
    assert "logging in as 'ubuntu' (the User in your ssh_config)" in unnamed_user_note(
        parse_host("gpu-box"), str(config)
    )
    code, text = said(provisioning_main, ["plan", "--host", "127.0.0.1:1"])
    assert code == 2 and text.index("names no user") < text.index("cannot connect")


def test_a_fifo_or_a_folder_as_hostfile_or_record_last_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    start = time.monotonic()
    for path, kind in ((fifo, "FIFO"), (tmp_path, "directory")):
        for main, argv in (
            (suite_main, ["run", "--hostfile", str(path), "--out", str(tmp_path / "runs")]),
            (provisioning_main, ["remote", "--host", "", "--hostfile", str(path)]),
            (
                suite_main,
                ["run", "--stages", "topology", "--record-last", str(path), "--out", str(tmp_path / "runs")],
            ),
        ):
            one_error(*said(main, argv), kind)
    assert time.monotonic() - start < 30 and not (tmp_path / "runs").exists()
