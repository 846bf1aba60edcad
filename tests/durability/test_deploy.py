"""deploy/: the image's exact command starts a server outside Docker; the manifests hang
together; hadolint and yamllint (dev dependencies) pass."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import grpc
import pytest

from tapis_service.stores.sqlite_store import FILE_NAME
from tests.support.certificates import issue
from tests.support.deploy import (
    BIN,
    DEPLOY,
    DOCKERFILE,
    MANIFESTS,
    exec_form,
    image_env,
    instructions,
)
from tests.support.deploy import tool as _tool
from tests.support.process import free_port, wait_serving


def test_the_final_image_runs_as_a_non_root_user_with_a_data_volume() -> None:
    words = dict(instructions())
    assert words["USER"].split(":")[0] not in ("root", "0")
    assert json.loads(words["VOLUME"]) == ["/data"]
    assert image_env()["TAPIS_DATA_DIR"] == "/data"
    assert words["FROM"].startswith("python:") and "slim" in words["FROM"]
    assert "HEALTHCHECK" in words


def test_the_final_image_is_labelled_and_owned_by_10001_with_entries() -> None:
    final = instructions()
    runs = " ".join(rest for word, rest in final if word == "RUN")
    assert dict(final)["USER"] == "10001:10001"
    assert "groupadd --system --gid 10001 tapis" in runs
    assert re.search(r"useradd --system --uid 10001 --gid 10001 ", runs)
    assert "chown 10001:10001 /data" in runs
    labels = " ".join(rest for word, rest in final if word == "LABEL")
    for label in ("title", "description", "version", "revision", "created"):
        assert f"org.opencontainers.image.{label}=" in labels
    # nothing is installed at run time: no pip in the final stage, the base image's removed
    assert "pip install" not in runs and "pip uninstall --yes --quiet pip setuptools" in runs


def locked(path: Path) -> dict[str, list[str]]:
    """name -> its hashes, from a pip-compile --generate-hashes file."""
    text = re.sub(r"\\\n\s*", " ", path.read_text())
    found = {}
    for line in text.splitlines():
        match = re.match(r"([A-Za-z0-9_.-]+)==(\S+)\s*(.*)", line)
        if match:
            found[match.group(1).lower()] = re.findall(r"--hash=sha256:([0-9a-f]{64})",
                                                       match.group(3))
    return found


def test_the_image_installs_locked_dependencies_with_hashes() -> None:
    text = DOCKERFILE.read_text()
    for lock in ("requirements.lock", "build-requirements.lock", "otel-requirements.lock"):
        assert f"-r /tmp/{lock}" in text
        pins = locked(DEPLOY / lock)
        assert pins and all(hashes for hashes in pins.values()), lock
        assert f"!deploy/{lock}" in (DEPLOY / "Dockerfile.dockerignore").read_text()
    assert text.count("--require-hashes") == 3
    runtime = locked(DEPLOY / "requirements.lock")
    wanted = [re.split(r"[<>=;\s]", line)[0].lower()
              for line in (DEPLOY / "requirements.in").read_text().splitlines()
              if line and not line.startswith("#")]
    assert set(wanted) <= set(runtime)
    # what the server runs is what pyproject.toml asks for, less the clients' own packages
    import tomllib

    project = tomllib.loads((DEPLOY.parent / "pyproject.toml").read_text())["project"]
    declared = {re.split(r"[<>=;\s\[]", d)[0].lower() for d in project["dependencies"]}
    assert declared - set(wanted) == CLIENT_ONLY
    assert "rich" not in runtime and "textual" not in runtime
    assert "grpcio-tools" in locked(DEPLOY / "build-requirements.lock")
    # the optional tracing (--build-arg OTEL=true): the extra's packages, pinned as the runtime
    otel = locked(DEPLOY / "otel-requirements.lock")
    extra = {re.split(r"[<>=;\s\[]", d)[0].lower()
             for d in project["optional-dependencies"]["otel"]}
    assert extra <= set(otel) and not extra & set(runtime)
    assert all(otel[name] == runtime[name] for name in set(otel) & set(runtime))
    assert '"$OTEL" = true' in text


def native_probes(container: dict[str, Any]) -> dict[str, str]:
    """Each probe's health service, once every probe is a ``grpc`` one on the port the
    container serves health on (``TAPIS_HEALTH_PORT``, declared as its ``health`` port) with
    a timeout."""
    env = {e["name"]: e.get("value") for e in container["env"]}
    port = int(env["TAPIS_HEALTH_PORT"])
    assert {"name": "health", "containerPort": port} in container["ports"]
    found = {}
    for name in ("livenessProbe", "startupProbe", "readinessProbe"):
        probe = container[name]
        assert set(probe) & {"exec", "httpGet", "tcpSocket"} == set(), name
        assert probe["grpc"]["port"] == port and probe["timeoutSeconds"] >= 1, name
        found[name] = probe["grpc"]["service"]
    return found

CLIENT_ONLY = {"rich", "textual", "babel"}
"""Runtime dependencies of the clients alone: not in the server's image."""


@pytest.mark.slow  # a server process
async def test_the_image_command_serves_health_and_its_healthcheck_passes(
        tmp_path: Path) -> None:
    """Run CMD as the image would (its ENV, with the port and the data directory moved here)."""
    words = dict(instructions())
    command = exec_form(words["CMD"])
    healthcheck = exec_form(words["HEALTHCHECK"].split(" CMD ", 1)[1])
    port = free_port()
    # the image's /secrets, made here: a throwaway CA, a certificate for localhost, a key
    issued = issue(tmp_path / "secrets", "server")
    keys = tmp_path / "secrets" / "api-keys"
    keys.write_text("a-backend-key-for-this-test-only backend\n")
    secrets = {"TAPIS_TLS_CERT": str(issued.cert), "TAPIS_TLS_KEY": str(issued.key),
               "TAPIS_TLS_CA": str(issued.ca), "TAPIS_API_KEYS_FILE": str(keys)}
    assert set(secrets) <= set(image_env())
    env = {**os.environ, **image_env(), **secrets, "TAPIS_HOST": "127.0.0.1",
           "TAPIS_PORT": str(port), "TAPIS_DATA_DIR": str(tmp_path),
           "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    server = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
    try:
        await wait_serving(f"localhost:{port}", process=server,
                           credentials=grpc.ssl_channel_credentials(issued.ca_bytes()))
        assert healthcheck == ["tapis-admin", "health"]
        # in the image the server is PID 1; here it is told which process it is (over TLS)
        probe = subprocess.run([str(BIN / "tapis-admin"), "health", "--pid", str(server.pid)],
                               env=env, timeout=30, check=False, capture_output=True)
        assert probe.returncode == 0, probe.stderr.decode()
        assert probe.stdout.decode().strip() == "SERVING"
        server.terminate()  # the STOPSIGNAL: a graceful stop
        assert server.wait(30) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert (tmp_path / FILE_NAME).exists()


async def test_the_healthcheck_follows_a_port_given_as_a_flag(tmp_path: Path) -> None:
    """`docker run tapis tapis-server --port 6000`: the image's TAPIS_PORT says 50051, the
    server listens on 6000, and the health check asks 6000 (it reads the server's own
    command line and variables)."""
    port = free_port()
    # on loopback without the image's /secrets (the TLS health check has its own test above)
    plain = {name: value for name, value in image_env().items()
             if not name.startswith(("TAPIS_TLS_", "TAPIS_API_KEYS"))}
    env = {**os.environ, **plain, "TAPIS_HOST": "127.0.0.1", "TAPIS_PORT": "1",
           "TAPIS_DATA_DIR": str(tmp_path)}
    server = subprocess.Popen([str(BIN / "tapis-server"), "--port", str(port)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        await wait_serving(f"127.0.0.1:{port}", process=server)
        probe = subprocess.run([str(BIN / "tapis-admin"), "health", "--pid", str(server.pid)],
                               env=env, timeout=30, check=False, capture_output=True)
        assert probe.stdout.decode().strip() == "SERVING", probe.stderr.decode()
        assert probe.returncode == 0
    finally:
        server.terminate()
        server.wait(30)


def test_the_manifests_agree_with_the_image() -> None:
    """A structural check that needs no YAML library."""
    statefulset = (DEPLOY / "k8s" / "statefulset.yaml").read_text()
    port = image_env()["TAPIS_PORT"]
    assert "kind: StatefulSet" in statefulset and "volumeClaimTemplates:" in statefulset
    assert "mountPath: /data" in statefulset and "terminationGracePeriodSeconds:" in statefulset
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        block = statefulset.split(f"{probe}:", 1)[1].split("Probe:", 1)[0]
        assert "grpc:" in block and "exec:" not in block, probe
    assert "secretName: tapis-tls" in statefulset and "TAPIS_API_KEYS_FILE" in statefulset
    service = (DEPLOY / "k8s" / "service.yaml").read_text()
    assert "kind: Service" in service and f"port: {port}" in service
    compose = (DEPLOY / "compose.yaml").read_text()
    assert "dockerfile: deploy/Dockerfile" in compose and ":/data" in compose


def test_the_manifests_parse_as_yaml() -> None:
    import yaml  # a dev dependency (pyproject.toml)

    for path in MANIFESTS:
        documents = list(yaml.safe_load_all(path.read_text()))
        assert documents and all(isinstance(d, dict) for d in documents), path.name
    statefulset = yaml.safe_load((DEPLOY / "k8s" / "statefulset.yaml").read_text())
    pod = statefulset["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["enableServiceLinks"] is False  # no TAPIS_* variables made by Services
    container = pod["containers"][0]
    # liveness apart from readiness: a database outage or a long recovery restarts nothing;
    # Kubernetes' own gRPC probes, on the plaintext health port (they speak no TLS)
    assert native_probes(container) == {"livenessProbe": "liveness",
                                        "startupProbe": "liveness", "readinessProbe": ""}
    assert {"name": "secrets", "secret": {"secretName": "tapis-tls"}} in pod["volumes"]


def test_the_statefulset_has_a_headless_service_and_a_scraped_metrics_port() -> None:
    import yaml

    statefulset = yaml.safe_load((DEPLOY / "k8s" / "statefulset.yaml").read_text())
    services = {s["metadata"]["name"]: s for s in
                yaml.safe_load_all((DEPLOY / "k8s" / "service.yaml").read_text())}
    governing = services[statefulset["spec"]["serviceName"]]
    assert governing["spec"]["clusterIP"] == "None"
    template = statefulset["spec"]["template"]
    container = template["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    metrics_port = int(env["TAPIS_METRICS_PORT"])
    assert {"name": "metrics", "containerPort": metrics_port} in container["ports"]
    annotations = template["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == str(metrics_port)
    assert any(p["name"] == "metrics" for p in services["tapis"]["spec"]["ports"])
    monitor = yaml.safe_load((DEPLOY / "k8s" / "servicemonitor.example.yaml").read_text())
    assert monitor["kind"] == "ServiceMonitor"
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"


def test_hadolint_passes() -> None:
    result = subprocess.run([_tool("hadolint"), str(DOCKERFILE)], capture_output=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stdout.decode()


def test_yamllint_passes() -> None:
    config = "{extends: default, rules: {line-length: {max: 100}, document-start: disable}}"
    result = subprocess.run([_tool("yamllint"), "-s", "-d", config, *map(str, MANIFESTS)],
                            capture_output=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout.decode()


ALL_MANIFESTS = [*MANIFESTS[1:], *sorted((DEPLOY / "k8s" / "cluster").glob("*.yaml"))]
COMPOSE_FILES = [DEPLOY / "compose.yaml", DEPLOY / "compose.cluster.yaml"]
COMPOSE_SCHEMA = Path(__file__).resolve().parents[1] / "support" / "compose-spec.json"
"""The Compose Specification's JSON schema, vendored (compose-spec/compose-spec at commit
170098ba07d9, schema/compose-spec.json, Apache-2.0): no registry ships it."""


def test_kubernetes_validate_strict_passes_on_every_manifest() -> None:
    """Every resource against Kubernetes' own schemas, unknown fields refused (the
    ServiceMonitor is a CRD: no schema, a warning)."""
    result = subprocess.run([_tool("kubernetes-validate"), "--strict", *map(str, ALL_MANIFESTS)],
                            capture_output=True, timeout=120, check=False)
    output = result.stdout.decode() + result.stderr.decode()
    assert result.returncode == 0, output
    for resource in ("statefulset/tapis", "deployment/tapis-cluster", "service/tapis",
                     "poddisruptionbudget/tapis-cluster"):
        assert f"passed for resource {resource} " in output, output
    assert "ERROR" not in output


def test_the_cluster_deployment_probes_natively_too() -> None:
    import yaml

    deployment = yaml.safe_load((DEPLOY / "k8s" / "cluster" / "deployment.yaml").read_text())
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert native_probes(container) == {"livenessProbe": "liveness",
                                        "startupProbe": "liveness", "readinessProbe": ""}


def test_the_compose_files_follow_the_compose_spec_and_run_locked_down() -> None:
    import jsonschema
    import yaml

    schema = json.loads(COMPOSE_SCHEMA.read_text())
    for path in COMPOSE_FILES:
        document = yaml.safe_load(path.read_text())
        jsonschema.validate(document, schema)  # raises, naming what is wrong
        servers = {name: service for name, service in document["services"].items()
                   if name.startswith("tapis")}
        assert servers, path.name
        for name, service in servers.items():
            where = f"{path.name}: {name}"
            assert service["read_only"] is True, where
            assert service["cap_drop"] == ["ALL"], where
            assert "no-new-privileges:true" in service["security_opt"], where
            assert service["ports"] and all(str(port).startswith("127.0.0.1:")
                                            for port in service["ports"]), where
            metrics = service["environment"]["TAPIS_METRICS_PORT"]
            assert any(str(port).endswith(f":{metrics}") for port in service["ports"]), where
        published = [port for service in document["services"].values()
                     for port in service.get("ports", [])]
        assert len(published) == len(set(published)), path.name


def test_the_image_s_files_are_readable_by_any_user() -> None:
    """Its user reads the virtualenv whoever owns the data directory (a bind mount, a user
    namespace): the build stage makes every file readable and every directory searchable
    before the final stage copies it."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    build, final = text.split("\nFROM ", 2)[1:]
    assert "chmod -R a+rX /opt/venv" in build
    assert "COPY --from=build /opt/venv /opt/venv" in final
