"""`shipyard image …`: build a variant's images; `shipyard publish` publishes them."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.table import Table

from shipyard.cli.shared import console, dist_folder, err_console, load_release
from shipyard.plumbing.hashing import sha256_hex

if TYPE_CHECKING:
    from shipyard.image.build import ImageRequest
    from shipyard.image.plan import ImageResult
    from shipyard.release.spec import Spec


def cmd_image_build(args: argparse.Namespace) -> int:
    from shipyard.cli.build_report import live_progress
    from shipyard.image.build import ImageRequest, build_images
    from shipyard.image.plan import with_repository

    start = time.monotonic()
    spec = load_release(args)
    if args.repository:
        spec = with_repository(spec, args.repository)
    request = ImageRequest(
        variant=args.variant, dist=dist_folder(args),
        targets=tuple(args.target or ("runtime", "devel")), channel=args.channel, base_image=args.base_image,
        python_image=args.python_image, python_prefix=args.python_prefix, allow_untested=args.allow_untested,
        no_cache=args.no_cache)
    if args.plan:
        return _print_plan(spec, request)
    with live_progress(err_console, f"image {args.variant}") as progress:
        results = build_images(spec, request, progress)
    table = Table(title=f"images, variant {args.variant}")
    for column in ("image", "also tagged", "id", "size", "budget", "build"):
        table.add_column(column, overflow="fold")
    for result in results:
        plan = result.plan
        table.add_row(plan.tag, plan.channel_tag, result.image_id.removeprefix("sha256:")[:12],
                      f"{result.size_mb:.0f} MB", f"{plan.budget_mb:g} MB",
                      "unchanged" if result.cached else f"built in {result.seconds:.0f} s")
    console.print(table)
    console.print(f"done in {time.monotonic() - start:.1f} s; labels: docker inspect --format "
                  "'{{json .Config.Labels}}' " + results[0].plan.tag)
    if args.save:
        _save_images(results, Path(args.save))
    from shipyard.supply.signing import sign_after_build

    sign_after_build(spec, request.dist, console, err_console)
    return 0


def _save_images(results: list[ImageResult], archive: Path) -> None:
    """The images this build made, under both their tags, into one `docker save` archive (what the
    CI publish job loads); never other images the engine holds."""
    from shipyard.plumbing import command

    tags = [tag for result in results for tag in result.plan.tags]
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(archive.name + ".partial")
    command.run(["docker", "save", "-o", str(partial), *tags], timeout=1800, what=f"docker save {archive.name}")
    partial.replace(archive)
    console.print(f"saved {', '.join(tags)} to {archive}")


def _print_plan(spec: Spec, request: ImageRequest) -> int:
    """What `image build` would build and from what, with no engine asked and nothing staged."""
    from shipyard.image.plan import image_plans

    plans = image_plans(spec, request.variant, targets=request.targets, channel=request.channel, dist=request.dist)
    table = Table(title=f"images, variant {request.variant} (plan: nothing built)")
    for column in ("image", "also tagged", "target", "budget"):
        table.add_column(column, overflow="fold")
    for plan in plans:
        table.add_row(plan.tag, plan.channel_tag, plan.target, f"{plan.budget_mb:g} MB")
    console.print(table)
    recipe = request.dockerfile.read_bytes()
    console.print(f"Dockerfile: {request.dockerfile} (sha256 {sha256_hex(recipe)}, "
                  f"{len(recipe)} bytes)", soft_wrap=True)
    console.print(f"context: Dockerfile, index/ (the variant's wheels in {request.dist}), deps/ (their "
                  "pinned dependencies), examples/ (from the wheels)", soft_wrap=True)
    return 0


def cmd_image_push(args: argparse.Namespace) -> int:
    """Removed (#29): it wrote channel tags outside gating, immutability and the journal."""
    from shipyard.errors import UsageError

    raise UsageError("shipyard image push: removed; publish images with `shipyard publish --channel CHANNEL "
                     "--target <docker target>` (and move them with `shipyard promote`), which gates them, never "
                     "moves a published tag and can be resumed (got image push)")


def cmd_image_bases(args: argparse.Namespace) -> int:
    """The images a variant's images build FROM, one per line: what the docker job pulls."""
    from shipyard.image.bases import configured_bases, pinned_by_digest
    from shipyard.image.plan import image_plans

    spec = load_release(args)
    variant = image_plans(spec, args.variant)[0].variant.name  # else the error naming the variants with images
    assert spec.release.images is not None
    for ref in dict.fromkeys(configured_bases(spec.release.images, variant)):
        console.print(ref, markup=False, highlight=False, soft_wrap=True)
        if not pinned_by_digest(ref):
            err_console.print(f"warning: {ref} is not pinned by digest: a pull takes whatever the tag names today; "
                              f"write it as {ref}@sha256:<digest> in release.yaml (`docker buildx imagetools "
                              f"inspect {ref}` shows the digest)", markup=False, highlight=False, soft_wrap=True)
    return 0


def add_image_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("image", help="Docker images: build a variant's runtime and devel images")
    isub = p.add_subparsers(dest="image_command", required=True)
    b = isub.add_parser("build", help="build (or find unchanged) a variant's images from its wheel index")
    b.add_argument("--variant", required=True, help="a variant of release.yaml's images.variants: cpu, cuda11 …")
    b.add_argument("--target", action="append", choices=("runtime", "devel"), help="only this target (repeatable)")
    b.add_argument("--channel", choices=("nightly", "test", "release"),
                   help="the channel tag (default: images.channel)")
    b.add_argument("--dist", help="where the wheels and manifest.json are (default: <root>/dist)")
    b.add_argument("--base-image", help="the image to build FROM (default: images.base_image when the engine "
                                        "holds it, else shipyard's bootstrapped Debian base)")
    b.add_argument("--python-image", help="the image the Python prefix is copied from (default: "
                                          "images.python_image when the engine holds it, else this host's Python)")
    b.add_argument("--python-prefix", help="the Python's prefix inside --python-image (default /usr/local)")
    b.add_argument("--allow-untested", action="store_true",
                   help="accept wheels built with --no-tests (their manifest records no test run)")
    b.add_argument("--no-cache", action="store_true", help="build every layer again")
    b.add_argument("--save", metavar="FILE", help="also write the images built, under both their tags, to FILE "
                                                  "(a docker save archive, for a publish job to load)")
    b.add_argument("--plan", action="store_true",
                   help="print the images, their tags and the Dockerfile they build from; build nothing")
    b.add_argument("--repository", help="name the images REPOSITORY instead of images.repository (shipyard repro "
                                        "builds under its own name)")
    b.set_defaults(func=cmd_image_build)
    s = isub.add_parser("bases", help="print the images a variant's images build FROM (release.yaml's "
                                      "images.base_image and python_image), one per line, for `docker pull`")
    s.add_argument("--variant", required=True, help="a variant of release.yaml's images.variants: cpu, cuda11 …")
    s.set_defaults(func=cmd_image_bases)
    u = isub.add_parser("push", help="removed: publish images with shipyard publish --channel C --target "
                                     "<docker target>")
    for old in ("--variant", "--target", "--channel", "--to", "--registry"):  # its old options, to reach the message
        u.add_argument(old, action="append", help=argparse.SUPPRESS)
    u.set_defaults(func=cmd_image_push)
