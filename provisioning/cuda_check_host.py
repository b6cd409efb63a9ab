"""Does torch, in the runtime that will run the stages, see the host's GPUs? The half of the check
that runs on the host, inside the detached job right after its set-up (provisioning/runtime/cuda_check.py
builds that step): standard library and torch only, so that the job can run this file's text with
the host venv's python or with the image's (`python -c`), whichever code the image holds.

A torch whose CUDA the driver cannot run imports fine and reports `torch.cuda.is_available()`
False, and every GPU stage would then fail in turn, each spending its timeout. A torch without the
GPU's architecture (cu130 on a V100) is worse: is_available() is True and every kernel then fails with
"no kernel image is available". So the check launches one: a small matmul on every GPU, compared with
the same product on the CPU. One line, and exit 2, when torch cannot use every GPU nvidia-smi listed.

    python cuda_check_host.py --gpus 8 --driver 550.54.15 --where 'the host venv' --min-driver 13=580
    --min-driver 12=525
"""

from __future__ import annotations

import argparse
import json
import sys

REFUSED = "cardtime GPU check REFUSED: "
"""The prefix of the refusal line; the job keeps what follows it in jobs/<id>/refused for the laptop."""


def torch_facts() -> dict:
    """torch's version, its CUDA, whether it sees a GPU and how many; {'error': …} when it does not import."""
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure is the answer
        return {"error": f"import torch: {type(e).__name__}: {e}"[:300]}
    out = {"torch": torch.__version__, "cuda": torch.version.cuda}
    try:
        out["available"] = bool(torch.cuda.is_available())
        out["devices"] = torch.cuda.device_count() if out["available"] else 0
    except Exception as e:  # noqa: BLE001 - a CUDA init error is the answer too
        out["available"], out["devices"], out["error"] = False, 0, f"{type(e).__name__}: {e}"[:300]
    out["kernel_errors"] = [kernel_error(torch, index) for index in range(out["devices"])]
    out["kernel_errors"] = [e for e in out["kernel_errors"] if e]
    return out


def kernel_error(torch, index: int) -> str | None:
    """None when a 64×64 float64 matmul on GPU `index` equals the CPU's (to rounding); else what went wrong.
    float64: no TF32 or reduced-precision path can make a right answer look wrong."""
    try:
        gen = torch.Generator().manual_seed(index)
        a, b = (torch.randn(64, 64, dtype=torch.float64, generator=gen) for _ in range(2))
        device = torch.device("cuda", index)
        got = (a.to(device) @ b.to(device)).cpu()
        torch.cuda.synchronize(device)
        name = torch.cuda.get_device_name(index)
        major, minor = torch.cuda.get_device_capability(index)
    except Exception as e:  # noqa: BLE001 - "no kernel image is available" and its kin are the answer
        return f"GPU {index}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
    if not torch.allclose(got, a @ b, rtol=1e-10, atol=1e-10):
        worst = (got - a @ b).abs().max().item()
        return (
            f"GPU {index} ({name}, sm_{major}{minor}): a matmul differs from the CPU's by up to {worst:.3g}"
        )
    return None


def judge(
    answer: str, *, gpus_seen: int, driver: str | None, where: str, min_drivers: dict[str, str]
) -> str | None:
    """None when torch sees every GPU nvidia-smi listed; else one line saying why not and what to do.
    `answer`: torch_facts() as JSON (its last line); `min_drivers`: CUDA major → the oldest driver it runs."""
    try:
        facts = json.loads(answer.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return (
            f"torch in {where} answered nothing readable ({answer.strip()[-200:] or 'no output'}): run "
            f"it "
            f"by hand there"
        )
    if "torch" not in facts:
        return (
            f"torch in {where} does not import ({facts.get('error')}): reinstall it (a new venv: delete "
            f"the venvs folder)"
        )
    if facts.get("cuda") is None:
        return (
            f"torch {facts['torch']} in {where} is a CPU build: install a CUDA build "
            "(RUNTIME=host installs the CUDA line's wheel index; IMAGE= must be a CUDA image)"
        )
    if not facts.get("available"):
        minimum = min_drivers.get(str(facts["cuda"]).split(".")[0])
        need = f" (needs ≥ {minimum})" if minimum else ""
        return (
            f"torch {facts['torch']} (CUDA {facts['cuda']}{need}) in {where} sees no GPU with driver "
            f"{driver or 'unknown'}"
            f"{': ' + facts['error'] if facts.get('error') else ''}: choose the CUDA line the driver runs "
            "(CUDA_LINE=cu126 for drivers < 580) or check that the runtime is given the GPUs"
        )
    if facts.get("kernel_errors"):
        first = facts["kernel_errors"][0]
        more = (
            f" (and {len(facts['kernel_errors']) - 1} more GPU(s))" if len(facts["kernel_errors"]) > 1 else ""
        )
        return (
            f"torch {facts['torch']} (CUDA {facts['cuda']}) in {where} sees the GPUs but cannot run a kernel "
            f"on "
            f"them: {first}{more}: its build has no kernel for this GPU's architecture or the GPU is faulty; "
            "choose the CUDA line that has it (preflight's choice, CUDA_LINE=) or check the GPU (nvidia-smi "
            "-q)"
        )
    if facts.get("devices") != gpus_seen:
        return (
            f"torch in {where} sees {facts.get('devices')} GPU(s) where nvidia-smi lists {gpus_seen}: "
            "unset CUDA_VISIBLE_DEVICES or give the container every GPU (--gpus all)"
        )
    return None


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="cuda_check_host")
    p.add_argument("--gpus", type=int, required=True, help="how many GPUs nvidia-smi -L listed")
    p.add_argument("--driver", default="")
    p.add_argument("--where", required=True, help="the runtime, as the refusal names it")
    p.add_argument("--min-driver", action="append", default=[], metavar="MAJOR=VERSION")
    args = p.parse_args(argv)
    facts = torch_facts()
    problem = judge(
        json.dumps(facts),
        gpus_seen=args.gpus,
        driver=args.driver or None,
        where=args.where,
        min_drivers=dict(item.split("=", 1) for item in args.min_driver),
    )
    if problem:
        print(REFUSED + problem, flush=True)
        return 2
    print(
        f"torch {facts['torch']} (CUDA {facts['cuda']}) in {args.where} sees its {facts['devices']} GPU(s) "
        f"and "
        "computes a matmul on each as the CPU does",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
