"""`tapis-server` as a process: it refuses to listen beyond loopback unprotected (one line,
exit 2, naming --insecure), and reloads its certificates (on both ports) and keys on SIGHUP."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_service.door.tls import channel_credentials
from tests.support.calls import auth
from tests.support.certificates import issue
from tests.support.websocket import tls_handshake
from tests.trust.door import (
    KEY_A,
    KEY_B,
    OWN_CONNECTION,
    backend,
    play_war,
    refusal,
    war_request,
)

SERVER = (sys.executable, "-m", "tapis_service.process.main")
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
    data = tmp_path / "data"
    code, stderr = await run("--host", "0.0.0.0", "--port", "0", "--store", "sqlite",
                             "--data-dir", str(data), *filled)
    assert not data.exists()  # refused before it opened anything (not "within n seconds")
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
        *SERVER, "--port", "0", "--ws-port", "0", "--allow-stacked-decks", "--tls-cert",
        str(cert), "--tls-key", str(key), stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "TAPIS_API_KEYS_FILE": str(keys)})
    try:
        serving = await next_line(process, "serving")
        target = "localhost:" + str(serving["address"]).rsplit(":", 1)[1]
        assert serving["tls"] is True and serving["api_keys"] is True
        serving_web = await next_line(process, "serving_web")
        web = int(str(serving_web["address"]).rsplit(":", 1)[1].rstrip("/"))
        assert int(serving_web["max_connections"]) >= int(  # the port's share, said
            serving_web["max_connections_per_address"]) >= 8
        assert await health(target, first.ca_bytes()) == health_pb2.HealthCheckResponse.SERVING
        assert await tls_handshake(web, first.ca)
        cert.write_bytes(second.cert_bytes())
        key.write_bytes(second.key_bytes())
        keys.write_text(f"{KEY_B} backend-b\n")
        process.send_signal(signal.SIGHUP)
        await next_line(process, "tls_reloaded")
        await next_line(process, "api_keys_reloaded")
        assert await health(target, second.ca_bytes()) == health_pb2.HealthCheckResponse.SERVING
        # the WebSocket port (wss, https) too: a new connection sees the new certificate
        assert await tls_handshake(web, second.ca) and not await tls_handshake(web, first.ca)
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


async def test_results_survive_a_sigkill_of_a_sqlite_server(tmp_path: Path) -> None:
    """Every result delivered exactly once across a reconnect and a SIGKILL + restart."""
    issued = issue(tmp_path, "server")
    keys = tmp_path / "keys"
    keys.write_text(f"{KEY_A} backend-a\n")
    data = tmp_path / "data"
    arguments = ("--port", "0", "--data-dir", str(data), "--allow-stacked-decks",
                 "--tls-cert", str(issued.cert), "--tls-key", str(issued.key),
                 "--api-keys-file", str(keys))

    async def start() -> tuple[asyncio.subprocess.Process, str]:
        process = await asyncio.create_subprocess_exec(*SERVER, *arguments,
                                                       stderr=asyncio.subprocess.PIPE)
        serving = await next_line(process, "serving")
        return process, "localhost:" + str(serving["address"]).rsplit(":", 1)[1]

    async def finish_a_table(stub: pb_grpc.GameServiceStub) -> str:
        request = war_request(series_length=1)
        for seat, config in enumerate(request.seat_configs):
            config.player_id = f"u-{seat}"
        created = await stub.CreateGame(request, metadata=backend(KEY_A))
        tokens = [t.seat_token for t in created.seat_tokens]
        await play_war(stub, created.game.game_id, tokens, metadata=auth(tokens[0]))
        return created.game.game_id

    async def watch(stub: pb_grpc.GameServiceStub, after: int,
                    count: int) -> list[pb.ResultRecord]:
        stream = stub.WatchResults(pb.WatchResultsRequest(after_cursor=after),
                                   metadata=backend(KEY_A))
        found: list[pb.ResultRecord] = []
        async for response in stream:
            found.extend(response.records)
            if len(found) >= count:
                break
        stream.cancel()
        return found[:count]

    credentials = channel_credentials(issued.ca_bytes())
    process, target = await start()
    try:
        async with grpc.aio.secure_channel(target, credentials,
                                           options=OWN_CONNECTION) as channel:
            stub = pb_grpc.GameServiceStub(channel)
            first = [await finish_a_table(stub) for _ in range(2)]
            stored = await watch(stub, 0, 2)  # the backend stores two, then loses its stream
            stored += await watch(stub, stored[-1].cursor, 2)
        process.kill()  # SIGKILL: no shutdown code runs
        await process.wait()
        process, target = await start()
        async with grpc.aio.secure_channel(target, credentials,
                                           options=OWN_CONNECTION) as channel:
            stub = pb_grpc.GameServiceStub(channel)
            later = await finish_a_table(stub)
            stored += await watch(stub, stored[-1].cursor, 2)
    finally:
        if process.returncode is None:
            process.terminate()
            await asyncio.wait_for(process.wait(), timeout=60)
    assert [r.cursor for r in stored] == [1, 2, 3, 4, 5, 6]
    assert [(r.game_id, r.WhichOneof("result")) for r in stored] == [
        (game_id, kind) for game_id in [*first, later]
        for kind in ("game_ended", "series_ended")]
