"""python -m freeride.ray node-args | status

  node-args [--socket S] [--slots-per-lane N]
      The `ray start` arguments that offer this node's FreeRide lanes to Ray:
      ray start --address HEAD:6379 $(python -m freeride.ray node-args)
  status [--address A] [--json]
      Each Ray node that offers lanes: Ray's slots in use beside its daemon's bubble time,
      harvested share and the training's live slowdown.
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m freeride.ray", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    node = commands.add_parser("node-args", help="`ray start` arguments that offer this node's lanes")
    node.add_argument("--socket", help="the daemon's socket (default: $FREERIDE_SOCKET or the default)")
    node.add_argument("--slots-per-lane", type=int, default=1,
                      help="side tasks Ray may place on each lane at once (default 1)")
    status = commands.add_parser("status", help="harvest and overhead per node, beside Ray's placement")
    status.add_argument("--address", default="auto", help="the Ray cluster (default: auto)")
    status.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)

    if args.command == "node-args":
        from freeride.ray._daemon import DaemonUnreachable, NodeDaemon
        from freeride.ray._resources import node_args
        try:
            words = node_args(NodeDaemon(args.socket), args.slots_per_lane)
        except (DaemonUnreachable, FileNotFoundError, ValueError, RuntimeError) as e:
            print(f"freeride.ray node-args: {e}", file=sys.stderr)
            return 1
        print(" ".join(shlex.quote(w) for w in words))
        return 0

    import ray
    from freeride.ray._api import cluster_report, format_report
    ray.init(address=args.address, logging_level="ERROR", log_to_driver=False)
    report = cluster_report()
    print(json.dumps(report, indent=1) if args.json else format_report(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
