"""What ships under deploy/: alert rules checked and unit-tested with promtool against the incident's
numbers, Kubernetes manifests validated against the Kubernetes schemas (kubernetes-validate, offline),
the PrometheusRule's groups equal to the rules file (and so checked by promtool too: no
prometheus-operator CRD schema is available offline here), and the wheel the Dockerfile installs."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from tests.watch.procs import promtool

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
K8S = DEPLOY / "kubernetes"
RULES = DEPLOY / "prometheus/imagelint-alerts.yaml"
CORE_KINDS = {"DaemonSet", "Service", "Namespace"}
K8S_VERSION = "1.29"  # an old release still in support: what the manifests need is not new


def docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_alert_rules_pass_promtool_check(tmp_path: Path) -> None:
    proc = promtool("check", "rules", str(RULES))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS: 6 rules found" in proc.stdout


def test_alert_rules_catch_the_incident_and_spare_a_healthy_host() -> None:
    proc = promtool("test", "rules", str(DEPLOY / "prometheus/imagelint-alerts.test.yaml"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


def test_a_rule_that_would_not_fire_fails_the_replay(tmp_path: Path) -> None:
    """The replay can fail: with the restart threshold raised above the incident's rate it does."""
    text = RULES.read_text().replace(
        "increase(imagelint_unit_restarts_total[1h]) > 10",
        "increase(imagelint_unit_restarts_total[1h]) > 1000",
    )
    (tmp_path / "imagelint-alerts.yaml").write_text(text)
    test = (DEPLOY / "prometheus/imagelint-alerts.test.yaml").read_text()
    (tmp_path / "t.yaml").write_text(test)
    proc = promtool("test", "rules", str(tmp_path / "t.yaml"))
    assert proc.returncode != 0 and "ImagelintUnitRestartLoop" in proc.stdout + proc.stderr


def test_prometheusrule_carries_the_rules_file(tmp_path: Path) -> None:
    (rule,) = docs(K8S / "prometheusrule.yaml")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1" and rule["kind"] == "PrometheusRule"
    assert rule["spec"]["groups"] == yaml.safe_load(RULES.read_text())["groups"]
    extracted = tmp_path / "from-crd.yaml"
    extracted.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    proc = promtool("check", "rules", str(extracted))
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("name", ["daemonset.yaml", "service.yaml", "namespace.yaml"])
def test_manifests_validate_against_the_kubernetes_schema(name: str) -> None:
    for doc in docs(K8S / name):
        assert doc["kind"] in CORE_KINDS
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)  # raises on any schema error


def test_the_validator_rejects_a_broken_daemonset() -> None:
    (ds,) = docs(K8S / "daemonset.yaml")
    ds["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesystem"] = "yes"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(ds, K8S_VERSION, strict=True)


def test_daemonset_is_read_only_and_unprivileged_and_mounts_what_the_watch_reads() -> None:
    (ds,) = docs(K8S / "daemonset.yaml")
    pod = ds["spec"]["template"]["spec"]
    assert (
        not pod.get("hostPID") and not pod.get("hostNetwork") and pod["automountServiceAccountToken"] is False
    )
    (c,) = pod["containers"]
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["privileged"] is False and sc["capabilities"] == {"drop": ["ALL"]}
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    host_paths = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    for path in ("/proc", "/sys/fs/cgroup", "/run/systemd", "/var/log/journal"):
        (name,) = [n for n, p in host_paths.items() if p == path]
        (mount,) = [m for m in c["volumeMounts"] if m["name"] == name]
        assert mount["readOnly"] is True, mount
    assert mounts["/run/systemd"]["name"] == "run-systemd"  # systemctl's socket where it looks for it
    args = c["args"]
    assert args[0] == "watch"
    assert "--proc-root=/host/proc" in args and "--cgroup-root=/host/sys/fs/cgroup" in args
    assert "--journal-dir=/host/var/log/journal" in args
    port = c["ports"][0]["containerPort"]
    assert f"--listen=0.0.0.0:{port}" in args
    res = c["resources"]
    assert res["requests"]["cpu"] == "10m" and res["requests"]["memory"] == "64Mi"  # see benchmarks
    (svc,) = docs(K8S / "service.yaml")
    (mon,) = docs(K8S / "servicemonitor.yaml")
    assert svc["spec"]["ports"][0]["port"] == port and svc["spec"]["clusterIP"] == "None"
    assert mon["spec"]["endpoints"][0]["port"] == svc["spec"]["ports"][0]["name"] == c["ports"][0]["name"]
    labels = ds["spec"]["template"]["metadata"]["labels"]
    assert mon["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert svc["spec"]["selector"].items() <= labels.items()


def test_kustomization_lists_every_manifest() -> None:
    (kust,) = docs(K8S / "kustomization.yaml")
    listed = set(kust["resources"])
    assert listed == {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    image = docs(K8S / "daemonset.yaml")[0]["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image.split(":")[0] == kust["images"][0]["name"]


def test_the_wheel_the_dockerfile_installs_has_the_watch_and_its_extra(tmp_path: Path) -> None:
    dockerfile = (DEPLOY / "docker/Dockerfile").read_text()
    assert "python -m build --wheel" in dockerfile and '"${whl}[watch]"' in dockerfile
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path), str(REPO)],
        check=True,
        capture_output=True,
    )
    wheel = next(tmp_path.glob("imagelint-*.whl"))
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        meta = next(z.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    assert {"imagelint/cli/watch.py", "imagelint/watch/loop.py", "imagelint/probes/journal.py"} <= names
    assert "Provides-Extra: watch" in meta
    assert any(
        line.startswith("Requires-Dist: prometheus-client") and "extra == 'watch'" in line
        for line in meta.splitlines()
    )
