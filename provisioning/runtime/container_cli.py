"""`python -m provisioning image-build | image-push | rehearse-docker`: the Makefile's image targets.

    python -m provisioning image-build [--dockerfile docker/cpu.Dockerfile] [--tag cardtime:cuda] [--cuda-line
    cu126]
    python -m provisioning image-push registry/name:tag                     # make image-push
    python -m provisioning rehearse-docker [--stages topology,bandwidth]    # make rehearse-docker

The engine is DOCKER_HOST's, the local socket's, or --engine URL's (provisioning/runtime/engine.py).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from provisioning.runtime import images, suite_container
from provisioning.runtime.engine import connect
from suite.hardware import cuda_lines


def _say(line: str) -> None:
    print(line, flush=True)


def image_buildargs(
    context: Path, *, base: str | None = None, cuda_line: str | None = None, extra: list[str] = ()
) -> dict[str, str]:
    """The build arguments: the context's commit, the CUDA line's four, BASE=, then KEY=VALUE items."""
    args = images.commit_buildargs(context)
    if cuda_line:
        args.update(cuda_lines.line_named(cuda_line).build_args())
    if base:
        args["BASE"] = base
    for item in extra:
        key, _, value = item.partition("=")
        args[key] = value
    return args


def cmd_build(args) -> int:
    client = connect(args.engine)
    buildargs = image_buildargs(args.context, base=args.base, cuda_line=args.cuda_line, extra=args.build_arg)
    image = images.build_image(
        client,
        args.context,
        tag=args.tag,
        dockerfile=args.dockerfile,
        buildargs=buildargs,
        network_mode=args.network,
        on_line=_say if args.verbose else None,
    )
    print(f"built {args.tag} ({image[:19]})")
    return 0


def cmd_push(args) -> int:
    client = connect(args.engine)
    images.push_image(client, args.source, args.reference, on_line=_say)
    print(f"pushed {args.reference}")
    return 0


def cmd_rehearse(args) -> int:
    """Build the CPU image, run the rehearsal in it with runs/ mounted, and leave runs/LAST pointing at the
    run."""
    client = connect(args.engine)
    if not args.no_build:
        images.build_image(
            client,
            args.context,
            tag=args.tag,
            dockerfile=images.CPU_DOCKERFILE,
            buildargs=image_buildargs(args.context, base=args.base),
            network_mode="host",
            on_line=_say if args.verbose else None,
        )
    runs = args.runs.resolve()
    runs.mkdir(parents=True, exist_ok=True)
    suite_args = ["run", "--profile", "gloo-cpu", "--out", str(runs), "--record-last", str(runs / "LAST")]
    if args.stages:
        suite_args += ["--stages", args.stages]
    # The laptop's own user, so the run directory on the laptop is not root's.
    settings = suite_container.RunSettings(
        gpus=False, mounts=(str(runs),), user=suite_container.host_user(os.getuid(), os.getgid())
    )
    run = suite_container.start_suite(client, args.tag, settings, args=suite_args)
    try:
        for line in suite_container.follow(run):
            print(line, flush=True)
        code = suite_container.wait(run)
    finally:
        suite_container.remove_suite(run)
    last = runs / "LAST"
    print(
        f"container exited with {code}; run directory: "
        f"{last.read_text().strip() if last.exists() else '(none)'}"
    )
    return code


def add_commands(sub) -> None:
    """The image subcommands, added to provisioning/__main__.py's parser."""

    def engine_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument("--engine", help="engine URL (default: DOCKER_HOST or the local socket)")

    b = sub.add_parser("image-build", help="build an image through the engine")
    engine_arg(b)
    b.add_argument("--dockerfile", default=images.CUDA_DOCKERFILE)
    b.add_argument("--tag", default="cardtime:cuda")
    b.add_argument("--context", type=Path, default=Path("."))
    b.add_argument(
        "--cuda-line",
        choices=[line.name for line in cuda_lines.LINES],
        default=None,
        help=f"the CUDA line's build arguments (default: the Dockerfile's, {cuda_lines.DEFAULT.name})",
    )
    b.add_argument("--base", help="BASE build argument (the FROM image)")
    b.add_argument("--build-arg", action="append", default=[], metavar="KEY=VALUE")
    b.add_argument(
        "--network", help="network mode of the build's RUN steps (host on an engine without a bridge)"
    )
    b.add_argument("--verbose", action="store_true", help="stream the build's output")
    b.set_defaults(func=cmd_build)

    q = sub.add_parser("image-push", help="tag a local image as REFERENCE and push it")
    engine_arg(q)
    q.add_argument("reference", help="registry/name:tag")
    q.add_argument("--source", default="cardtime:cuda")
    q.set_defaults(func=cmd_push)

    r = sub.add_parser("rehearse-docker", help="the rehearsal inside the CPU image, runs/ mounted")
    engine_arg(r)
    r.add_argument("--tag", default="cardtime:cpu")
    r.add_argument("--context", type=Path, default=Path("."))
    r.add_argument("--base", help="BASE build argument (default: the Dockerfile's, debian:bookworm-slim)")
    r.add_argument("--runs", type=Path, default=Path("runs"))
    r.add_argument("--stages", help="only these stages, e.g. topology,bandwidth")
    r.add_argument("--no-build", action="store_true", help="run the image as it is")
    r.add_argument("--verbose", action="store_true", help="stream the build's output")
    r.set_defaults(func=cmd_rehearse)
