"""Every CLI's exit status on good and bad input, as a user's shell sees it: 0 ok, 1 a verdict/acceptance
"no", 2 unusable input — one line on stderr, never a traceback; 3 `suite check`'s INCONCLUSIVE box verdict.

The CLIs run in child processes (python -m would import pandas and matplotlib once per case): one child
per CLI module runs all of its cases through the module's `main(argv)`, the function `python -m` calls,
and reports each case's exit status and output; one case per CLI also goes through `python -m` itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from suite.results import RunDir, Verdict
from tests.damaged_runs import SPOILED, damaged_run

REPO = Path(__file__).resolve().parents[2]
NCCL = REPO / "tests" / "data" / "nccl-tests"
CAPTURE = NCCL / "10-h100-all_reduce-2node-16rank-mpi-warnings-interleaved.txt"
TOPO = REPO / "tests" / "data" / "topo" / "11-h100-4gpu-nv18-8nic-phb.txt"
UNREADABLE = "/proc/self/mem"  # a file that exists and cannot be read (EIO), even for root

# Runs every case of one CLI in this one process; prints one JSON object per case.
DRIVER = r"""
import contextlib, importlib, io, json, sys, traceback
main = importlib.import_module(sys.argv[1]).main
for argv in json.loads(sys.argv[2]):
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    except SystemExit as e:
        code = e.code
    except BaseException:
        code = "traceback"
        err.write(traceback.format_exc())
    print(json.dumps({"argv": argv, "code": code, "out": out.getvalue(), "err": err.getvalue()}), flush=True)
"""


@dataclass(frozen=True)
class Case:
    name: str
    module: str  # the CLI: suite.__main__, reports.__main__ or provisioning.__main__
    argv: tuple[str, ...]
    code: int
    says: str = ""  # a fragment stderr must hold (the file named, what is wrong)
    usage: bool = False  # argparse's own error: a usage line, then the error line


def cases(d: Path) -> list[Case]:
    """Every case, with paths under `d` (the files are made by the `inputs` fixture)."""
    s, r, p = "suite.__main__", "reports.__main__", "provisioning.__main__"
    run = lambda kind: str(d / kind)  # noqa: E731
    return [
        # suite parse
        Case("parse nccl-tests ok", s, ("parse", "nccl-tests", str(CAPTURE)), 0),
        Case("parse topo ok", s, ("parse", "topo", str(TOPO)), 0),
        Case("parse nccl-tests a directory", s, ("parse", "nccl-tests", str(NCCL)), 2, "a directory"),
        Case("parse topo a directory", s, ("parse", "topo", str(NCCL)), 2, "a directory"),
        Case("parse trace a directory", s, ("parse", "trace", str(NCCL)), 2, "a directory"),
        Case(
            "parse nccl-tests missing file",
            s,
            ("parse", "nccl-tests", str(d / "nope.txt")),
            2,
            "no such file",
        ),
        Case("parse nccl-tests unreadable file", s, ("parse", "nccl-tests", UNREADABLE), 2, "cannot be read"),
        Case("parse topo unreadable file", s, ("parse", "topo", UNREADABLE), 2, "cannot be read"),
        Case("parse nccl-tests binary", s, ("parse", "nccl-tests", str(d / "binary.dat")), 2, "not text"),
        Case(
            "parse nccl-tests other text",
            s,
            ("parse", "nccl-tests", str(d / "log.txt")),
            2,
            "not nccl-tests output",
        ),
        Case(
            "parse nccl-tests cut mid-table",
            s,
            ("parse", "nccl-tests", str(d / "cut.txt")),
            1,
            "--allow-partial",
        ),
        Case(
            "parse nccl-tests cut, allowed",
            s,
            ("parse", "nccl-tests", str(d / "cut.txt"), "--allow-partial"),
            0,
        ),
        Case("parse unknown kind", s, ("parse", "pdf", str(CAPTURE)), 2, "invalid choice", usage=True),
        # suite check
        Case("check accepted", s, ("check", run("passing")), 0),
        Case("check rejected", s, ("check", run("intact")), 1),
        Case("check inconclusive: a planned check skipped", s, ("check", run("skipped")), 3),
        Case("check rehearsal", s, ("check", run("rehearsal")), 0),
        Case("check not a run", s, ("check", str(d / "nope")), 2, "not a run directory"),
        Case(
            "check truncated manifest",
            s,
            ("check", run("truncated-manifest")),
            2,
            "manifest.json: not valid JSON",
        ),
        Case(
            "check truncated verdicts",
            s,
            ("check", run("truncated-verdicts")),
            2,
            "verdicts.json: not valid JSON",
        ),
        Case(
            "check garbage results",
            s,
            ("check", run("garbage-results")),
            2,
            "results.parquet: not a readable parquet",
        ),
        Case("check unknown status", s, ("check", run("unknown-status")), 2, "verdicts.json: verdict #1"),
        Case("check bad expectations", s, ("check", run("bad-expectations")), 2, "expectations.csv"),
        Case("check unfinished stage", s, ("check", run("unfinished-stage")), 1),  # its verdicts hold a fail
        Case("check unfinished stage, the rest passed", s, ("check", run("unfinished-passing")), 3),
        Case(
            "check misshapen manifest",
            s,
            ("check", run("misshapen-manifest")),
            2,
            "'stages' holds a JSON list",
        ),
        # suite run, plan, model
        Case("run list", s, ("run", "--list"), 0),
        Case("run unknown stage", s, ("run", "--stages", "nosuch"), 2, "nosuch"),
        Case("run resume missing", s, ("run", "--resume", str(d / "nope")), 2, "not a run directory"),
        Case(
            "run resume truncated manifest",
            s,
            ("run", "--resume", run("truncated-manifest")),
            2,
            "manifest.json",
        ),
        Case("plan ok", s, ("plan", "--gpus", "8"), 0),
        Case("plan negative rate", s, ("plan", "--rate", "-1"), 2, "--rate", usage=True),
        Case("plan unknown profile", s, ("plan", "--profile", "nosuch"), 2, "nosuch"),
        Case("model ok", s, ("model", "--cards", "8", "--sizes", "4M"), 0),
        Case("model bad size", s, ("model", "--sizes", "4Q"), 2, "4Q"),
        Case("model no beta", s, ("model", "--beta", "0"), 2, "--beta", usage=True),
        Case("no command", s, (), 2, "required", usage=True),
        # reports
        Case("report ok", r, (run("cpu"),), 0),
        Case("report truncated manifest", r, (run("truncated-manifest"),), 0, "incomplete: manifest.json"),
        Case("report garbage results", r, (run("garbage-results"),), 0, "incomplete: results.parquet"),
        Case(
            "report unknown status", r, (run("unknown-status"),), 0, "incomplete: verdicts.json: verdict #1"
        ),
        Case(
            "report unfinished stage",
            r,
            (run("unfinished-stage"),),
            0,
            "incomplete: stage bandwidth never finished",
        ),
        Case(
            "report misshapen manifest",
            r,
            (run("misshapen-manifest"),),
            0,
            "incomplete: manifest.json: 'stages'",
        ),
        Case("report nothing readable", r, (run("nothing-readable"),), 2, "none of its records can be read"),
        Case("report not a run", r, (str(d / "nope"),), 2, "not a run directory"),
        Case("report no run named", r, (), 2, "name a run directory"),
        Case(
            "report unwritable output",
            r,
            (run("passing"), "-o", str(d / "out")),
            2,
            "cannot write the report",
        ),
        Case(
            "compare ok",
            r,
            ("compare", run("passing"), run("passing-too"), "-o", str(d / "out" / "c.html")),
            0,
        ),
        Case("compare one run", r, ("compare", run("intact")), 2, "at least two"),
        Case(
            "compare missing run",
            r,
            ("compare", run("intact"), str(d / "nope"), "-o", str(d / "out" / "m.html")),
            2,
            "not a run directory",
        ),
        Case(
            "compare nothing readable",
            r,
            ("compare", run("intact"), run("nothing-readable"), "-o", str(d / "out" / "n.html")),
            2,
            "none of its records",
        ),
        # provisioning (no host needed for these)
        Case("archive ok", p, ("archive", run("passing"), str(d / "archive")), 0),
        Case(
            "archive not a run", p, ("archive", str(d / "nope"), str(d / "archive")), 2, "not a run directory"
        ),
        Case("status bad host", p, ("status", "--host", "a b@:x"), 2, "is not user@host"),
    ]


GPU_PROFILE = {"name": "nccl-gpu", "device": "cuda", "judge_performance": True}
CPU_PROFILE = {"name": "gloo-cpu", "device": "cpu", "judge_performance": False}


def passing_run(
    path: Path, status: str = "pass", profile: dict = GPU_PROFILE, unfinished: bool = False
) -> None:
    """A GPU run of topology whose one verdict has `status` (and, unfinished, a bandwidth stage that never
    ran)."""
    selected = ["topology", "bandwidth"] if unfinished else ["topology"]
    run = RunDir.create(
        path,
        {
            "stages_selected": selected,
            "stages": {},
            "facts": {},
            "profile": profile,
            "finished": "2026-11-29T17:00:00+00:00",
        },
    )
    run.replace_stage_verdicts(
        "topology",
        [
            Verdict(
                id="topology.links",
                stage="topology",
                status=status,
                expected="NV18",
                observed="NV18",
                reason="as expected",
            )
        ],
    )
    run.stage_state("topology").update(status="complete")
    if unfinished:
        run.stage_state("bandwidth").update(status="running")
    run.save_manifest()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("bad-input")
    lines = CAPTURE.read_text().splitlines(keepends=True)
    first_row = next(i for i, line in enumerate(lines) if line.split()[:1] == ["8"])
    cut = "".join(lines[: first_row + 8]) + lines[first_row + 8][:40]  # 8 rows, then half of the 9th
    (d / "cut.txt").write_text(cut)
    (d / "binary.dat").write_bytes(bytes(range(256)) * 64)
    (d / "log.txt").write_text(
        "".join(f"2026-11-29 17:{i % 60:02d} worker {i} started\n" for i in range(3000))
    )
    for kind in (
        "intact",
        "truncated-manifest",
        "truncated-verdicts",
        "garbage-results",
        "unknown-status",
        "unfinished-stage",
        "bad-expectations",
        "misshapen-manifest",
        "nothing-readable",
    ):
        # the truncated manifest is a CPU run's: its report must not claim a rehearsal it cannot know of
        damaged_run(d / kind, kind, **({"gpu": False} if kind == "truncated-manifest" else {}))
    damaged_run(d / "cpu", "intact", gpu=False)
    passing_run(d / "passing")
    passing_run(d / "passing-too")
    passing_run(d / "skipped", status="skip")
    passing_run(d / "rehearsal", profile=CPU_PROFILE)
    passing_run(d / "unfinished-passing", unfinished=True)
    (d / "out").mkdir()
    return d


@pytest.fixture(scope="module")
def outcomes(inputs) -> dict[str, dict]:
    """Every case run: one child process per CLI module."""
    return run_cases(cases(inputs))


def run_cases(all_cases, cwd: Path = REPO) -> dict[str, dict]:
    """Each case's {argv, code, out, err} by name: one child process per CLI module (`cwd`: where it runs)."""
    got = {}
    for module in dict.fromkeys(c.module for c in all_cases):
        mine = [c for c in all_cases if c.module == module]
        child = subprocess.run(
            [sys.executable, "-c", DRIVER, module, json.dumps([list(c.argv) for c in mine])],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "MPLBACKEND": "Agg", "PYTHONPATH": str(REPO)},
        )
        results = [json.loads(line) for line in child.stdout.splitlines() if line.startswith('{"argv"')]
        assert len(results) == len(mine), child.stderr[-3000:]
        got.update({c.name: result for c, result in zip(mine, results)})
    return got


def test_every_cli_is_covered(inputs):
    commands = {
        c.argv[0] if c.module != "reports.__main__" else "compare" if c.argv[:1] == ("compare",) else "report"
        for c in cases(inputs)
        if c.argv
    }
    assert commands == {"parse", "check", "run", "plan", "model", "report", "compare", "archive", "status"}
    assert {c.code for c in cases(inputs)} == {0, 1, 2, 3}


@pytest.mark.parametrize("name", [c.name for c in cases(Path("/x"))])
def test_exit_status(inputs, outcomes, name):
    case = next(c for c in cases(inputs) if c.name == name)
    got = outcomes[name]
    assert got["code"] == case.code, f"{name}: exit {got['code']}\n{got['err'][-3000:]}"
    assert "Traceback" not in got["err"]
    if case.says:
        assert case.says in got["err"], got["err"]
    if case.code == 2:
        lines = got["err"].strip().splitlines()
        if case.usage:
            assert lines[0].startswith("usage:") and "error:" in lines[-1]
        else:
            assert len(lines) == 1 and lines[0].startswith("error: "), got["err"]


def test_python_dash_m_returns_the_same_status(inputs):
    """The `python -m` wrappers pass main's status to the shell (one child per CLI)."""
    for module, argv, code in (
        ("suite", ["check", str(inputs / "garbage-results")], 2),
        ("suite", ["parse", "nccl-tests", str(inputs / "cut.txt")], 1),
        ("reports", [str(inputs / "nothing-readable")], 2),
    ):
        child = subprocess.run(
            [sys.executable, "-m", module, *argv], cwd=REPO, capture_output=True, text=True, timeout=300
        )
        assert child.returncode == code, child.stderr
        assert "Traceback" not in child.stderr


@pytest.mark.parametrize(
    "kind", ["truncated-manifest", "garbage-results", "unknown-status", "unfinished-stage"]
)
def test_a_damaged_run_renders_what_it_can_and_says_what_is_missing(inputs, outcomes, kind):
    """The reports rendered by the cases above: a banner names the spoiled part; every readable verdict is
    shown."""
    assert outcomes[f"report {kind.replace('-', ' ')}"]["code"] == 0
    html = (inputs / kind / "report.html").read_text()
    banner = (
        f"Incomplete run directory — {SPOILED[kind] if kind != 'unfinished-stage' else 'stage bandwidth'}"
    )
    assert banner in html
    verdicts = json.loads((inputs / "intact" / "verdicts.json").read_text())["verdicts"]
    readable = [
        v
        for v in verdicts
        if not (kind == "unknown-status" and v is verdicts[0])
        and not (kind == "unfinished-stage" and v["stage"] == "bandwidth")
    ]
    assert len(readable) >= 4
    for v in readable:
        assert f">{v['id']}<" in html, v["id"]
    assert 'id="stage-topology"' in html and 'id="stage-bandwidth"' in html
    # profile and end time unknown: claim neither a CPU run nor an unfinished one
    if kind == "truncated-manifest":
        assert "Rehearsal run on CPU" not in html and "has not finished" not in html
        assert "Rehearsal run on CPU" in (inputs / "cpu" / "report.html").read_text()  # as it would intact
