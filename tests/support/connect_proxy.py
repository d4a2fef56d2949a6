"""proxy.py (from PyPI), a real CONNECT proxy, on a claimed loopback port: what the publish tests
go through to reach a server behind a proxy, and whose log says which tunnels it opened."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import requests
from support.publish_servers import unbound_port

from shipyard.plumbing.port_ranges import claimed_port_range

PROXY = shutil.which("proxy") or str(Path(sys.executable).parent / "proxy")


@contextmanager
def connect_proxy(folder: Path) -> Iterator[tuple[str, Path]]:
    """proxy.py on a claimed loopback port; its URL and its log (one line per tunnel it opened)."""
    log = folder / "proxy.log"
    with claimed_port_range() as ports:
        port = unbound_port(ports)
        process = subprocess.Popen([PROXY, "--hostname", "127.0.0.1", "--port", str(port), "--num-acceptors", "1",
                                    "--num-workers", "1", "--log-file", str(log), "--log-level", "INFO"],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    requests.get(f"http://127.0.0.1:{port}/", timeout=1)
                    break
                except requests.ConnectionError:
                    if process.poll() is not None or time.monotonic() > deadline:
                        started = log.read_text() if log.exists() else ""
                        raise RuntimeError(f"proxy.py did not start: {started}") from None
                    time.sleep(0.1)
            yield f"http://127.0.0.1:{port}", log
        finally:
            process.terminate()
            process.wait(timeout=20)


