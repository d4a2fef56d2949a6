"""A training-script stand-in for the launcher tests: elastic_worker.py MODE OUT_DIR."""
import json
import os
import sys
import time
from pathlib import Path

mode, out = sys.argv[1], Path(sys.argv[2])
restart = int(os.environ["EMBER_ELASTIC_RESTART_COUNT"])
rank = int(os.environ["RANK"])
keys = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "MASTER_ADDR",
        "MASTER_PORT", "EMBER_ELASTIC_RESTART_COUNT", "TORCHELASTIC_RESTART_COUNT", "MAX_RESTARTS"]
record = {k: os.environ.get(k) for k in keys}
record["pid"] = os.getpid()
record["argv"] = sys.argv
# Whether the launcher handed the job token over (the token itself is never recorded).
record["has_token"] = bool(os.environ.get("EMBER_RDZV_TOKEN"))


def write(name, data):
    tmp = out / (name + ".tmp")
    tmp.write_text(json.dumps(data))
    tmp.rename(out / name)


def allreduce_ranks():
    import numpy as np
    import ember.distributed as dist

    dist.init_process_group("tcp", init_method="env://", timeout=20)
    total = np.array([dist.get_rank()], dtype=np.int64)
    dist.all_reduce(total)
    dist.destroy_process_group()
    return int(total[0])


if mode == "env":
    record["rank_sum"] = allreduce_ranks()
    write(f"env-{restart}-{rank}.json", record)
elif mode == "fail_first":
    write(f"attempt-{restart}-{rank}.json", record)
    if restart == 0 and rank == 1:
        time.sleep(0.3)
        sys.exit(7)
    record["rank_sum"] = allreduce_ranks()
    write(f"done-{restart}-{rank}.json", record)
elif mode == "always_fail":
    write(f"attempt-{restart}-{rank}.json", record)
    sys.exit(3)
elif mode == "sleep":
    write(f"pid-{rank}.json", record)
    time.sleep(120)
elif mode == "sleep_until_two":
    # Runs until the group has two nodes; a lone node waits to be joined.
    nodes = os.environ["GROUP_WORLD_SIZE"]
    write(f"round-{nodes}nodes-{rank}.json", record)
    if nodes == "1":
        time.sleep(120)
    record["rank_sum"] = allreduce_ranks()
elif mode == "probe_master_port":
    # Can anyone else take MASTER_PORT? It must already be held for us.
    import socket

    probe = socket.socket()
    try:
        probe.bind((os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])))
        record["bind"] = "free"
    except OSError:
        record["bind"] = "in use"
    finally:
        probe.close()
    record["rank_sum"] = allreduce_ranks()
    write(f"probe-{rank}.json", record)
elif mode == "hold_before_init":
    # Stops between the rendezvous and the group's store, the window in which MASTER_PORT must
    # already be held, until the test has tried to take the port (it then writes OUT_DIR/go).
    write(f"ready-{rank}.json", record)
    deadline = time.monotonic() + 60
    while not (out / "go").exists():
        if time.monotonic() > deadline:
            sys.exit("hold_before_init: the test never wrote go")
        time.sleep(0.01)
    record["rank_sum"] = allreduce_ranks()
    write(f"env-{restart}-{rank}.json", record)
else:
    sys.exit(f"unknown mode {mode}")
