"""What every shipyard command loads before it runs: a command that does not publish does not
import the HTTP stack (requests and urllib3, about a fifth of a second of each start-up)."""

from __future__ import annotations

import subprocess
import sys


def test_a_command_that_does_not_publish_starts_without_the_http_stack() -> None:
    probe = ("import sys\n"
             "from shipyard.cli import build_parser\n"
             "build_parser()\n"
             "print(sorted(m for m in ('requests', 'urllib3') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout
