"""Captures as people paste them, and the silent false passes: a section the tool always prints and the
capture lacks makes it partial — judged on what it holds, said partial (exit 1 without --allow-partial), never
a pass.

Every cut below is a real capture cut at a line (the cut is the test's input; the capture is untouched on
disk).
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

from suite.__main__ import main as suite_main
from suite.ingest import inputs
from suite.parsers import dcgm, smi_health
from suite.parsers.pasted import clean
from suite.stages.health import rules

DATA = Path(__file__).resolve().parents[1] / "data"
HEALTH, SMI = DATA / "health", DATA / "smi"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = suite_main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_a_smi_q_cut_after_its_pci_section_passes_neither_ecc_nor_temperature(tmp_path):
    text = (HEALTH / "nvsmi-q-08-h200-550-healthy.txt").read_text()
    # the block stops after PCI: ECC, temperature, processes missing
    cut = text[: text.index("    Fan Speed")]
    (tmp_path / "cut.txt").write_text(cut)
    parsed = smi_health.parse(cut, partial_ok=True)
    assert parsed["complete"] is False and "has no Temperature section" in parsed["reason"]
    assert [g["cut"] for g in parsed["gpus"]] == [True]  # kept, marked: never judged as a clean GPU
    names = {v.id: v.status for v in rules.smi_verdicts(parsed)}
    assert names.get("health.ecc") != "pass" and names.get("health.temperature") != "pass"
    code, out, err = run("parse", "smi-q", str(tmp_path / "cut.txt"))
    assert code == 1 and "partial: " in err and json.loads(out)["complete"] is False
    assert run("parse", "smi-q", str(tmp_path / "cut.txt"), "--allow-partial")[0] == 0


def test_a_dcgmi_diag_cut_before_stress_is_no_pass(tmp_path):
    text = (HEALTH / "dcgmi-diag-03-a10g-4gpu-dcgm339-r3-targeted-power-fail.txt").read_text()
    lines = text.splitlines(keepends=True)
    stress = next(i for i, line in enumerate(lines) if "Stress" in line)
    cut = "".join(lines[:stress])  # Deployment, Integration, Hardware: all Pass; Stress (the Fail) cut away
    parsed = dcgm.parse(cut)
    assert parsed["complete"] is False and "closing border" in parsed["reason"]
    v = rules.dcgm_verdict(parsed)
    assert v.status == "skip" and "partial" in v.reason
    assert dcgm.parse(text)["complete"] is True  # the whole table closes with its border
    (tmp_path / "cut.txt").write_text(cut)
    code, _, err = run("parse", "dcgm", str(tmp_path / "cut.txt"))
    assert code == 1 and "partial: " in err


def test_dcgmi_diag_json_is_not_taken_for_nccl_tests(tmp_path):
    """dcgmi's `--json` starts with `{` as nccl-tests' -J report does: the sniff order claims it for dcgmi
    diag. (No real `dcgmi diag --json` capture was found: the document is the smallest one its layout
    allows.)"""
    doc = {
        "DCGM GPU Diagnostic": {
            "test_categories": [
                {"category": "Deployment", "tests": [{"name": "Denylist", "results": [{"status": "Pass"}]}]}
            ]
        },
        "results": [],
    }
    (tmp_path / "diag.json").write_text(json.dumps(doc))
    got = inputs.read(tmp_path / "diag.json")
    assert not isinstance(got, inputs.Unused) and got[0].kind == "dcgmi diag", got


def test_a_readme_is_not_a_clean_kernel_log(tmp_path):
    readme = HEALTH / "README.md"  # prose and tables about XIDs, no kernel log line
    code, out, err = run("parse", "xid", str(readme))
    assert code == 2 and "no kernel log line" in err and "no XID since boot" not in out
    got = inputs.read(readme)
    assert isinstance(got, inputs.Unused)


def test_a_prompt_line_is_dropped_and_an_excerpt_is_partial(tmp_path):
    pasted = clean("root@node-3:~# ibstat mlx5_7\nCA 'mlx5_7'\n")
    assert pasted.text.splitlines()[1] == "CA 'mlx5_7'" and not pasted.partial and pasted.notes
    excerpt = HEALTH / "nvlink-s-02-v100-sxm2-two-inactive-excerpt.txt"
    got = inputs.read(excerpt)
    assert not isinstance(got, inputs.Unused) and "excerpt" in got[0].facts["partial"]
    code, out, err = run("parse", "nvlink", str(excerpt))
    data = json.loads(out)
    # SXM2: links wired
    assert code == 1 and data["complete"] is False and data["verdicts"][0]["status"] == "fail"


def test_an_excerpt_that_passes_is_left_open_in_ingest(tmp_path):
    """A healthy `nvlink -s` with one GPU left out (`....`): what it holds passes, the check stays open."""
    text = (HEALTH / "nvlink-s-01-a100x8-sxm4-12links-25gbs.txt").read_text()
    gpu1 = text.index("GPU 1:")
    (tmp_path / "excerpt.txt").write_text(text[:gpu1] + "....\n")
    code, _, err = run("ingest", str(tmp_path / "excerpt.txt"), "--out", str(tmp_path / "runs"))
    from suite.results import RunDir

    v = {
        x.id: x for x in RunDir.load(next(p for p in (tmp_path / "runs").iterdir() if p.is_dir())).verdicts()
    }
    assert v["health.nvlink"].status == "skip" and "partial capture" in v["health.nvlink"].reason
    assert code == 3 and "partial: " in err


def test_one_unreadable_smi_q_is_not_a_box_without_gpus():
    """A -q that timed out or was cut publishes no usable-GPU count (the runner would skip every GPU stage on
    0); health.nvidia_smi fails naming the file, and a cut -q's whole blocks are still judged."""
    from suite.stages import health

    found = {
        "smi": None,
        "smi_why": "nvidia-smi -q: timed out after 60 s; what it printed is kept in "
        "raw/health/nvidia-smi-q.txt",
        "kernel_log": None,
        "network": None,
    }
    published = health.published(found, on_gpu=True, nproc=8)
    assert "usable_gpus" not in published  # no gate: the count is unknown, not 0
    from suite.config import get_profile

    live = {"profile": get_profile("nccl-gpu", 8).to_dict(), **published}
    v = {x.id: x for x in health.judge([], [], live)}
    assert (
        v["health.nvidia_smi"].status == "fail"
        and "raw/health/nvidia-smi-q.txt" in v["health.nvidia_smi"].reason
    )
    text = (HEALTH / "nvsmi-q-11-h100x8-535-hw-power-brake-active.txt").read_text()
    cut = text[: text.index("GPU 00000000:", text.index("GPU 00000000:") + 1)]  # the first of 8 blocks, whole
    smi = smi_health.parse(cut, partial_ok=True)
    assert smi["complete"] is False and len(smi["gpus"]) == 1
    published = health.published(
        {**found, "smi": smi, "smi_why": f"nvidia-smi -q: partial output ({smi['reason']})"},
        on_gpu=True,
        nproc=8,
    )
    assert "usable_gpus" not in published and published["health"]["usable"] == [0]
    v = {x.id: x for x in health.judge([], [], {**live, **published})}
    assert v["health.nvidia_smi"].status == "fail" and "Attached GPUs : 8" in v["health.nvidia_smi"].reason
    # the one block it holds is judged: its power brake is on
    assert v["health.clock_brakes"].status == "fail"
