"""A folder that readers never see half-written: a symlink to one generation folder.

`<parent>/<name>` is a symlink to `<parent>/.<name>-gen-<n>`. A writer stages generation n+1
beside it, checks it, and only then replaces the symlink in one rename; readers that resolve the
link per request see one whole generation or the other. The staged generation is fsynced before
the rename and the parent folder after it: a crash or power cut right after a switch leaves the
link pointing at a whole generation, never at files the disk has not got. The conda channel (conda/channel.py) and
the published trees (publish/static_tree.py, publish/conda_channel.py) are such folders.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import shutil
from pathlib import Path

from shipyard.errors import GenerationError
from shipyard.plumbing.atomic_files import sync_folder, sync_tree

_GENERATION = re.compile(r"^\.(?P<name>.+)-gen-(?P<n>\d+)$")


def current_generation(link: Path) -> Path | None:
    """The folder readers see now (the symlink's target, or a plain folder of an older layout)."""
    if link.is_symlink():
        target = link.parent / os.readlink(link)
        return target if target.is_dir() else None
    return link if link.is_dir() else None


def generations(link: Path) -> list[Path]:
    """Every generation folder of `link`, oldest first."""
    if not link.parent.is_dir():
        return []
    found = [(int(m["n"]), p) for p in link.parent.iterdir()
             if (m := _GENERATION.match(p.name)) and m["name"] == link.name]
    return [p for _, p in sorted(found)]


def next_generation(link: Path) -> Path:
    """The path of the generation after every existing one (not created)."""
    numbers = [int(m["n"]) for p in generations(link) if (m := _GENERATION.match(p.name))]
    return link.parent / f".{link.name}-gen-{max(numbers, default=0) + 1}"


def switch(link: Path, generation: Path) -> None:
    """Point `link` at `generation` in one step, once every file of it is on the disk."""
    sync_tree(generation)
    tmp = link.parent / f".{link.name}.link-{os.getpid()}"
    tmp.unlink(missing_ok=True)
    os.symlink(generation.name, tmp)
    sync_folder(link.parent)  # the generation's own name, and the new link's
    if link.is_dir() and not link.is_symlink():
        # The plain folder of an older layout: exchange it with the symlink, then remove it.
        _exchange(tmp, link)
        sync_folder(link.parent)
        shutil.rmtree(tmp)
        return
    os.replace(tmp, link)
    sync_folder(link.parent)  # the switch itself


def _exchange(a: Path, b: Path) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    at_fdcwd, rename_exchange = -100, 2
    if renameat2 is None or renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) != 0:
        code = ctypes.get_errno() if renameat2 is not None else errno.ENOSYS
        a.unlink(missing_ok=True)
        raise GenerationError(f"{b}: a plain folder, and it cannot be exchanged for a symlink here "
                              f"({os.strerror(code)}); move it aside (e.g. to {b.parent / ('.' + b.name + '-gen-0')}) "
                              f"and publish again")


def remove_unused_generations(link: Path, *, previous: Path | None) -> None:
    """Remove every generation but the live one and `previous` (the one that was live just before
    the switch: a reader that resolved the link a moment ago may still be downloading from it).
    A generation that was staged but never switched to (a writer killed mid-stage) is neither, so
    it goes, whatever its number: counting the newest N would keep such an orphan and delete the
    generation readers were just using."""
    live = current_generation(link)
    for path in generations(link):
        if path not in (live, previous):
            shutil.rmtree(path, ignore_errors=True)
