"""A Slurm cluster on one machine: munged and slurmctld in a controller
namespace, one slurmd per node namespace (Debian's Slurm 22.05,
scripts/install-slurm.sh).  Everything is private to the run directory: the
munge key and socket, slurm.conf, spool, state, logs and pid files; nothing
of the machine's own /etc/munge or /etc/slurm is used.

    with Cluster(build, source, ["n1", "n2"], extra=["ctl"]) as cluster:
        slurm = SlurmCluster(cluster, controller="ctl").start()
        job = slurm.sbatch(script, env)            # job id
        state = slurm.wait_job(job, timeout_s=900)  # COMPLETED, FAILED, ...
"""
from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import time

from .cleanup import write_pid_file
from .cluster import Cluster
from .node import wait_for

DAEMONS = ("munged", "slurmctld", "slurmd", "sinfo", "sbatch", "scontrol", "srun")


def missing_programs() -> list[str]:
    return [p for p in DAEMONS if shutil.which(p) is None]


class SlurmCluster:
    def __init__(self, cluster: Cluster, controller: str, cpus_per_node: int = 1):
        self.cluster, self.cpus = cluster, cpus_per_node
        self.ctl = cluster.node(controller)
        self.nodes = [cluster.node(n) for n in cluster.names]
        self.dir = os.path.join(cluster.dir, "slurm")
        self.conf = os.path.join(self.dir, "slurm.conf")
        self.munge_socket = os.path.join(self.dir, "munge", "munge.socket")
        self.env = dict(os.environ, SLURM_CONF=self.conf)

    # -- configuration -------------------------------------------------------
    def write_config(self) -> None:
        d = self.dir
        os.makedirs(os.path.join(d, "munge"), mode=0o755, exist_ok=True)
        os.makedirs(os.path.join(d, "munge-private"), mode=0o700, exist_ok=True)
        os.makedirs(os.path.join(d, "ctld"), exist_ok=True)
        for node in self.nodes:
            os.makedirs(os.path.join(d, f"spool-{node.name}"), exist_ok=True)
        key = os.path.join(d, "munge-private", "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        user = pwd.getpwuid(os.geteuid()).pw_name
        # Every namespace keeps the machine's hostname; slurmctld accepts only
        # the controller named so (its address is the controller namespace's).
        host = socket.gethostname()
        nodes = "\n".join(f"NodeName={n.name} NodeAddr={n.address} CPUs={self.cpus} State=UNKNOWN"
                          for n in self.nodes)
        names = ",".join(n.name for n in self.nodes)
        with open(self.conf, "w") as f:
            f.write(f"""# Written by tests/multinode/slurm.py for one test run.
ClusterName=freeride-test
SlurmctldHost={host}({self.ctl.address})
SlurmUser={user}
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={self.munge_socket}
CredType=cred/munge
StateSaveLocation={d}/ctld
SlurmdSpoolDir={d}/spool-%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd-%n.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd-%n.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
MailProg=/bin/true
KillWait=30
InactiveLimit=0
{nodes}
PartitionName=test Nodes={names} Default=YES MaxTime=INFINITE State=UP
""")
        with open(os.path.join(d, "cgroup.conf"), "w") as f:
            # The machine mounts cgroup v1 controllers under a tmpfs; without this
            # slurmd stops at "No filesystem mounted on /sys/fs/cgroup".
            f.write("CgroupPlugin=cgroup/v1\nCgroupMountpoint=/sys/fs/cgroup\n")

    # -- daemons ---------------------------------------------------------------
    def _spawn(self, node, name: str, argv: list[str]) -> subprocess.Popen:
        log = open(os.path.join(self.dir, f"{name}.out"), "w")
        proc = subprocess.Popen(node.command(argv), env=self.env, stdout=log, stderr=subprocess.STDOUT)
        write_pid_file(self.cluster.dir, name, proc.pid)
        return proc

    def start(self, timeout_s: float = 120) -> "SlurmCluster":
        """munged, slurmctld, then the slurmd of every node; returns when sinfo shows them all idle."""
        self.write_config()
        d = self.dir
        self._spawn(self.ctl, "munged", ["munged", "--foreground", "--force",
                                         f"--key-file={d}/munge-private/munge.key",
                                         f"--socket={self.munge_socket}", f"--pid-file={d}/munge-private/munged.pid",
                                         f"--log-file={d}/munge-private/munged.log",
                                         f"--seed-file={d}/munge-private/munged.seed"])
        wait_for("munged's socket", lambda: os.path.exists(self.munge_socket), timeout_s)
        self._spawn(self.ctl, "slurmctld", ["slurmctld", "-D", "-f", self.conf])
        wait_for("slurmctld to answer", lambda: self.run("scontrol", "ping", check=False).returncode == 0,
                 timeout_s, interval_s=0.5)
        for node in self.nodes:
            self._spawn(node, f"slurmd-{node.name}", ["slurmd", "-D", "-f", self.conf, "-N", node.name])

        def all_idle():
            lines = self.run("sinfo", "-h", "-N", "-o", "%N %t", check=False).stdout.split("\n")
            states = dict(line.split() for line in lines if line.strip())
            return all(states.get(n.name, "").startswith("idle") for n in self.nodes)
        try:
            wait_for("every slurmd to register idle", all_idle, timeout_s, interval_s=0.5)
        except TimeoutError as e:
            raise TimeoutError(f"{e}\n{self.logs()}") from None
        return self

    def run(self, *argv: str, check: bool = True, timeout_s: float = 60) -> subprocess.CompletedProcess:
        """A Slurm client command from the controller's namespace."""
        result = subprocess.run(self.ctl.command(list(argv)), env=self.env, capture_output=True, text=True,
                                timeout=timeout_s)
        if check and result.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: {result.stderr.strip()}")
        return result

    def logs(self, tail: int = 2000) -> str:
        parts = []
        for name in sorted(os.listdir(self.dir)):
            if name.endswith((".log", ".out")):
                parts.append(f"--- {name}\n{open(os.path.join(self.dir, name), errors='replace').read()[-tail:]}")
        return "\n".join(parts)

    # -- jobs ------------------------------------------------------------------
    def sbatch(self, script: str, env: dict[str, str], nodes: int, workdir: str, output: str) -> int:
        """Submits `script` on `nodes` nodes with `env` (exported to the job); its job id."""
        result = subprocess.run(self.ctl.command(["sbatch", "--parsable", "-N", str(nodes), "--chdir", workdir,
                                                  "--output", output, script]),
                                env=dict(env, SLURM_CONF=self.conf), capture_output=True, text=True, timeout=60)
        if result.returncode != 0:
            raise RuntimeError(f"sbatch failed: {result.stderr.strip()}")
        return int(result.stdout.strip().split(";")[0])

    def job_state(self, job: int) -> str:
        out = self.run("scontrol", "show", "job", str(job), "-o", check=False).stdout
        for field in out.split():
            if field.startswith("JobState="):
                return field.split("=", 1)[1]
        return "UNKNOWN"

    def wait_job(self, job: int, timeout_s: float) -> str:
        """The job's final state (COMPLETED, FAILED, CANCELLED, TIMEOUT, ...); cancels it after `timeout_s`."""
        final = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
                 "DEADLINE", "PREEMPTED")
        def ended():
            state = self.job_state(job)
            return state if state in final else None
        try:
            return wait_for(f"job {job} to end", ended, timeout_s, interval_s=1.0)
        except TimeoutError:
            self.run("scancel", str(job), check=False)
            raise

    def wait_nodes_idle(self, timeout_s: float = 120) -> None:
        """After a job: every node idle again (its steps' processes are gone)."""
        def idle():
            out = self.run("sinfo", "-h", "-N", "-o", "%N %t", check=False).stdout
            return all(line.split()[1].startswith("idle") for line in out.splitlines() if line.strip())
        wait_for("the nodes to be idle after the job", idle, timeout_s, interval_s=0.5)
