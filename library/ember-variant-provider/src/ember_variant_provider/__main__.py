"""`python -m ember_variant_provider --guide URL`: the ember build for this machine, and how to install it
with today's tools (pip, uv, conda, docker), before installing anything.

The guide is the `install.json` a release publishes beside its variant index: the `*-variants.json`
of ember, and per platform the index URL and commands of every build it holds (written by the
release from its publish targets and what it built).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import urllib.request
from pathlib import Path
from typing import Any

from ember_variant_provider.choice import Choice, choose
from ember_variant_provider.machine import MACHINE_ENV, current_machine, nvml_description

GUIDE_ENV = "EMBER_INSTALL_GUIDE"
INSTALLERS = ("pip", "uv", "conda", "docker")
_OS = {"linux": "linux", "win32": "windows", "darwin": "macos"}
_ARCH = {"amd64": "x86_64", "x86_64": "x86_64", "arm64": "arm64", "aarch64": "arm64"}


class GuideError(Exception):
    """A guide that cannot be read: one line, exit status 2."""


def read_guide(where: str) -> dict[str, Any]:
    try:
        if "://" in where:
            with urllib.request.urlopen(where, timeout=30) as response:  # noqa: S310 (the user's own URL)
                text = response.read().decode("utf-8")
        else:
            text = Path(where).read_text(encoding="utf-8")
        guide = json.loads(text)
    except (OSError, ValueError) as exc:
        raise GuideError(f"{_public(where)}: not a readable install guide ({exc}); pass --guide with the "
                         f"install.json beside the release's variant index") from None
    if not isinstance(guide, dict) or not isinstance(guide.get("platforms"), dict) or "variants_json" not in guide:
        raise GuideError(f"{_public(where)}: platforms: missing; this is not an install guide (install.json)")
    return guide


def this_platform(guide: dict[str, Any]) -> str | None:
    """The guide's platform this interpreter runs on (linux-x86_64, …), None when it has none."""
    os_name = _OS.get(sys.platform, sys.platform)
    arch = _ARCH.get(platform.machine().lower(), platform.machine().lower())
    return next((name for name, p in guide["platforms"].items()
                 if p.get("os") == os_name and _ARCH.get(p.get("arch", ""), p.get("arch")) == arch), None)


def render(guide: dict[str, Any], choice: Choice, platform_name: str) -> str:
    """What the command prints: the machine, the build and why, its index and the four commands."""
    builds = guide["platforms"][platform_name]["builds"]
    label = next((lbl for lbl in choice.ranked if lbl in builds), None)
    lines = [f"{guide['release']} {guide['version']} ({guide['channel']}) for this machine: "
             f"{current_machine().describe()}"]
    if label is None:
        lines.append(f"no build for {platform_name} runs here (the release has {', '.join(builds) or 'none'})")
        return "\n".join(lines) + "\n"
    why = choice.why if label == choice.label else f"{choice.label} is not built for {platform_name}"
    build = builds[label]
    lines += [f"build:  {label}: {why}", f"index:  {build['index_url']}"]
    for installer in INSTALLERS:
        command = build["commands"].get(installer)
        lines.append(f"{installer + ':':7} {command or 'none: ' + build['missing'].get(installer, 'not published')}")
    for dropped, because in sorted(choice.dropped.items()):
        lines.append(f"not {dropped}: {because}")
    return "\n".join(lines) + "\n"


def _public(where: str) -> str:
    """A URL without what may be a credential (userinfo, query)."""
    if "://" not in where:
        return where
    scheme, rest = where.split("://", 1)
    host_path = rest.rsplit("@", 1)[-1] if "@" in rest.split("/", 1)[0] else rest
    return f"{scheme}://{host_path.split('?', 1)[0].split('#', 1)[0]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ember-variant-provider",
                                     description="the ember build for this machine and the commands that install it")
    parser.add_argument("--guide", default=os.environ.get(GUIDE_ENV),
                        help=f"the release's install.json, a URL or a file (default: ${GUIDE_ENV})")
    parser.add_argument("--machine", type=Path, help="a recorded machine description instead of this machine's NVML")
    parser.add_argument("--platform", help="the guide's platform to answer for (default: this one)")
    parser.add_argument("--record", action="store_true", help="print this machine's description (JSON) and stop")
    args = parser.parse_args(argv)
    if args.record:
        print(json.dumps(nvml_description(), indent=2, sort_keys=True))
        return 0
    try:
        if not args.guide:
            raise GuideError(f"--guide: missing; pass the install.json beside the release's variant index "
                             f"(or set {GUIDE_ENV})")
        if args.machine is not None:
            if not args.machine.is_file():
                raise GuideError(f"{args.machine}: --machine: file not found; pass a recorded machine description")
            os.environ[MACHINE_ENV] = str(args.machine.resolve())
        guide = read_guide(args.guide)
        platform_name = args.platform or this_platform(guide)
        if platform_name not in guide["platforms"]:
            raise GuideError(f"{_public(args.guide)}: platforms: no build for this platform; pass --platform with one "
                             f"of {', '.join(guide['platforms'])} (got {platform_name or sys.platform})")
        choice = choose(guide["variants_json"])
    except (GuideError, LookupError, ValueError) as exc:
        print(f"ember-variant-provider: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(render(guide, choice, platform_name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
