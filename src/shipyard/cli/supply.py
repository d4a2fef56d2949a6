"""`shipyard keygen | attest | verify | repro`: the supply chain's commands, thin over the package."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rich.table import Table

from shipyard.cli.shared import console, dist_folder, err_console, load_release
from shipyard.errors import NOT_REPRODUCIBLE, NOT_SIGNED, VERIFY_FAILED, UsageError
from shipyard.plumbing.input_files import input_error
from shipyard.release.validate import load_spec
from shipyard.supply.signing import report_signing


def cmd_keygen(args: argparse.Namespace) -> int:
    from shipyard.supply.keys import generate_key

    spec = load_release(args)
    settings = spec.release.supply_chain
    if args.out:
        target = Path(args.out)
    elif settings and settings.signing_key_file:
        target = spec.root / settings.signing_key_file
    else:
        raise input_error(spec.root / "release.yaml", "supply_chain.signing_key_file", "not set",
                          "name where the key is kept there (e.g. .shipyard/keys/provenance-ed25519.pem), or pass "
                          "--out FILE")
    private, public, made = generate_key(target, overwrite=args.force)
    console.print(f"{'made' if made else 'kept'} Ed25519 signing key {private} (mode 0600); public key: {public}")
    return 0


def cmd_attest(args: argparse.Namespace) -> int:
    from shipyard.supply.provenance import sign_dist

    spec = load_release(args)
    if spec.release.supply_chain is None:
        raise input_error(spec.root / "release.yaml", "supply_chain", "missing: nothing says which key signs",
                          "add a supply_chain section naming signing_key_file or signing_key_env, and builder_id "
                          "(docs/release-yaml.md)")
    report = sign_dist(spec, dist_folder(args))
    report_signing(report, console, err_console)
    return NOT_SIGNED if report and report.refused else 0


def default_public_key(root: Path) -> Path:
    """The public key beside the signing key release.yaml names (`<key>.pub.pem`, as `shipyard
    keygen` writes it); a UsageError with the fix when there is none."""
    from shipyard.supply.keys import public_key_path

    fix = "run it from the release's folder (or --root), or pass --public-key FILE"
    if not (root / "release.yaml").is_file():
        raise UsageError(f"{root / 'release.yaml'}: not found, so no signing key to verify with; {fix}")
    settings = load_spec(root).release.supply_chain
    if settings is None or not settings.signing_key_file:
        raise UsageError(f"{root / 'release.yaml'}: supply_chain.signing_key_file: not set, so no public key "
                         f"beside it; pass --public-key FILE")
    public = public_key_path(root / settings.signing_key_file)
    if not public.is_file():
        raise UsageError(f"{public}: no such public key file (beside supply_chain.signing_key_file "
                         f"{settings.signing_key_file}); run `shipyard keygen` to write it, or pass --public-key FILE")
    return public


def cmd_verify(args: argparse.Namespace) -> int:
    from shipyard.supply.keys import load_public_key
    from shipyard.supply.verify import verify

    key = load_public_key(Path(args.public_key) if args.public_key else default_public_key(Path(args.root)))
    results = verify(Path(args.target), key)
    if not results:
        raise UsageError(f"{args.target}: no artifacts to verify; build first, or pass the dist/ folder (or the "
                         f"artifact) to verify")
    table = Table(title=f"verify {args.target}")
    for column in ("artifact", "check", "result", "detail"):
        table.add_column(column, overflow="fold")
    for result in results:
        table.add_row(result.artifact, result.check, "[green]ok[/]" if result.ok else "[red]FAILED[/]", result.detail)
    console.print(table)
    failed = [r for r in results if not r.ok]
    for result in failed:
        err_console.print(str(result), markup=False, soft_wrap=True)
    artifacts = len({r.artifact for r in results})
    console.print(f"{artifacts - len({r.artifact for r in failed})} of {artifacts} artifacts verified")
    return VERIFY_FAILED if failed else 0


def cmd_repro(args: argparse.Namespace) -> int:
    from shipyard.cli.build_report import live_progress
    from shipyard.release.cell_filters import check_filters
    from shipyard.supply.repro import ReproRequest, reproduce, summary_lines

    spec = load_release(args)
    check_filters(spec.release, variant=args.variant, python=args.python, component=args.component,
                  target=args.mobile_target)
    work = Path(args.work) if args.work else spec.root / ".shipyard" / "repro"
    request = ReproRequest(variant=args.variant, pythons=tuple(args.python or ()),
                           components=tuple(args.component or ()), mobile_targets=tuple(args.mobile_target or ()),
                           conda=args.conda, conda_channels=tuple(args.conda_channel or ()),
                           bootstrap_channel=args.bootstrap_channel, images=args.images, work=work)
    start = time.monotonic()
    with live_progress(err_console, "repro") as progress:
        report = reproduce(spec.root, request, progress)
    for line in summary_lines(report):
        console.print(line, markup=False, soft_wrap=True)
    strict = all(image.identical for image in report.images)
    verdict = ("NOT identical" if not report.ok else "identical" if strict
               else "identical (images in their normalised parts)")
    console.print(f"repro: {time.monotonic() - start:.0f} s; {verdict}")
    return 0 if report.ok else NOT_REPRODUCIBLE


def add_supply_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("keygen", help="make the Ed25519 key pair that signs provenance (kept if it exists)")
    p.add_argument("--out", help="private key file (default: release.yaml's supply_chain.signing_key_file)")
    p.add_argument("--force", action="store_true", help="replace an existing key")
    p.set_defaults(func=cmd_keygen)

    p = sub.add_parser("attest", help="sign provenance for every artifact of dist/manifest.json")
    p.add_argument("--dist", help="dist folder (default: <root>/dist)")
    p.set_defaults(func=cmd_attest)

    p = sub.add_parser("verify", help="check signatures, subject digests and SBOMs of artifacts")
    p.add_argument("target", help="a dist/ folder or one artifact in it")
    p.add_argument("--public-key", help="the Ed25519 public key (PEM) provenance was signed with (default: the "
                                        "`.pub.pem` beside release.yaml's supply_chain.signing_key_file)")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("repro", help="build cells twice from clean clones and compare every artifact's bytes")
    p.add_argument("--variant", default="cpu", help="the variant to build (default: cpu)")
    p.add_argument("--python", action="append", help="only this Python (repeatable)")
    p.add_argument("--component", action="append", help="only this component (repeatable)")
    p.add_argument("--mobile-target", action="append", help="also build this ember-lite target (repeatable)")
    p.add_argument("--conda", action="store_true", help="also build the variant's conda packages")
    p.add_argument("--conda-channel", action="append", metavar="URL",
                   help="the conda builds' dependency channel (repeatable; default: release.yaml's conda.channels)")
    p.add_argument("--bootstrap-channel", action="store_true",
                   help="the conda builds search the bootstrap channel first "
                        "(`shipyard conda build --bootstrap-channel`)")
    p.add_argument("--images", action="store_true",
                   help="also build the variant's runtime image (docker engine) and compare config and layers")
    p.add_argument("--work", help="where the two clones go (default: <root>/.shipyard/repro)")
    p.set_defaults(func=cmd_repro)
