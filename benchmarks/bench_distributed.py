"""Allreduce bus bandwidth of ember.distributed vs a raw-socket ring, 4 processes on loopback.

    python benchmarks/bench_distributed.py [--world 4] [--sizes-mb 1 64] [--iters N]

busbw = size * 2*(n-1)/n / time (the bytes each rank must move in a ring allreduce, per
second). The baseline streams the same bytes around a ring of plain TCP sockets (send to
the right and receive from the left at once, no reduction), in the same run, so the
ratio shows what the collective layer costs over raw copying.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time

import numpy as np


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ember_rank(rank: int, world: int, port: int, size: int, iters: int) -> float:
    import ember.distributed as dist

    dist.init_process_group("tcp", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, timeout=120)
    data = np.ones(size // 4, dtype=np.float32)
    dist.all_reduce(data)  # warm-up: page in buffers, grow socket windows
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(data)
    elapsed = (time.perf_counter() - start) / iters
    slowest = np.array([elapsed])
    dist.all_reduce(slowest, dist.ReduceOp.MAX)
    dist.destroy_process_group()
    return float(slowest[0])


def _ring_rank(rank: int, world: int, port: int, size: int, iters: int) -> float:
    """Raw sockets: each rank streams 2*(n-1)/n * size bytes right while receiving as many from the left."""
    listener = socket.create_server(("127.0.0.1", port + 1 + rank))
    deadline = time.monotonic() + 60
    while True:  # the right neighbour may not be listening yet
        try:
            right = socket.create_connection(("127.0.0.1", port + 1 + (rank + 1) % world))
            break
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    left, _ = listener.accept()
    for s in (left, right):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    volume = size * 2 * (world - 1) // world
    out = np.ones(volume, dtype=np.uint8)
    into = bytearray(volume)
    view = memoryview(into)

    def once():
        sender = threading.Thread(target=right.sendall, args=(out,))
        sender.start()
        got = 0
        while got < volume:
            got += left.recv_into(view[got:], volume - got)
        sender.join()

    once()
    start = time.perf_counter()
    for _ in range(iters):
        once()
    elapsed = (time.perf_counter() - start) / iters
    for s in (left, right, listener):
        s.close()
    return elapsed


def _worker(argv) -> None:
    kind, rank, world, port, size, iters = argv
    fn = _ember_rank if kind == "ember" else _ring_rank
    print(json.dumps({"seconds": fn(int(rank), int(world), int(port), int(size), int(iters))}), flush=True)


def _run(kind: str, world: int, size: int, iters: int) -> float:
    port = _free_port() if kind == "ember" else 20000 + (os.getpid() * 7) % 30000
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", kind, str(r), str(world), str(port),
                               str(size), str(iters)], stdout=subprocess.PIPE, text=True) for r in range(world)]
    times = []
    for p in procs:
        out, _ = p.communicate(timeout=600)
        if p.returncode != 0:
            raise SystemExit(f"{kind} worker failed with exit code {p.returncode}")
        times.append(json.loads(out.strip().splitlines()[-1])["seconds"])
    return max(times)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        return _worker(sys.argv[2:])
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--world", type=int, default=4)
    p.add_argument("--sizes-mb", type=float, nargs="+", default=[1, 64])
    p.add_argument("--iters", type=int, default=0, help="iterations per size (default: by size)")
    args = p.parse_args()
    n = args.world
    print(f"{'size':>8} {'ember allreduce':>16} {'busbw':>12} {'raw ring':>12} {'ring bw':>12} {'ratio':>7}")
    for mb in args.sizes_mb:
        size = int(mb * 2**20)
        iters = args.iters or (50 if size <= 2**21 else 5)
        moved = size * 2 * (n - 1) / n
        t_ember = _run("ember", n, size, iters)
        t_ring = _run("ring", n, size, iters)
        busbw, ringbw = moved / t_ember / 1e9, moved / t_ring / 1e9
        print(f"{mb:>6g}MB {t_ember * 1e3:>13.2f} ms {busbw:>8.3f} GB/s {t_ring * 1e3:>9.2f} ms "
              f"{ringbw:>8.3f} GB/s {busbw / ringbw:>6.2f}x", flush=True)


if __name__ == "__main__":
    main()
