"""This machine's apt sources, read one way for every caller: deb822 `*.sources` files first,
then one-line `sources.list` and `*.list` files, in file order; and .debs fetched from the Debian
mirror they name under a private apt configuration, so the machine's own apt state is never touched
(the CUDA toolkits' compilers, the conda bootstrap channel's libpng and libjpeg, the bullseye
sysroot)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from shipyard.errors import ToolchainMissing, ToolError
from shipyard.plumbing import command

DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEBIAN_KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")


@dataclass(frozen=True)
class AptSource:
    """One enabled binary (`deb`) source: its URIs, suites and components."""

    uris: tuple[str, ...]
    suites: tuple[str, ...]
    components: tuple[str, ...]


def apt_sources(apt_dir: Path = Path("/etc/apt")) -> list[AptSource]:
    """Every enabled `deb` source under `apt_dir`; disabled stanzas and `deb-src` lines are left out."""
    found = []
    for path in sorted((apt_dir / "sources.list.d").glob("*.sources")):
        for stanza in _deb822_stanzas(path.read_text(errors="replace")):
            if stanza.get("enabled", "yes").lower() == "no" or "deb" not in stanza.get("types", "").split():
                continue
            found.append(AptSource(*(tuple(stanza.get(k, "").split()) for k in ("uris", "suites", "components"))))
    for path in [apt_dir / "sources.list", *sorted((apt_dir / "sources.list.d").glob("*.list"))]:
        if not path.is_file():
            continue
        for line in path.read_text(errors="replace").splitlines():
            # deb [options] URI suite component...
            words = re.sub(r"\[[^\]]*\]", " ", line.split("#", 1)[0]).split()
            if len(words) >= 3 and words[0] == "deb":
                found.append(AptSource((words[1],), (words[2],), tuple(words[3:])))
    return found


def _deb822_stanzas(text: str) -> Iterator[dict[str, str]]:
    stanza: dict[str, str] = {}
    key = None
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        if not line.strip():
            if stanza:
                yield stanza
            stanza, key = {}, None
        elif line[0] in " \t" and key:
            stanza[key] += " " + line.strip()
        elif ":" in line:
            key, value = line.split(":", 1)
            key = key.strip().lower()
            stanza[key] = value.strip()
    if stanza:
        yield stanza


# --- the machine's Debian mirror -----------------------------------------------------------------

def debian_mirror(apt_etc: Path = Path("/etc/apt")) -> str:
    """The Debian archive URI the machine's own apt sources name; deb.debian.org when none does."""
    for source in apt_sources(apt_etc):
        uri = _debian_archive_uri(list(source.uris), list(source.suites), list(source.components))
        if uri:
            return uri
    return DEFAULT_MIRROR


def _debian_archive_uri(uris: list[str], suites: list[str], components: list[str]) -> str | None:
    # The main archive is the entry with a plain release suite ("bookworm", not "bookworm-security")
    # and the main component; security and third-party repositories do not carry non-free CUDA.
    if "main" not in components or not any("-" not in s and "/" not in s for s in suites):
        return None
    for uri in uris:
        if re.match(r"(https?|file):", uri) and "/debian" in uri and "debian-security" not in uri:
            return uri.rstrip("/")
    return None


def download_debs(suite: str, component: str, packages: Sequence[str], apt_dir: Path,
                  say: Callable[[str], None]) -> list[Path]:
    """`apt-get download` `packages` from `suite`/`component` of the machine's Debian mirror into
    `apt_dir`/debs, one .deb per package in the order asked, under a private apt configuration in
    `apt_dir` (its own sources.list, lists and cache): the machine's apt state stays untouched."""
    apt = _private_apt(suite, component, apt_dir)
    debs_dir = apt_dir / "debs"
    debs_dir.mkdir(parents=True, exist_ok=True)
    say(f"download debs: {' '.join(packages)} from {apt.mirror} {suite}/{component}")
    apt.run(["update"], what=f"apt-get update ({apt.mirror} {suite} {component})")
    apt.run(["download", *packages], cwd=debs_dir, what=f"apt-get download {' '.join(packages)}")
    debs = []
    for package in packages:
        found = sorted(debs_dir.glob(f"{package}_*.deb"))
        if len(found) != 1:
            raise ToolError(f"download debs: expected one {package} .deb in {debs_dir}, found {len(found)}")
        debs.append(found[0])
    return debs


def download_closure(suite: str, component: str, packages: Sequence[str], apt_dir: Path,
                     say: Callable[[str], None]) -> list[Path]:
    """`packages` and everything they depend on (no recommends) from `suite`/`component` of the
    machine's Debian mirror, as .debs in `apt_dir`; apt resolves against an empty package status
    of its own, as for an empty root, so nothing of this machine's dpkg state is read or touched."""
    apt = _private_apt(suite, component, apt_dir)
    status = apt_dir / "status"
    status.write_text("")
    say(f"download debs: {' '.join(packages)} and their dependencies from {apt.mirror} {suite}/{component}")
    apt.run(["update"], what=f"apt-get update ({apt.mirror} {suite} {component})")
    apt.run(["-o", f"Dir::State::status={status}", "-o", f"Dir::State={apt_dir / 'state'}",
             # No dpkg runs: only the private folders are used, so the machine's dpkg lock is not taken.
             "-o", "Debug::NoLocking=1", "-o", "APT::Install-Recommends=false",
             "-o", "APT::Architectures::=amd64", "-y", "install", "--download-only", *packages],
            what=f"apt-get install --download-only {' '.join(packages)}")
    debs = sorted((apt_dir / "cache" / "archives").glob("*.deb"))
    missing = [p for p in packages if not any(d.name.startswith(f"{p}_") for d in debs)]
    if missing:
        raise ToolError(f"download debs: apt fetched no {', '.join(missing)} from {apt.mirror} {suite}/{component}")
    return debs


@dataclass(frozen=True)
class _PrivateApt:
    mirror: str
    suite: str
    component: str
    options: tuple[str, ...]

    def run(self, args: Sequence[str], *, what: str, cwd: Path | None = None) -> None:
        env = {"LC_ALL": "C", "DEBIAN_FRONTEND": "noninteractive"}
        error_on = ["--error-on=any"] if args[:1] == ["update"] else []
        try:
            command.run(["apt-get", *self.options, *error_on, *args], cwd=cwd, extra_env=env, timeout=1800,
                        what=what)
        except ToolError as exc:
            raise ToolError(f"download debs: {exc.args[0]}. Fix: check that {self.mirror} serves "
                            f"{self.suite}/{self.component} (the mirror comes from /etc/apt/sources.list.d)",
                            cmd=exc.cmd, returncode=exc.returncode, output=exc.output) from exc


def _private_apt(suite: str, component: str, apt_dir: Path) -> _PrivateApt:
    """apt options that read and write only `apt_dir` (sources.list, lists, cache) for one suite."""
    mirror = debian_mirror()
    if not DEBIAN_KEYRING.is_file():
        raise ToolchainMissing(f"{DEBIAN_KEYRING} is missing, so Debian's {suite} index cannot be "
                               "verified. Fix: apt-get install -y debian-archive-keyring")
    lists, cache_dir = apt_dir / "lists", apt_dir / "cache"
    for folder in (lists / "partial", cache_dir / "archives" / "partial", apt_dir / "state"):
        folder.mkdir(parents=True, exist_ok=True)
    sources_list = apt_dir / "sources.list"
    sources_list.write_text(f"deb [signed-by={DEBIAN_KEYRING}] {mirror} {suite} {component}\n")
    options = [
        "-o", f"Dir::Etc::SourceList={sources_list}",
        "-o", "Dir::Etc::SourceParts=/dev/null",
        "-o", f"Dir::State::Lists={lists}",
        "-o", f"Dir::Cache={cache_dir}",
        "-o", "Dir::Etc::Preferences=/dev/null",
        "-o", "Dir::Etc::PreferencesParts=/dev/null",
    ]
    if os.geteuid() == 0:
        # apt would otherwise warn that _apt cannot write our private folders, then fetch as root anyway.
        options += ["-o", "APT::Sandbox::User=root"]
    return _PrivateApt(mirror, suite, component, tuple(options))
