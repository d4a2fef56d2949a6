"""Signing what a build wrote: the manifest's artifacts, with the release's key, and one line on it."""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console

from shipyard.release.spec import Spec


def report_signing(report: object, out: Console, err: Console) -> None:
    """One line after a build: how many artifacts were signed, with which key (never the key)."""
    from shipyard.supply.provenance import AttestReport

    if isinstance(report, AttestReport):
        out.print(f"provenance: {report.signed} signed, {report.kept} unchanged (key: {report.key})")
        for reason in report.refused:
            err.print(f"[yellow]unsigned[/]: {reason}", soft_wrap=True)


def sign_after_build(spec: Spec, dist: Path, out: Console, err: Console) -> None:
    """What a build command runs last: sign the manifest's artifacts when a key is there; without
    one, say so (verify will then fail on them) and how to make one."""
    from shipyard.errors import SigningKeyError
    from shipyard.supply.provenance import sign_dist

    start = time.monotonic()
    try:
        report = sign_dist(spec, dist, keep_signed=True)
    except SigningKeyError as exc:
        err.print(f"[yellow]unsigned[/]: {exc}", markup=True, soft_wrap=True)
        return
    report_signing(report, out, err)
    if report is not None:
        out.print(f"provenance: {time.monotonic() - start:.2f} s")
