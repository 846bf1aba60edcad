"""deploy/: the image's exact command starts a server outside Docker; the manifests hang
together; hadolint and yamllint (dev dependencies) pass."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from tapis_service.sqlite_store import FILE_NAME
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
        assert healthcheck[0] == "python"
        probe = subprocess.run([sys.executable, *healthcheck[1:]], env=env, timeout=30,
                               check=False, capture_output=True)
        assert probe.returncode == 0, probe.stderr.decode()
        server.terminate()  # the STOPSIGNAL: a graceful stop
        assert server.wait(30) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert (tmp_path / FILE_NAME).exists()


def test_the_manifests_agree_with_the_image() -> None:
    """A structural check that needs no YAML library."""
    statefulset = (DEPLOY / "k8s" / "statefulset.yaml").read_text()
    port = image_env()["TAPIS_PORT"]
    assert "kind: StatefulSet" in statefulset and "volumeClaimTemplates:" in statefulset
    assert "mountPath: /data" in statefulset and "terminationGracePeriodSeconds:" in statefulset
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        block = statefulset.split(f"{probe}:", 1)[1].split("Probe:", 1)[0]
        assert '["python", "-m", "tapis_service.healthcheck"]' in block, probe
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
    container = pod["containers"][0]
    assert container["livenessProbe"]["exec"]["command"] == [
        "python", "-m", "tapis_service.healthcheck"]
    assert {"name": "secrets", "secret": {"secretName": "tapis-tls"}} in pod["volumes"]


def test_hadolint_passes() -> None:
    result = subprocess.run([_tool("hadolint"), str(DOCKERFILE)], capture_output=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stdout.decode()


def test_yamllint_passes() -> None:
    config = "{extends: default, rules: {line-length: {max: 100}, document-start: disable}}"
    result = subprocess.run([_tool("yamllint"), "-s", "-d", config, *map(str, MANIFESTS)],
                            capture_output=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout.decode()
