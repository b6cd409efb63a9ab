"""Before the run starts: does torch, in the runtime that will run the stages, see the host's GPUs?

A torch whose CUDA the driver cannot run imports fine and reports `torch.cuda.is_available()`
False, and every GPU stage would then fail in turn, each spending its timeout. One short
program in the very runtime (the host venv's python, or the image through `docker run` with the
suite's own GPU settings) answers first; `judge` turns its answer into one refusal line.
"""

from __future__ import annotations

import json

from suite.cuda_lines import line_of_cuda

from . import suite_container
from .connection import Remote, RemoteError

PROGRAM = r"""
import json
try:
    import torch
except Exception as e:
    print(json.dumps({"error": f"import torch: {type(e).__name__}: {e}"[:300]}))
    raise SystemExit(0)
out = {"torch": torch.__version__, "cuda": torch.version.cuda}
try:
    out["available"] = bool(torch.cuda.is_available())
    out["devices"] = torch.cuda.device_count() if out["available"] else 0
except Exception as e:
    out["available"], out["devices"], out["error"] = False, 0, f"{type(e).__name__}: {e}"[:300]
print(json.dumps(out))
"""


def judge(answer: str, *, gpus_seen: int, driver: str | None, where: str) -> str | None:
    """None when torch sees every GPU nvidia-smi listed; else one line saying why not and what to do."""
    try:
        facts = json.loads(answer.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return f"torch in {where} answered nothing readable ({answer.strip()[-200:] or 'no output'}): run it by hand there"
    if "torch" not in facts:
        return f"torch in {where} does not import ({facts.get('error')}): reinstall it (a new venv: delete the venvs folder)"
    if facts.get("cuda") is None:
        return (f"torch {facts['torch']} in {where} is a CPU build: install a CUDA build "
                "(RUNTIME=host installs the CUDA line's wheel index; IMAGE= must be a CUDA image)")
    if not facts.get("available"):
        line = line_of_cuda(facts["cuda"])
        need = f" (needs ≥ {line.min_driver_text})" if line else ""
        return (f"torch {facts['torch']} (CUDA {facts['cuda']}{need}) in {where} sees no GPU with driver {driver or 'unknown'}"
                f"{': ' + facts['error'] if facts.get('error') else ''}: choose the CUDA line the driver runs "
                "(CUDA_LINE=cu126 for drivers < 580) or check that the runtime is given the GPUs")
    if facts.get("devices") != gpus_seen:
        return (f"torch in {where} sees {facts.get('devices')} GPU(s) where nvidia-smi lists {gpus_seen}: "
                "unset CUDA_VISIBLE_DEVICES or give the container every GPU (--gpus all)")
    return None


def check_host_python(remote: Remote, python: str, *, gpus_seen: int, driver: str | None) -> None:
    r = remote.run([python, "-c", PROGRAM], check=False, timeout=300)
    problem = judge(r.stdout, gpus_seen=gpus_seen, driver=driver, where=f"the host venv ({python})")
    if problem:
        raise RemoteError(remote.label, problem)


def check_image(remote: Remote, image: str, *, gpus_seen: int, driver: str | None) -> None:
    argv = suite_container.docker_run_argv(image, suite_container.RunSettings(gpus=True), ["python", "-c", PROGRAM],
                                           name=f"cardtime-cuda-check-{image.replace(':', '-').replace('/', '-')}")
    r = remote.run(argv, check=False, timeout=600)
    problem = judge(r.stdout or r.stderr, gpus_seen=gpus_seen, driver=driver, where=f"the image {image}")
    if problem:
        raise RemoteError(remote.label, problem)
