"""`tapis-server` as a process: it refuses to listen beyond loopback unprotected (one line,
exit 2, naming --insecure), and reloads its certificates and keys on SIGHUP."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_service.tls import channel_credentials
from tests.support.certificates import issue
from tests.trust.door import KEY_A, KEY_B, OWN_CONNECTION, backend, refusal, war_request

SERVER = (sys.executable, "-m", "tapis_service.main")
pytestmark = pytest.mark.slow  # server processes


async def run(*arguments: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        *SERVER, *arguments, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    _, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    return process.returncode, stderr.decode()


@pytest.mark.parametrize("extra", [(), ("--tls-cert", "{cert}", "--tls-key", "{key}"),
                                   ("--api-keys-file", "{keys}")])
async def test_beyond_loopback_unprotected_it_refuses_in_one_line(
        tmp_path: Path, extra: tuple[str, ...]) -> None:
    issued = issue(tmp_path, "server")
    keys = tmp_path / "keys"
    keys.write_text(f"{KEY_A}\n")
    filled = [a.format(cert=issued.cert, key=issued.key, keys=keys) for a in extra]
    started = time.monotonic()
    code, stderr = await run("--host", "0.0.0.0", "--port", "0", *filled)
    assert time.monotonic() - started < 10
    assert code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "--insecure" in lines[0], stderr
    assert lines[0].startswith("tapis-server: refusing to start:")


async def test_unusable_files_refuse_in_one_line(tmp_path: Path) -> None:
    code, stderr = await run("--port", "0", "--api-keys-file", str(tmp_path / "nowhere"))
    assert code == 2 and len(stderr.strip().splitlines()) == 1
    assert "cannot read the API keys file" in stderr


async def next_line(process: asyncio.subprocess.Process, event: str) -> dict[str, object]:
    """The server's next log line of ``event`` (earlier lines are skipped)."""
    assert process.stderr is not None
    while True:
        raw = await asyncio.wait_for(process.stderr.readline(), timeout=60)
        assert raw, "the server ended"
        line = json.loads(raw)
        if line.get("event") == event:
            return dict(line)


async def health(target: str, ca: bytes) -> int:
    async with grpc.aio.secure_channel(target, channel_credentials(ca),
                                       options=OWN_CONNECTION) as channel:
        answer = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=10)
    return int(answer.status)


async def test_sighup_reloads_the_certificates_and_the_keys(tmp_path: Path) -> None:
    first, second = issue(tmp_path, "first"), issue(tmp_path, "second")
    cert, key, keys = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "keys"
    cert.write_bytes(first.cert_bytes())
    key.write_bytes(first.key_bytes())
    keys.write_text(f"{KEY_A} backend-a\n")
    process = await asyncio.create_subprocess_exec(
        *SERVER, "--port", "0", "--allow-stacked-decks", "--tls-cert", str(cert),
        "--tls-key", str(key), stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "TAPIS_API_KEYS_FILE": str(keys)})
    try:
        serving = await next_line(process, "serving")
        target = "localhost:" + str(serving["address"]).rsplit(":", 1)[1]
        assert serving["tls"] is True and serving["api_keys"] is True
        assert await health(target, first.ca_bytes()) == health_pb2.HealthCheckResponse.SERVING
        cert.write_bytes(second.cert_bytes())
        key.write_bytes(second.key_bytes())
        keys.write_text(f"{KEY_B} backend-b\n")
        process.send_signal(signal.SIGHUP)
        await next_line(process, "tls_reloaded")
        await next_line(process, "api_keys_reloaded")
        assert await health(target, second.ca_bytes()) == health_pb2.HealthCheckResponse.SERVING
        async with grpc.aio.secure_channel(target, channel_credentials(second.ca_bytes()),
                                           options=OWN_CONNECTION) as channel:
            stub = pb_grpc.GameServiceStub(channel)
            await stub.CreateGame(war_request(), metadata=backend(KEY_B))
            with pytest.raises(grpc.aio.AioRpcError) as old_key:
                await stub.CreateGame(war_request(), metadata=backend(KEY_A))
            assert refusal(old_key.value) == (grpc.StatusCode.UNAUTHENTICATED,
                                              "INVALID_API_KEY")
            assert (await stub.ListGames(pb.ListGamesRequest(), metadata=backend(KEY_B))).games
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), timeout=60)
