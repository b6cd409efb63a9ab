"""Adding a stage is writing one folder: a throwaway stage, dropped into the stages package the way a real one
is, appears in the run order, in `make plan`, in the profile (and its round trip through a manifest), is run
by the runner through its own worker, judged, and drawn in the report by its own figure module; a stage that
misdeclares fails discovery with a message naming it."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap

import pytest

from suite import runner, stages
from suite.config import GLOO_CPU, NCCL_GPU, profile_from_dict
from suite.plan.hours import estimate
from suite.stage_contract import StageDeclarationError

THROWAWAY = '''
"""A throwaway stage for tests/unit/test_stage_registry.py: echoes its config section as rows."""

from __future__ import annotations

from dataclasses import dataclass, field

from suite.config import ConfigSection
from suite.results import Expectation, Row
from suite.stage_contract import Stage
from suite.verdicts import verdicts_for


@dataclass(frozen=True, kw_only=True)
class Knob:
    turns: int = 1
    """Turns of the knob."""
    labels: tuple[str, ...] = ("a",)
    """Names, a tuple inside a nested section."""


@dataclass(frozen=True, kw_only=True)
class EchoConfig:
    repeats: int = 1
    """Rows to emit."""
    knob: Knob = field(default_factory=Knob)
    """A nested section."""
    pairs: tuple[tuple[str, float], ...] = ()
    """(name, value) pairs."""
    limit_s: float | None = None
    """An optional number."""


CONFIG = ConfigSection("echo", EchoConfig, {
    "gloo-cpu": EchoConfig(repeats=3, knob=Knob(turns=2, labels=("x", "y")), pairs=(("p", 1.5),)),
    "nccl-gpu": EchoConfig(repeats=7, limit_s=9.0),
})


def estimate(p) -> tuple[float, str]:
    return 60.0 * p.profile.section(CONFIG).repeats, f"{p.profile.section(CONFIG).repeats} minutes of echo"


def expect(profile, facts):
    return [Expectation(stage="{name}", case="echo", metric="turns", value=profile.section(CONFIG).knob.turns, unit="count",
                        basis="the profile's echo.knob.turns")]


def run(profile, ctx):
    cfg = profile.section(CONFIG)
    return [Row(stage="{name}", case="echo", metric="turns", value=cfg.knob.turns, unit="count", repeat=i)
            for i in range(cfg.repeats)]


def judge(rows, expectations, facts):
    ok = len(rows) == facts.profile.section(CONFIG).repeats and all(r.value == expectations[0].value for r in rows)
    return [verdicts_for("{name}").check("echo", ok, expected=str(expectations[0].value),
                                         observed=str([r.value for r in rows]), reason="the section came through")]


STAGE = Stage(row=99, after=("bandwidth",), title="an echo of its own config section",
              measures="nothing: it reports its config section back", wrong="a value other than the one configured",
              rehearsal="the same echo on CPU", config=CONFIG, estimate=estimate, expect=expect, run=run, judge=judge)
'''  # noqa: E501
PLACE = 'row=99, after=("bandwidth",)'  # what the tests below replace to misdeclare or reorder the stage


@pytest.fixture
def add_stage_module(tmp_path):
    """Put modules into the stages package (a folder on its __path__) and discover again; undone
    afterwards."""
    folder = tmp_path / "more_stages"
    folder.mkdir()
    stages.__path__.append(str(folder))
    added = []

    def add(name: str, source: str) -> None:
        (folder / f"{name}.py").write_text(source)
        added.append(name)

    yield add
    stages.__path__.remove(str(folder))
    for name in added:
        sys.modules.pop(f"{stages.__name__}.{name}", None)
    stages.rediscover()


# The same stage as a folder, as docs/stages.md tells a newcomer to write one: the declaration in __init__.py
# runs its worker (worker.py, beside it) and the report draws figure.py. Nothing outside the folder is
# touched.
FOLDER_WORKER = '''
"""The throwaway stage's worker: the rows of a measurement that counts."""
from suite.results import Row


def measure(repeats: int, turns: int) -> list[Row]:
    return [Row(stage="throwaway", case="echo", metric="turns", value=turns, unit="count", repeat=i)
            for i in range(repeats)]
'''
FOLDER_FIGURE = '''
"""The throwaway stage's figure."""
from matplotlib.figure import Figure

from reports.figures._plot import finish


def figures(rows, expectations, facts):
    fig = Figure(figsize=(4, 3))
    fig.add_subplot(1, 1, 1).plot(list(rows["repeat"]), list(rows["value"]))
    return [finish(fig, "throwaway echo", "Good: every repeat reads the configured turns, drawn by the folder.")]
'''  # noqa: E501
INLINE_RUN = """    cfg = profile.section(CONFIG)
    return [Row(stage="throwaway", case="echo", metric="turns", value=cfg.knob.turns, unit="count", repeat=i)
            for i in range(cfg.repeats)]"""
WORKER_RUN = """    from suite.stages.throwaway.worker import measure

    return measure(profile.section(CONFIG).repeats, profile.section(CONFIG).knob.turns)"""


def test_a_new_stage_folder_is_planned_run_judged_and_drawn(tmp_path):
    from reports.report import render_path

    folder = tmp_path / "more_stages" / "throwaway"
    folder.mkdir(parents=True)
    declaration = THROWAWAY.replace("{name}", "throwaway").replace(INLINE_RUN, WORKER_RUN)
    assert "throwaway.worker" in declaration
    (folder / "__init__.py").write_text(declaration)
    (folder / "worker.py").write_text(FOLDER_WORKER)
    (folder / "figure.py").write_text(FOLDER_FIGURE)
    stages.__path__.append(str(folder.parent))
    try:
        stages.rediscover()
        assert stages.ORDER[-1] == "throwaway"
        assert estimate(NCCL_GPU).stages[-1].basis == "7 minutes of echo"
        module = stages.load("throwaway")
        profile = GLOO_CPU.with_overrides(echo=module.EchoConfig(repeats=4, knob=module.Knob(turns=6)))
        run = runner.start_run(profile, ["throwaway"], tmp_path / "runs")
        outcome = runner.execute(run, profile, stream=io.StringIO())
        assert (outcome.counts["pass"], outcome.counts["fail"]) == (1, 0), run.verdicts()
        assert [(r.repeat, r.value) for r in run.rows()] == [(0, 6.0), (1, 6.0), (2, 6.0), (3, 6.0)]
        html = render_path(run.path)[0].read_text()
        assert "every repeat reads the configured turns, drawn by the folder" in html
        assert "figures unavailable" not in html
    finally:
        stages.__path__.remove(str(folder.parent))
        for name in [n for n in sys.modules if n.startswith(f"{stages.__name__}.throwaway")]:
            sys.modules.pop(name)
        stages.rediscover()


def test_a_new_stage_module_is_in_the_order_the_plan_the_profile_and_the_run(add_stage_module, tmp_path):
    before = stages.available()
    # Row 99: above every real stage's row, so it runs last.
    add_stage_module("throwaway", THROWAWAY.replace("{name}", "throwaway"))
    stages.rediscover()

    # The registry: its row, after everything whose row is lower (it declares AFTER bandwidth; row 99 is
    # last).
    assert stages.available() == before + ["throwaway"]
    assert stages.CHECKLIST_ROW["throwaway"] == 99 and stages.ORDER[-1] == "throwaway"

    # make plan: its own estimate, in run order.
    plan = estimate(NCCL_GPU)
    assert [s.stage for s in plan.stages] == [n for n in before if stages.runs_on(n, "nccl-gpu")] + [
        "throwaway"
    ]
    assert plan.stages[-1].seconds == 7 * 60.0 and plan.stages[-1].basis == "7 minutes of echo"

    # The profile: its section on both profiles, through a manifest's JSON and back as dataclasses.
    module = stages.load("throwaway")
    assert (
        GLOO_CPU.section("echo") == module.CONFIG.values["gloo-cpu"]
        and NCCL_GPU.section("echo").limit_s == 9.0
    )
    for profile in (GLOO_CPU, NCCL_GPU, GLOO_CPU.with_overrides(echo=module.EchoConfig(repeats=4))):
        back = profile_from_dict(json.loads(json.dumps(profile.to_dict())))
        assert back == profile and back.section("echo") == profile.section("echo")
        assert isinstance(back.section("echo").knob, module.Knob) and isinstance(
            back.section("echo").knob.labels, tuple
        )

    # The runner: runs it in its forked child with the section of the run's profile, and resume restores it.
    profile = GLOO_CPU.with_overrides(echo=module.EchoConfig(repeats=5, knob=module.Knob(turns=9)))
    run = runner.start_run(profile, ["throwaway"], tmp_path / "runs")
    outcome = runner.execute(run, profile, stream=io.StringIO())
    assert outcome.counts["pass"] == 1 and outcome.counts["fail"] == 0, run.verdicts()
    rows = run.rows()
    assert len(rows) == 5 and {r.value for r in rows} == {9.0}
    _, resumed = runner.resume_run(run.path)
    assert resumed == profile and resumed.section("echo").knob == module.Knob(turns=9)


@pytest.mark.parametrize(
    "declaration, complaint",
    [
        ("row=2, after=()", r"row=2, which stage bandwidth already has"),
        ("row=12, after=('bandwith',)", r"runs after bandwith, which is no other stage"),
        ("row=12, after=(), before=('warp',)", r"runs before warp"),
        ("row=12, after='topology'", r"after='topology' must be a tuple of names"),
        ("row=True, after=()", r"row=True must be its CHECKLIST.md row"),
        (
            "row=12, after=(), profiles=('gloo-gpu',)",
            r"profiles=\('gloo-gpu',\) must name at least one profile",
        ),
        ("row=12, after=(), headline='best'", r"headline='best' must be a function or None"),
    ],
)
def test_a_misdeclared_stage_fails_discovery_naming_its_module(add_stage_module, declaration, complaint):
    source = THROWAWAY.replace("{name}", "misdeclared").replace(PLACE, declaration)
    assert declaration in source
    add_stage_module("misdeclared", source)
    with pytest.raises(StageDeclarationError, match=complaint) as raised:
        stages.rediscover()
    assert "misdeclared" in str(raised.value)


def test_a_stage_missing_its_declarations_is_refused(add_stage_module):
    add_stage_module("bare", "MEASURES = 'x'\n")
    with pytest.raises(StageDeclarationError, match=r"suite\.stages\.bare .*declares no STAGE = Stage"):
        stages.rediscover()


def test_a_cycle_through_after_is_refused(add_stage_module):
    for name, other in (("ping", "pong"), ("pong", "ping")):
        source = THROWAWAY.replace("{name}", name).replace(
            PLACE, f"row={20 if name == 'ping' else 21}, after=({other!r},)"
        )
        add_stage_module(name, source.replace('ConfigSection("echo"', f'ConfigSection("echo_{name}"'))
    with pytest.raises(StageDeclarationError, match=r"suite\.stages\.ping, suite\.stages\.pong .*cycle"):
        stages.rediscover()


def test_a_stage_may_put_itself_first_with_before(add_stage_module):
    # whichever stage runs first today (health): "early" declares it runs before that one
    first = stages.ORDER[0]
    source = THROWAWAY.replace("{name}", "early").replace(PLACE, f"row=99, after=(), before=({first!r},)")
    add_stage_module("early", source)
    assert stages.rediscover().order[0] == "early"


def test_importing_the_plan_does_not_import_torch():
    code = textwrap.dedent("""
        import sys
        import suite.plan.hours as plan
        from suite.config import NCCL_GPU
        assert len(plan.estimate(NCCL_GPU).stages) >= 10
        print('torch' in sys.modules)
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
