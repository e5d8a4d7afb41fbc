"""deploy/kubernetes against the Kubernetes API schemas (kubernetes-validate,
strict: unknown fields are errors) of the oldest and newest versions it is
for, and against the CLI it runs: every freeride option the manifests use
exists.  No cluster runs here (docs/kubernetes.md says what was not run)."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from conftest import SOURCE_DIR

DEPLOY = SOURCE_DIR / "deploy" / "kubernetes"
VERSIONS = ["1.29.0", kubernetes_validate.latest_version()]  # native sidecars: 1.29 on


def manifests() -> list[Path]:
    return sorted(p for p in DEPLOY.rglob("*.yaml") if p.name != "kustomization.yaml")


def documents(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("path", manifests(), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_each_manifest_validates_strictly(path, version):
    for doc in documents(path):
        kubernetes_validate.validate(doc, version, strict=True)


def test_the_validator_rejects_a_broken_manifest():
    """The check above can fail: the same DaemonSet with one wrong field does."""
    [daemonset] = documents(DEPLOY / "daemonset.yaml")
    daemonset["spec"]["template"]["spec"]["hostIPC"] = "yes"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(daemonset, VERSIONS[-1], strict=True)
    [daemonset] = documents(DEPLOY / "daemonset.yaml")
    daemonset["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(daemonset, VERSIONS[-1], strict=True)


def test_the_kustomization_names_files_that_exist():
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    for resource in kustomization["resources"]:
        assert (DEPLOY / resource).is_file(), resource
    assert {"namespace.yaml", "daemonset.yaml", "service.yaml"} <= set(kustomization["resources"])


def pod_spec(name: str) -> dict:
    [doc] = documents(DEPLOY / name)
    return doc["spec"]["template"]["spec"]


def volumes_by_host_path(spec: dict) -> dict[str, str]:
    return {v["hostPath"]["path"]: v["name"] for v in spec["volumes"] if "hostPath" in v}


def test_the_daemonset_has_what_the_daemon_needs():
    spec = pod_spec("daemonset.yaml")
    assert spec["hostIPC"] is True
    host = volumes_by_host_path(spec)
    assert {"/dev/shm", "/run/freeride", "/var/lib/freeride"} <= set(host)
    [daemon] = [c for c in spec["containers"] if c["name"] == "daemon"]
    mounts = {m["mountPath"]: m["name"] for m in daemon["volumeMounts"]}
    assert mounts["/dev/shm"] == host["/dev/shm"]
    assert mounts["/run/freeride"] == host["/run/freeride"]
    assert mounts["/var/lib/freeride"] == host["/var/lib/freeride"]
    assert daemon["readinessProbe"]["exec"]["command"][:3] == ["freeride", "doctor", "--ready"]
    assert {p["name"]: p["containerPort"] for p in daemon["ports"]} == {"control": 7070, "metrics": 9464}
    script = daemon["command"][-1]
    assert "--metrics 0.0.0.0:9464" in script and "--listen 0.0.0.0:7070" in script
    assert "--read-token-file" in script
    # The MPS control daemon: a native sidecar that starts before the daemon, same pipe folder.
    [mps] = [c for c in spec["initContainers"] if c["name"] == "mps"]
    assert mps["restartPolicy"] == "Always" and mps["command"][0] == "nvidia-cuda-mps-control"
    pipe = {e["name"]: e["value"] for e in mps["env"]}["CUDA_MPS_PIPE_DIRECTORY"]
    assert {e["name"]: e["value"] for e in daemon["env"]}["CUDA_MPS_PIPE_DIRECTORY"] == pipe
    assert mps["startupProbe"]["exec"]["command"] == ["test", "-p", f"{pipe}/control"]


@pytest.mark.parametrize("name", ["templates/trainer-job.yaml", "templates/side-task-job.yaml"])
def test_the_templates_join_the_daemons_socket_as_its_user(name):
    daemon = pod_spec("daemonset.yaml")
    spec = pod_spec(name)
    assert spec["securityContext"]["runAsUser"] == daemon["securityContext"]["runAsUser"]
    assert "/run/freeride" in volumes_by_host_path(spec)
    if "trainer" in name:
        assert spec["hostIPC"] is True and "/dev/shm" in volumes_by_host_path(spec)
        env = {e["name"]: e["value"] for e in spec["containers"][0]["env"]}
        assert env["FREERIDE_SOCKET"] == "/run/freeride/freeride.sock"
        assert env["CUDA_MPS_PIPE_DIRECTORY"] == "/run/freeride/mps/pipe"


def freeride_commands() -> list[list[str]]:
    """Every freeride command line in the manifests (exec lists and shell scripts)."""
    found = []

    def walk(node):
        if isinstance(node, dict):
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            if node and all(isinstance(x, str) for x in node) and node[0] == "freeride":
                found.append(node)
            for value in node:
                walk(value)
        elif isinstance(node, str) and "exec freeride " in node:
            found.append(node[node.index("exec freeride ") + 5:].replace("\\\n", " ").split())

    for path in manifests():
        for doc in documents(path):
            walk(doc)
    return found


def test_every_freeride_option_the_manifests_use_exists(build_dir):
    commands = freeride_commands()
    assert {c[1] for c in commands} >= {"daemon", "doctor", "submit"}, commands
    for command in commands:
        words = command[:command.index("--")] if "--" in command else command
        helptext = subprocess.run([str(build_dir / "freeride"), words[1], "--help"], capture_output=True,
                                  text=True, timeout=60).stdout
        for option in (w for w in words[2:] if w.startswith("--")):
            assert re.search(rf"(^|[\s,]){re.escape(option)}\b", helptext), \
                f"`freeride {words[1]}` has no {option}"
