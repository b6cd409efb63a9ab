"""The images' figures, printed, never asserted: the CPU image's rebuild time after a change under suite/ only
(target: under 30 s), and the CUDA image's size and build time.

    python -m tests.bench_image

The CUDA image's first build (~10 minutes here) is not repeated by the bench: its time is the one
docker/build-cuda-image.sh recorded ($CARDTIME_CACHE/build-<tag>.txt, written by .ci/run's build or by
hand), printed with the image's size as the engine reports it now.

Builds docker/cpu.Dockerfile through the Docker SDK (provisioning/runtime/images.py) from a copy of the
build context, twice: once to have every layer cached, then after appending a comment to a file
of suite/ in the copy. Needs a Docker engine and the local base image (docker/debian-base.sh);
the first build of a fresh machine takes minutes, the figure is the second.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "e2e"))


def image_rebuild_after_a_suite_change() -> None:
    from docker_engine import BASE_IMAGE, EngineUnavailable, make_base_image, prepare_context

    from provisioning.runtime import images
    from provisioning.runtime.engine import EngineError, connect

    try:
        client = connect()
        make_base_image()
    except (EngineError, EngineUnavailable) as e:
        print(f"image rebuild: not measured ({e})")
        return
    prepare_context()
    with tempfile.TemporaryDirectory() as tmp:
        context = Path(tmp)
        for name in ("pyproject.toml", ".dockerignore"):
            shutil.copy2(REPO / name, context / name)
        for name in ("suite", "reports", "provisioning", "docker"):
            shutil.copytree(
                REPO / name,
                context / name,
                symlinks=True,
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
            )
        args = {"BASE": BASE_IMAGE, "CARDTIME_COMMIT": "bench"}

        def build() -> float:
            start = time.monotonic()
            images.build_image(
                client,
                context,
                tag="cardtime:cpu-bench",
                dockerfile=images.CPU_DOCKERFILE,
                buildargs=args,
                network_mode="host",
            )
            return time.monotonic() - start

        cached = build()
        with open(context / "suite" / "__init__.py", "a") as f:
            f.write(f"# touched by tests/bench_image.py at {time.time()}\n")
        changed = build()
    client.images.remove("cardtime:cpu-bench", noprune=False)
    wheels = sum(p.stat().st_size for p in (REPO / "docker" / "wheels").rglob("*") if p.is_file()) / 1e6
    print(f"CPU image rebuild after a change under suite/: {changed:.1f} s (target < 30 s)")
    print(
        f"  (everything cached, warm-up build: {cached:.1f} s; context holds {wheels:.0f} MB of wheels, "
        "tarred and sent on every build)"
    )


def cuda_image_size_and_build_time() -> None:
    import os
    import subprocess

    cache = Path(os.environ.get("CARDTIME_CACHE", "/var/cache/cardtime"))
    for tag in ("cardtime:cuda-ci", "cardtime:cuda"):
        record = cache / f"build-{tag.replace(':', '_').replace('/', '_')}.txt"
        size = subprocess.run(
            ["docker", "image", "inspect", "--format", "{{.Size}}", tag], capture_output=True, text=True
        )
        if size.returncode != 0:
            print(
                f"CUDA image {tag}: not built here (docker/build-cuda-image.sh "
                f"{'ci' if 'ci' in tag else 'box'})"
            )
            continue
        facts = (
            dict(line.split("=", 1) for line in record.read_text().splitlines() if "=" in line)
            if record.exists()
            else {}
        )
        took = (
            f"built in {int(facts['build_s']) / 60:.1f} min on {facts.get('cpus', '?')} CPUs "
            f"({facts.get('date')}; "
            "that invocation's time: layers it found cached took seconds)"
            + (f", with {facts['extra_args']}" if facts.get("extra_args") else "")
            if "build_s" in facts
            else f"build time not recorded ({record} absent)"
        )
        print(f"CUDA image {tag}: {int(size.stdout.strip()) / 1e9:.2f} GB on disk, {took}")


def main() -> int:
    image_rebuild_after_a_suite_change()
    cuda_image_size_and_build_time()
    return 0


if __name__ == "__main__":
    sys.exit(main())
