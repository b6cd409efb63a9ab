"""Bad input, class by class: each answered in one line with the README's exit code ("Exit codes"), never a
hang, a traceback, a command run by accident or a device replaced.

The CLIs run as tests/unit/test_exit_codes.py runs them: one child process per CLI module, every case through
the module's main(argv), each case's status and output reported back.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.damaged_runs import damaged_run
from tests.unit.test_exit_codes import run_cases

REPO = Path(__file__).resolve().parents[2]
NCCL = REPO / "tests" / "data" / "nccl-tests"
CAPTURE = NCCL / "10-h100-all_reduce-2node-16rank-mpi-warnings-interleaved.txt"
KINDS = ("topo", "nccl-tests", "trace", "smi-q", "nvlink", "ibstat", "dcgm", "xid")
S, R, P = "suite.__main__", "reports.__main__", "provisioning.__main__"


@dataclass(frozen=True)
class Case:
    name: str
    kind: str  # the class of bad input
    module: str
    argv: tuple[str, ...]
    code: int
    says: str = ""
    usage: bool = False  # argparse's usage line, then its error line


def nccl_json(**row) -> str:
    """An nccl-tests -J report of one size (format version 3), with `row`'s fields replacing the real ones."""
    base = {
        "size": 8,
        "count": 2,
        "type": "float",
        "redop": "sum",
        "root": -1,
        "out_of_place": {"time": 10.0, "alg_bw": 0.0, "bus_bw": 0.0, "nwrong": 0},
        "in_place": {"time": 10.0, "alg_bw": 0.0, "bus_bw": 0.0, "nwrong": 0},
    }
    return json.dumps(
        {
            "version": 3,
            "args": ["./build/all_reduce_perf"],
            "config": {"devices": [{"rank": 0}]},
            "results": [{**base, **row}],
            "out_of_bounds": {"count": 0, "okay": True},
            "end_time": "x",
        }
    )


def cases(d: Path) -> list[Case]:
    c = []
    # Hangs: a FIFO for every kind parse reads (no writer: an open would block for ever), a device that never
    # ends
    c += [Case(f"parse {k} FIFO", "hangs", S, ("parse", k, str(d / "fifo")), 2, "FIFO") for k in KINDS]
    c += [
        Case("parse xid /dev/zero", "hangs", S, ("parse", "xid", "/dev/zero"), 2, "a device"),
        Case("check FIFO manifest", "hangs", S, ("check", str(d / "fifo-manifest")), 2, "FIFO"),
        Case("ingest a FIFO", "hangs", S, ("ingest", str(d / "fifo"), "--out", str(d / "runs")), 2, "FIFO"),
        Case(
            "parse nccl-tests negative size",
            "hangs",
            S,
            ("parse", "nccl-tests", str(d / "size-negative.json")),
            2,
            "results[0].size",
        ),
        Case(
            "parse nccl-tests 1e400 size",
            "hangs",
            S,
            ("parse", "nccl-tests", str(d / "size-1e400.json")),
            2,
            "too large",
        ),
        Case(
            "ingest nccl-tests 1e400 size",
            "hangs",
            S,
            ("ingest", str(d / "size-1e400.json"), "--out", str(d / "runs")),
            2,
            "size-1e400.json",
        ),
    ]
    # Shell injection: a newline in a value written into the sbatch script, a host read by ssh as an option
    slurm = ("slurm", "--out", str(d / "slurm"))
    c += [
        Case(
            f"slurm {opt} newline",
            "injection",
            S,
            (*slurm, "--partition", "gpu", opt, "x\ntouch pwned"),
            2,
            "cannot go into the batch script",
        )
        for opt in ("--account", "--time", "--container-image")
    ]
    c += [
        Case(
            "slurm partition newline",
            "injection",
            S,
            (*slurm, "--partition", "gpu\ntouch pwned"),
            2,
            "PARTITION=",
        )
    ]
    c += [
        Case(f"status host {h}", "injection", P, ("status", f"--host={h}"), 2, "is not user@host")
        for h in ("-v", "-oProxyCommand=touch pwned", "-v@box")
    ]
    # Options: NaN, infinity and values outside their range
    c += [
        Case("run stage-timeout nan", "options", S, ("run", "--stage-timeout", "nan"), 2, "--stage-timeout"),
        Case(
            "run stage-timeout inf per stage",
            "options",
            S,
            ("run", "--stage-timeout", "topology=inf"),
            2,
            "--stage-timeout",
        ),
        Case("run stages commas", "options", S, ("run", "--stages", ",,"), 2, "names no stage"),
        Case(
            "run master-port 70000", "options", S, ("run", "--master-port", "70000"), 2, "65535", usage=True
        ),
        Case("plan mfu 0", "options", S, ("plan", "--mfu", "0"), 2, "--mfu", usage=True),
        Case("plan mfu -1", "options", S, ("plan", "--mfu", "-1"), 2, "--mfu", usage=True),
        Case("plan rate nan", "options", S, ("plan", "--rate", "nan"), 2, "--rate", usage=True),
        Case(
            "model alpha nan", "options", S, ("model", "--alpha", "nan", "--json"), 2, "--alpha", usage=True
        ),
        Case("model beta inf", "options", S, ("model", "--beta", "inf", "--json"), 2, "--beta", usage=True),
        Case("slurm time abc", "options", S, (*slurm, "--partition", "gpu", "--time", "abc"), 2, "TIME="),
        Case(
            "model size 1e400",
            "options",
            S,
            ("model", "--sizes", "1e400", "--json"),
            2,
            "not a finite number",
        ),
        Case("model size nan", "options", S, ("model", "--sizes", "nan"), 2, "not a finite number"),
    ]
    # Hangs: a FIFO as the file the run's path is recorded in (a write would block until someone reads it)
    c += [
        Case(
            "run record-last FIFO",
            "hangs",
            S,
            ("run", "--stages", "topology", "--out", str(d / "runs"), "--record-last", str(d / "fifo")),
            2,
            "--record-last",
        ),
        Case(
            "ingest record-last FIFO",
            "hangs",
            S,
            ("ingest", str(CAPTURE), "--out", str(d / "runs"), "--record-last", str(d / "fifo")),
            2,
            "--record-last",
        ),
    ]
    # Clobbering: an atomic rename onto a FIFO would replace it
    c += [
        Case(
            "report onto a FIFO",
            "clobbering",
            R,
            (str(d / "run-ok"), "-o", str(d / "fifo-out")),
            2,
            "must be a regular file",
        ),
        Case(
            "slurm script under a FIFO",
            "clobbering",
            S,
            ("slurm", "--out", str(d / "fifo-out"), "--partition", "gpu"),
            2,
            "cannot write the batch script",
        ),
    ]
    # check accepts only what it can read
    c += [
        Case(f"check {k}", "acceptance", S, ("check", str(d / k)), 2, says) for k, says in ACCEPTANCE.items()
    ]
    # A newline in a path would print as a line of cardtime's own; a binary HOSTFILE is no list of nodes
    c += [
        Case("ingest a newline name", "injection", S, ("ingest", str(d / "nl\nname.txt")), 2, "a newline"),
        Case(
            "run --out a newline name",
            "injection",
            S,
            ("run", "--out", str(d / "runs\nx")),
            2,
            "a newline",
        ),
        Case(
            "run --hostfile binary",
            "types",
            S,
            ("run", "--hostfile", str(d / "hostfile.bin")),
            2,
            "hostfile.bin",
        ),
    ]
    # Fields of a type no tool writes, in captures read field by field, and manifests without what a run
    # records at its start: one line naming the field, never a verdict judged without it
    c += [
        Case(f"parse {n}", "types", S, ("parse", k, str(d / f)), 2, says)
        for n, (k, f, says) in FIELDS.items()
    ]
    c += [
        Case(f"{cmd} manifest {n}", "acceptance", S, (*argv, str(d / f"manifest-{n}")), 2, says)
        for n, says in UNRECORDED.items()
        for cmd, argv in (("check", ("check",)), ("resume", ("run", "--resume")))
        # check reads a newer cardtime's stage all the same, and needs no run_id
        if not (cmd == "check" and n in ("unknown stage", "no run_id"))
    ]
    # Tracebacks: wrong types and extreme numbers in JSON captures and run directories
    for name in WRONG:
        c += [
            Case(
                f"parse nccl-tests {name}",
                "types",
                S,
                ("parse", "nccl-tests", str(d / f"wrong-{name}.json")),
                2,
                f"wrong-{name}.json",
            ),
            Case(
                f"parse trace {name}",
                "types",
                S,
                ("parse", "trace", str(d / f"trace-{name}.json")),
                2,
                "no profiler writes" if name in ("digits", "deep") else "ts is",  # those two: not even JSON
            ),
            Case(
                f"check manifest {name}",
                "types",
                S,
                ("check", str(d / f"manifest-{name}")),
                2,
                "manifest.json",
            ),
            Case(
                f"resume manifest {name}",
                "types",
                S,
                ("run", "--resume", str(d / f"manifest-{name}")),
                2,
                "manifest.json",
            ),
            Case(
                f"resume profile {name}",
                "types",
                S,
                ("run", "--resume", str(d / f"profile-{name}")),
                2,
                "manifest.json",
            ),
            Case(  # a schema version that is no number is refused whole, as another version is
                f"report manifest {name}",
                "types",
                R,
                (str(d / f"manifest-{name}"), "-o", str(d / f"m-{name}.html")),
                2 if name in ("list", "string") else ANSWERED,  # the others are no JSON a run writes at all
                "schema_version" if name in ("list", "string") else "",
            ),
            Case(
                f"report profile {name}",
                "types",
                R,
                (str(d / f"profile-{name}"), "-o", str(d / f"p-{name}.html")),
                ANSWERED,
            ),
            Case(
                f"compare profile {name}",
                "types",
                R,
                ("compare", str(d / "run-ok"), str(d / f"profile-{name}"), "-o", str(d / f"c-{name}.html")),
                ANSWERED,
            ),
        ]
    c += [
        Case(f"parse nsys {name}", "types", S, ("parse", "trace", str(d / f"nsys-{name}.sqlite")), 2, "row 1")
        for name in NSYS_ROWS
    ]
    return c


# nsys kernel rows (start, end, deviceId, shortName) SQLite holds but nsys never writes
NSYS_ROWS = {
    "text-start": ("abc", 2000, 0, "k"),
    "inf-end": (1000, float("inf"), 0, "k"),
    "text-device": (1000, 2000, "gpu0", "k"),
    "real-name": (1000, 2000, 0, 5.5),
}


def nsys_export(path: Path, row: tuple) -> None:
    import sqlite3

    with sqlite3.connect(path) as conn:
        conn.execute('CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start, "end", deviceId, shortName)')
        conn.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, ?, ?)", row)
    conn.close()


# name → (parse kind, file under the inputs' folder, what the one line says)
FIELDS = {
    "trace ts null": ("trace", "trace-ts-null.json", "traceEvents[0]: ts is 'None'"),
    "trace pid list": ("trace", "trace-pid-list.json", "traceEvents[0]: pid is '[1]'"),
    "trace numbers": ("trace", "trace-numbers.json", "traceEvents[0]: int '1' where an event object belongs"),
    "dcgm results text": ("dcgm", "dcgm-results-text.json", "results is 'text', not a list of objects"),
    "dcgm status number": ("dcgm", "dcgm-status-number.json", "status is '7'"),
    "dcgm categories text": ("dcgm", "dcgm-categories-text.json", "test_categories is \"['all']\""),
    "ibv_devinfo port word": ("ibstat", "ibv-port-word.txt", "port 'one' is not a number"),
    "ibv_devinfo state word": ("ibstat", "ibv-state-word.txt", "state 'active' is not `WORD (number)`"),
}
DCGM = (
    '{"DCGM GPU Diagnostic": {"version": "3.3.9", "test_categories": [{"category": "Stress", "tests": '
    '[{"name": "Targeted Power", "results": RESULTS}]}]}}'
)
# a manifest without this field (or naming a stage no cardtime has) → what the one line says
UNRECORDED = {
    "no profile": "no profile: a run records it when it starts",
    "no run_id": "no run_id",
    "no stages_selected": "no stages_selected",
    "unknown stage": "names stage(s) 'warp' that this cardtime does not have",
}


ANSWERED = -1  # exit 0 (what could be read, read) or 2 (one line): either answers; a traceback does not

# check: a run whose records parse but cannot be what a run wrote; what stderr must name
ACCEPTANCE = {
    "text-value": "'value'",
    "inf-size": "'size_bytes'",
    "unknown-stage-status": "status 'done'",
    "verdicts-emptied": "verdicts",
    "rows-duplicated": "rows",
    "parquet-empty": "rows",
}

# JSON values no writer produces, each put where a number or an object is
WRONG = {
    "nan": "NaN",
    "inf": "1e400",
    "digits": "9" * 5000,
    "deep": "[" * 100_000 + "]" * 100_000,
    "list": "[8]",
    "string": '"8"',
}


def recorded_counts(run: Path) -> None:
    """The manifest's per-stage row and verdict counts, as finish_stage records them, from the run's own
    files."""
    import pandas as pd

    manifest = json.loads((run / "manifest.json").read_text())
    rows = pd.read_parquet(run / "results.parquet")["stage"].value_counts().to_dict()
    verdicts = json.loads((run / "verdicts.json").read_text())["verdicts"]
    for name, state in manifest["stages"].items():
        state.update(rows=int(rows.get(name, 0)), verdicts=sum(v["stage"] == name for v in verdicts))
    (run / "manifest.json").write_text(json.dumps(manifest))


def spoil(run: Path, kind: str) -> None:
    import pandas as pd

    frame = pd.read_parquet(run / "results.parquet")
    manifest = json.loads((run / "manifest.json").read_text())
    if kind == "text-value":
        frame["value"] = frame["value"].astype(str)
    elif kind == "inf-size":
        frame["size_bytes"] = frame["size_bytes"].astype(float)
        frame.loc[frame.index[0], "size_bytes"] = float("inf")
    elif kind == "rows-duplicated":
        frame = pd.concat([frame, frame], ignore_index=True)
    elif kind == "parquet-empty":
        frame = frame.iloc[0:0]
    elif kind == "unknown-stage-status":
        next(iter(manifest["stages"].values()))["status"] = "done"
    elif kind == "verdicts-emptied":
        (run / "verdicts.json").write_text(json.dumps({"schema_version": 1, "verdicts": []}))
    frame.to_parquet(run / "results.parquet", index=False)
    (run / "manifest.json").write_text(json.dumps(manifest))


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("bad-input-classes")
    os.mkfifo(d / "fifo")
    os.mkfifo(d / "fifo-out")
    damaged_run(d / "fifo-manifest", "intact")
    (d / "fifo-manifest" / "manifest.json").unlink()
    os.mkfifo(d / "fifo-manifest" / "manifest.json")
    (d / "size-negative.json").write_text(nccl_json(size=-8))
    (d / "size-1e400.json").write_text(nccl_json().replace('"size": 8', '"size": 1e400'))
    damaged_run(d / "run-ok", "intact")
    for kind in ACCEPTANCE:
        damaged_run(d / kind, "intact")
        recorded_counts(d / kind)
        spoil(d / kind, kind)
    for name, row in NSYS_ROWS.items():
        nsys_export(d / f"nsys-{name}.sqlite", row)
    for name, text in WRONG.items():
        (d / f"wrong-{name}.json").write_text(nccl_json().replace('"size": 8', f'"size": {text}'))
        event = '{"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce", "ts": %s, "dur": 5}' % text
        (d / f"trace-{name}.json").write_text(
            '{"traceEvents": [%s, %s]}' % (event, event.replace('"ts"', '"x"'))
        )
        damaged_run(d / f"manifest-{name}", "intact")
        manifest = (d / f"manifest-{name}" / "manifest.json").read_text()
        (d / f"manifest-{name}" / "manifest.json").write_text(
            manifest.replace('"schema_version": 1', f'"schema_version": {text}')
        )
        damaged_run(d / f"profile-{name}", "intact")  # the recorded profile's process count: the value above
        data = json.loads(manifest)
        data["profile"]["nproc"] = "@"
        (d / f"profile-{name}" / "manifest.json").write_text(json.dumps(data).replace('"@"', text))
    (d / "nl\nname.txt").write_text("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)\n")
    (d / "hostfile.bin").write_bytes(b"root@h1\n\x00\xff\xfe\n")
    ibv = (REPO / "tests" / "data" / "health" / "ibv-devinfo-03-deepep55-ib-active.txt").read_text()
    (d / "ibv-port-word.txt").write_text(re.sub(r"port:(\s+)1\n", r"port:\1one\n", ibv, count=1))
    (d / "ibv-state-word.txt").write_text(ibv.replace("PORT_ACTIVE (4)", "active", 1))
    event = {
        "ph": "X",
        "cat": "kernel",
        "name": "ncclKernel_AllReduce",
        "ts": 1,
        "dur": 5,
        "pid": 0,
        "tid": 0,
    }
    (d / "trace-ts-null.json").write_text(json.dumps({"traceEvents": [{**event, "ts": None}]}))
    (d / "trace-pid-list.json").write_text(json.dumps({"traceEvents": [{**event, "pid": [1]}]}))
    (d / "trace-numbers.json").write_text("[1, 2, 3]")
    (d / "dcgm-results-text.json").write_text(DCGM.replace("RESULTS", '"text"'))
    (d / "dcgm-status-number.json").write_text(DCGM.replace("RESULTS", '[{"gpu_ids": "0", "status": 7}]'))
    (d / "dcgm-categories-text.json").write_text(
        DCGM.split('"test_categories"')[0] + '"test_categories": ["all"]}}'
    )
    for name in UNRECORDED:
        run = damaged_run(d / f"manifest-{name}", "intact")
        manifest = json.loads((run / "manifest.json").read_text())
        if name == "unknown stage":
            manifest["stages_selected"].append("warp")
        else:
            manifest.pop(name.removeprefix("no "))
        (run / "manifest.json").write_text(json.dumps(manifest))
    return d


@pytest.fixture(scope="module")
def outcomes(inputs) -> dict[str, dict]:
    return run_cases(cases(inputs), cwd=inputs)  # in the inputs' folder: a `touch pwned` would land there


@pytest.mark.parametrize("name", [c.name for c in cases(Path("/x"))])
def test_bad_input_answers_in_one_line(inputs, outcomes, name):
    case = next(c for c in cases(inputs) if c.name == name)
    got = outcomes[name]
    assert got["code"] == case.code or case.code == ANSWERED and got["code"] in (0, 2), (
        f"{name}: exit {got['code']}\n{got['err'][-3000:]}"
    )
    assert "Traceback" not in got["err"]
    if got["code"] == 0:
        return
    assert case.says in got["err"], got["err"]
    # ingest's list
    lines = [line for line in got["err"].strip().splitlines() if not line.startswith("not used: ")]
    if case.usage:
        assert lines[0].startswith("usage:") and "error:" in lines[-1]
    else:
        assert len(lines) == 1 and lines[0].startswith("error: "), got["err"]
    assert not (inputs / "pwned").exists()


def test_every_class_is_covered():
    assert {c.kind for c in cases(Path("/x"))} == {
        "hangs",
        "injection",
        "options",
        "clobbering",
        "acceptance",
        "types",
    }


def test_the_fifo_is_still_a_fifo(inputs, outcomes):
    """The report was refused, not renamed onto the FIFO (as it would have been onto /dev/null)."""
    import stat

    assert outcomes["report onto a FIFO"]["code"] == 2
    assert stat.S_ISFIFO(os.stat(inputs / "fifo-out").st_mode)


def test_an_atomic_write_refuses_a_device():
    from suite.regular_files import NotRegularFile, check_replaceable

    with pytest.raises(NotRegularFile, match="a device"):
        check_replaceable("/dev/null")  # checked before any temporary file is made: /dev/null is untouched


@pytest.mark.parametrize("variable", ["RUN", "ARGS", "PYTEST_ARGS", "PYTHON", "HOST", "PARTITION"])
def test_no_make_recipe_pastes_a_command_line_variable(variable):
    """Recipe lines hold `$$VAR` (bash reads the environment) for what the user sets, never `$(VAR)`."""
    import re

    recipes = [line for line in (REPO / "Makefile").read_text().splitlines() if line.startswith("\t")]
    constants = set(re.findall(r"^([A-Z_]+) :=", (REPO / "Makefile").read_text(), re.M))
    pasted = {name for line in recipes for name in re.findall(r"\$\(([A-Za-z_]+)\)", line)} - constants
    assert not pasted, f'recipes paste {sorted(pasted)}: pass them as "$$NAME"'
    assert variable not in constants and not any(f"$({variable})" in line for line in recipes)


def test_make_report_runs_nothing_from_run(tmp_path):
    marker = tmp_path / "pwned"
    done = subprocess.run(
        [
            "make",
            "-s",
            "-C",
            str(REPO),
            "report",
            f"RUN=x; touch {marker}",
            f"PY={sys.executable}",
            "STAMP=pyproject.toml",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0 and "not a run directory" in done.stderr, done.stderr
    assert not marker.exists()


def test_sbatch_script_refuses_every_value_with_a_newline():
    from suite.cluster.slurm import sbatch_script

    base = dict(checkout="/c", python="python", nodes=2, gpus_per_node=8, partition="gpu")
    for field in ("partition", "account", "time_limit", "container_image", "socket_ifname"):
        with pytest.raises(ValueError, match="cannot go into the batch script"):
            sbatch_script(**{**base, field: "gpu\ntouch /tmp/pwned"})
    assert "#SBATCH --time=1-02:00:00\n" in sbatch_script(**base, time_limit="1-02:00:00")


def test_a_second_resume_of_one_run_directory_refuses(inputs):
    """While one process holds a run directory, `run --resume` of it refuses in one line and changes
    nothing."""
    run = inputs / "run-ok"
    before = (run / "manifest.json").read_bytes()
    fd = os.open(run, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        child = subprocess.run(
            [sys.executable, "-m", "suite", "run", "--resume", str(run)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        os.close(fd)
    assert child.returncode == 2, child.stderr
    assert (
        child.stderr.strip().splitlines() == [child.stderr.strip()] and "another `suite run`" in child.stderr
    )
    assert (run / "manifest.json").read_bytes() == before


def test_ctrl_c_exits_130_in_one_line(tmp_path):
    child = subprocess.Popen(
        [sys.executable, "-m", "suite", "run", "--stages", "topology,bandwidth", "--out", str(tmp_path)],
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen = []
    # the run's first progress line: the run has begun
    while not any("cardtime run" in line for line in seen):
        seen.append(child.stderr.readline())
        assert seen[-1], seen
    child.send_signal(signal.SIGINT)
    rest = child.stderr.read()
    assert child.wait(timeout=120) == 130, rest
    assert "Traceback" not in rest and rest.strip().splitlines()[-1].startswith("interrupted:"), rest


@pytest.mark.skipif(shutil.which("unshare") is None, reason="unshare (util-linux) makes the small disk")
def test_a_full_disk_mid_run_is_one_line_naming_the_file(tmp_path):
    """A 64 KiB tmpfs, mounted in a mount namespace of the run's own (gone when it ends): the topology stage
    fits, bandwidth's rows fill it, and the run ends on ENOSPC as on a real full disk."""
    disk = tmp_path / "disk"
    disk.mkdir()
    script = (
        'mount -t tmpfs -o size=64k tmpfs "$1" && exec "$2" -m suite run --stages topology,bandwidth '
        '--out "$1"'
    )
    child = subprocess.run(
        ["unshare", "-m", "sh", "-c", script, "sh", str(disk), sys.executable],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if "mount:" in child.stderr and child.returncode != 0 and "suite" not in child.stderr:
        pytest.skip(f"no tmpfs mount here: {child.stderr.strip()}")
    assert child.returncode == 2, child.stderr[-3000:]
    assert "Traceback" not in child.stderr, child.stderr[-3000:]
    last = child.stderr.strip().splitlines()[-1]
    assert (
        last.startswith("error: ") and str(disk) in last and "No space left" in last and "--resume" in last
    ), last


def test_a_full_disk_at_the_run_folders_creation_names_it_and_leaves_nothing(tmp_path):
    """The file-size limit set to 0 stands for a full disk (EFBIG where ENOSPC would be: the same write
    failing): `suite run`'s first write, the manifest, fails; one line names the run folder and what to do,
    and no half-made folder stays."""
    import resource

    out = tmp_path / "runs"
    out.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "suite", "run", "--stages", "topology", "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0)),
    )
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"error: cannot create the run directory {out}/") and "pass --out DIR" in line, (
        line
    )
    assert list(out.iterdir()) == []
