"""ember-run: command line of the elastic launcher (also ``python -m emberelastic.run``).

Exit codes: 0 success, 1 workers failed after max restarts, 2 usage error,
130 SIGINT, 143 SIGTERM.
"""
from __future__ import annotations

import argparse
import sys
import uuid
from typing import List, Optional

import secrets

from emberelastic.config import (TOKEN_ENV, LaunchConfig, UsageError, is_loopback, parse_endpoint,
                                 parse_nnodes, read_token)

EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ember-run", description="Elastic launcher for ember.distributed.")
    p.add_argument("--nnodes", default="1", help="N or MIN:MAX nodes (default 1)")
    p.add_argument("--nproc-per-node", "--nproc_per_node", type=int, default=1, help="workers per node")
    p.add_argument("--max-restarts", "--max_restarts", type=int, default=3,
                   help="group restarts allowed after worker failures (default 3)")
    p.add_argument("--monitor-interval", "--monitor_interval", type=float, default=1.0,
                   help="seconds between worker checks (default 1)")
    p.add_argument("--rdzv-endpoint", "--rdzv_endpoint", default=None, help="host:port of the rendezvous store")
    p.add_argument("--rdzv-bind", "--rdzv_bind", default=None, metavar="ADDRESS",
                   help="address this node's rendezvous store listens on when the endpoint is not "
                        "loopback: the endpoint's host name, an address of this host, or 0.0.0.0")
    p.add_argument("--rdzv-token-file", "--rdzv_token_file", default=None, metavar="FILE",
                   help=f"file holding the job's secret token (else ${TOKEN_ENV}); required "
                        "beyond loopback, the same on every node")
    p.add_argument("--rdzv-id", "--rdzv_id", default=None, help="job id shared by all nodes")
    p.add_argument("--rdzv-timeout", type=float, default=600.0, help="seconds to wait for a rendezvous round")
    p.add_argument("--last-call", type=float, default=2.0,
                   help="seconds a round stays open for more nodes once MIN joined (default 2)")
    p.add_argument("--grace-period", type=float, default=5.0,
                   help="seconds between SIGTERM and SIGKILL when stopping workers (default 5)")
    p.add_argument("--standalone", action="store_true", help="single node with a local store on a free port")
    p.add_argument("-m", "--module", action="store_true", help="run the target as a Python module (python -m)")
    p.add_argument("--no-python", action="store_true", help="run the target as an executable, not with Python")
    p.add_argument("training_script", help="script (or module with -m) to run on every worker")
    p.add_argument("training_script_args", nargs=argparse.REMAINDER)
    return p


def config_from_args(argv: Optional[List[str]] = None) -> LaunchConfig:
    """Parses the command line into a LaunchConfig; raises UsageError for bad values."""
    args = build_parser().parse_args(argv)
    min_nodes, max_nodes = parse_nnodes(args.nnodes)
    token = read_token(args.rdzv_token_file)
    if args.standalone:
        if max_nodes != 1:
            raise UsageError("--standalone runs exactly one node; drop --nnodes or use --nnodes 1")
        host, port = None, 0
        run_id = args.rdzv_id or uuid.uuid4().hex[:12]
    else:
        if args.rdzv_endpoint is None:
            if max_nodes != 1:
                raise UsageError("--rdzv-endpoint is required with more than one node")
            host, port = None, 0
        else:
            host, port = parse_endpoint(args.rdzv_endpoint)
        run_id = args.rdzv_id or ("default" if host is not None else uuid.uuid4().hex[:12])
    bind = args.rdzv_bind
    if host is not None and bind is None and not is_loopback(host):
        raise UsageError(
            f"--rdzv-endpoint {args.rdzv_endpoint} is not a loopback address, so the rendezvous "
            "store would listen beyond loopback; say where with --rdzv-bind ADDRESS (the "
            "endpoint's host name to listen only on the address it names here, an address of "
            "this host, or 0.0.0.0 for every interface)")
    if host is None and bind is not None:
        raise UsageError("--rdzv-bind needs --rdzv-endpoint (a single-node job listens on loopback)")
    if token is None:
        if bind is not None and not is_loopback(bind):
            raise UsageError(
                f"a rendezvous beyond loopback (--rdzv-bind {bind}) authenticates every peer with "
                f"the job's token: give it with --rdzv-token-file FILE or ${TOKEN_ENV} (the same "
                "on every node; not on the command line)")
        # A job confined to this machine. Without an endpoint (--standalone, or one node) the
        # token is made here and handed to the workers; agents sharing a loopback endpoint
        # cannot agree on one made up, so they use the empty token unless given one.
        token = secrets.token_hex(32).encode() if host is None else b""
    if args.module and args.no_python:
        raise UsageError("-m and --no-python exclude each other")
    if args.no_python:
        command = (args.training_script, *args.training_script_args)
    elif args.module:
        command = (sys.executable, "-u", "-m", args.training_script, *args.training_script_args)
    else:
        command = (sys.executable, "-u", args.training_script, *args.training_script_args)
    return LaunchConfig(min_nodes=min_nodes, max_nodes=max_nodes, nproc_per_node=args.nproc_per_node,
                        max_restarts=args.max_restarts, monitor_interval=args.monitor_interval,
                        rdzv_host=host, rdzv_port=port, rdzv_id=run_id, rdzv_timeout=args.rdzv_timeout,
                        last_call=args.last_call, grace_period=args.grace_period, command=command,
                        run_as_module=args.module, rdzv_bind=bind, rdzv_token=token)



def main(argv: Optional[List[str]] = None) -> int:
    try:
        config = config_from_args(argv)
    except UsageError as err:
        print(f"ember-run: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    from emberelastic.agent import ElasticAgent  # imports ember only once the options are valid
    from ember.distributed import DistributedError

    try:
        agent = ElasticAgent(config)
    except (DistributedError, ValueError) as err:
        # Most often a store that refused this node's token, or one that cannot be reached.
        print(f"ember-run: error: rendezvous store {config.rdzv_host or '127.0.0.1'}:{config.rdzv_port}: {err}",
              file=sys.stderr)
        return 1
    return agent.run()


if __name__ == "__main__":
    sys.exit(main())
