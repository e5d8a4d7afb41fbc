"""Several FreeRide "nodes" on one machine, for tests: network namespaces
joined by a bridge, a daemon per node with its own socket, state directory
and shared-memory names, a pipeline trained across them with torchrun over
gloo, the checks of each node's event log, and cleanup that survives the
test's death.  Needs root.

    import sys; sys.path.insert(0, "tests")
    from multinode import Cluster, check_node

    with Cluster(build_dir, source_dir, ["n1", "n2"]) as cluster:
        daemons = [cluster.start_daemon(n, "--cpu-lanes", "1") for n in cluster.names]
        for d in daemons:
            d.submit(0, "side", [...]); d.wait_tasks_live()
        cluster.torchrun(daemons, "examples/train_gpt_pipeline.py", ["--device", "cpu", "--freeride", "on"])
        for d in daemons:
            d.stop()
            print(check_node(d.net.name, d.state, stopped=True, socket=d.socket).line())

Modules: netns (namespaces, bridge, sweeping a dead run's), cleanup (pid
files, the Reaper), node (NodeDaemon), pipeline (torchrun across nodes),
checks (check_node, read_events), paths (lane segment names), cluster.
"""
from .checks import CheckFailed, NodeRecord, check_node, read_events, require_side_steps
from .cluster import Cluster
from .netns import IFNAME, NetNode, Network
from .node import NodeDaemon, wait_for
from .pipeline import torchrun, trainer_env

__all__ = ["Cluster", "NodeDaemon", "Network", "NetNode", "IFNAME", "check_node", "require_side_steps", "read_events", "NodeRecord",
           "CheckFailed", "torchrun", "trainer_env", "wait_for"]
