"""deploy/: the cluster's compose file and Kubernetes manifests hang together (3 nodes over
one PostgreSQL, each advertising its own address, the URL from a Secret, a headless Service,
a disruption budget) and pass yamllint."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.support.deploy import image_env
from tests.support.deploy import tool as _tool

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
K8S = DEPLOY / "k8s" / "cluster"
COMPOSE = DEPLOY / "compose.cluster.yaml"


def load(path: Path) -> dict[str, Any]:
    document = yaml.safe_load(path.read_text())
    assert isinstance(document, dict), path.name
    return document


def test_the_deployment_runs_three_nodes_that_advertise_their_pod_address() -> None:
    deployment = load(K8S / "deployment.yaml")
    assert deployment["kind"] == "Deployment" and deployment["spec"]["replicas"] == 3
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    container = pod["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    port = int(image_env()["TAPIS_PORT"])
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert env["TAPIS_ADVERTISE"]["value"] == f"$(POD_IP):{port}"
    assert list(env).index("POD_IP") < list(env).index("TAPIS_ADVERTISE")
    secret = env["TAPIS_DATABASE_URL"]["valueFrom"]["secretKeyRef"]
    example = load(K8S / "secret.example.yaml")
    assert example["kind"] == "Secret" and secret["name"] == example["metadata"]["name"]
    assert secret["key"] in example["stringData"]
    health_port = int(env["TAPIS_HEALTH_PORT"]["value"])  # Kubernetes' own gRPC probes
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["grpc"]["port"] == health_port and "exec" not in container[probe]
    assert container["livenessProbe"]["grpc"]["service"] == "liveness"
    assert container["readinessProbe"]["grpc"]["service"] == ""
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["enableServiceLinks"] is False
    metrics_port = int(env["TAPIS_METRICS_PORT"]["value"])
    assert {"name": "metrics", "containerPort": metrics_port} in container["ports"]
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == str(metrics_port)
    assert env["TAPIS_TLS_CERT"]["value"].startswith("/secrets/")
    assert {"TAPIS_API_KEYS_FILE", "TAPIS_CLUSTER_TLS_CA"} <= set(env)


def test_the_service_is_headless_and_the_budget_covers_the_pods() -> None:
    labels = load(K8S / "deployment.yaml")["spec"]["template"]["metadata"]["labels"]
    service = load(K8S / "service.yaml")
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["selector"] == labels
    budget = load(K8S / "pdb.yaml")
    assert budget["kind"] == "PodDisruptionBudget"
    assert budget["spec"]["selector"]["matchLabels"] == labels
    assert budget["spec"]["maxUnavailable"] == 1


def test_compose_runs_postgres_and_three_nodes_on_one_database() -> None:
    services = load(COMPOSE)["services"]
    assert "postgres" in services
    nodes = {name: s for name, s in services.items() if name.startswith("tapis-")}
    assert len(nodes) == 3
    urls = {s["environment"]["TAPIS_DATABASE_URL"] for s in nodes.values()}
    assert len(urls) == 1 and "@postgres:5432/" in urls.pop()
    assert sorted(s["environment"]["TAPIS_ADVERTISE"] for s in nodes.values()) == [
        f"{name}:{image_env()['TAPIS_PORT']}" for name in sorted(nodes)]
    assert all(s["depends_on"]["postgres"]["condition"] == "service_healthy"
               for s in nodes.values())


def test_yamllint_passes_on_the_cluster_manifests() -> None:
    config = "{extends: default, rules: {line-length: {max: 100}, document-start: disable}}"
    files = [COMPOSE, *sorted(K8S.glob("*.yaml"))]
    result = subprocess.run([_tool("yamllint"), "-s", "-d", config, *map(str, files)],
                            capture_output=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout.decode()
