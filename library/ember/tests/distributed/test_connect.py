"""Connecting to a port nobody listens on yet: TCP's simultaneous open lets a client whose
ephemeral port equals the target port connect to itself. Such a socket must never count as a
connection to the server, nor keep the server from binding the port afterwards."""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.feature("distributed.collectives")

# Inside a private network namespace whose ephemeral ports are 40000 and 40001, a connect to
# 127.0.0.1:40000 without a listener meets itself nearly every time (Linux gives connects the
# even port of the range first); 40001 is left for the server's own client.
PROBE = textwrap.dedent("""
    import threading, time
    import ember.distributed as dist
    start = time.monotonic()
    try:
        dist.TCPStore("127.0.0.1", 40000, is_master=False, timeout=1)
        print("RESULT connected to nothing")
    except dist.DistributedTimeoutError as err:
        print(f"RESULT timeout after {time.monotonic() - start:.1f}s: {err}")
    # The port must still be free for the server that comes up late.
    server = dist.TCPStore("127.0.0.1", 40000, is_master=True, timeout=5)
    print("RESULT server bound", server.port)
    server.close()
""")


def _in_private_netns(code: str) -> subprocess.CompletedProcess:
    setup = "ip link set lo up && sysctl -qw net.ipv4.ip_local_port_range='40000 40001' && exec \"$@\""
    return subprocess.run(["unshare", "--net", "sh", "-c", setup, "sh", sys.executable, "-c", code],
                          capture_output=True, text=True, timeout=60)


def _netns_available() -> bool:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return False
    return _in_private_netns("pass").returncode == 0


@pytest.mark.skipif(not _netns_available(), reason="needs root and `unshare --net` to narrow the ephemeral ports")
def test_a_connect_that_meets_itself_is_not_a_connection():
    done = _in_private_netns(PROBE)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT")]
    assert done.returncode == 0, done.stderr
    assert lines[0].startswith("RESULT timeout after 1."), lines
    assert "could not connect to 127.0.0.1:40000" in lines[0]
    assert lines[1] == "RESULT server bound 40000"
