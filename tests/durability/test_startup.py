"""Start-up, with real processes: every failure is one line and exit 2; a signal during start-up
stops the server at once with exit 0; while the store is not there yet, liveness is SERVING,
readiness is not, and every other call is told UNAVAILABLE / SERVER_STARTING."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_service.process.entry import StopDuringStartup, stop_at_once_on_signals
from tests.support.calls import reason_of
from tests.support.process import ServerProcess, channel, free_port, health_status

SERVER = [sys.executable, "-m", "tapis_service.process.main", "--log-level", "warning"]
UNREACHABLE = "postgresql://tapis:s3cret@127.0.0.1:1/tapis"


def refusal(*args: str, env: dict[str, str] | None = None, as_nobody: bool = False) -> str:
    """Run the server, which must refuse to start: its one line."""
    command = [*SERVER, *args]
    if as_nobody:  # setpriv (util-linux): subprocess's user= cannot exec a python under /root
        command = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
                   *command]
    result = subprocess.run(command, env={**os.environ, **(env or {})}, cwd="/",
                            capture_output=True, timeout=60, check=False)
    stderr = result.stderr.decode()
    assert result.returncode == 2, stderr
    assert "Traceback" not in stderr
    lines = [line for line in stderr.splitlines() if line.startswith("tapis-server:")]
    assert len(lines) == 1 and lines[0] == stderr.splitlines()[-1], stderr
    assert lines[0].startswith("tapis-server: refusing to start: ")
    return lines[0]


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


def test_a_port_in_use_is_one_line(taken_port: int) -> None:
    line = refusal("--port", str(taken_port))
    assert f"cannot listen on 127.0.0.1:{taken_port}" in line


def test_a_metrics_port_in_use_is_one_line(taken_port: int) -> None:
    line = refusal("--port", str(free_port()), "--metrics-port", str(taken_port))
    assert f"cannot serve metrics on 127.0.0.1:{taken_port}" in line


def test_a_data_directory_the_server_cannot_write_is_one_line(tmp_path: Path) -> None:
    """The first thing a `docker run -v $PWD/data:/data` user meets: a root-owned mount."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    if os.geteuid() == 0:  # root writes anywhere: run the server as nobody
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: no way to be a user who cannot write")
        for parent in (data_dir, *data_dir.parents):
            if parent == Path(tempfile.gettempdir()):
                break
            parent.chmod(0o755)
        line = refusal("--port", "0", "--data-dir", str(data_dir), as_nobody=True)
    else:
        data_dir.chmod(0o555)
        line = refusal("--port", "0", "--data-dir", str(data_dir))
    assert line.endswith(f"Permission denied: {data_dir / 'tapis.lock'}")


def test_a_bad_value_in_a_variable_is_one_line() -> None:
    line = refusal(env={"TAPIS_MAX_GAMES": "lots"})
    assert "TAPIS_MAX_GAMES='lots' is not a valid --max-games" in line


def test_a_database_unreachable_past_db_wait_is_one_line() -> None:
    line = refusal("--port", "0", "--database-url", UNREACHABLE, "--db-wait", "1")
    assert "cannot reach the database at postgresql://tapis:***@127.0.0.1:1/tapis" in line
    assert "s3cret" not in line


async def test_waiting_for_the_database_liveness_serves_and_sigterm_stops_at_once() -> None:
    port = free_port()
    target = f"127.0.0.1:{port}"
    process = subprocess.Popen([*SERVER, "--port", str(port), "--database-url", UNREACHABLE],
                               stderr=subprocess.PIPE)
    try:
        give_up = time.monotonic() + 20
        while await health_status(target, "liveness") != "SERVING":
            assert process.poll() is None and time.monotonic() < give_up
            await asyncio.sleep(0.05)
        assert await health_status(target, "") == "NOT_SERVING"
        assert await health_status(target, "tapis.v1.GameService") == "NOT_SERVING"
        async with channel(target) as opened:  # any other call: retry, it is starting
            stub = pb_grpc.GameServiceStub(opened)
            with pytest.raises(grpc.aio.AioRpcError) as unary:
                await stub.SubmitAction(pb.SubmitActionRequest(game_id="g"), timeout=5)
            with pytest.raises(grpc.aio.AioRpcError) as stream:
                async for _ in stub.StreamEvents(pb.StreamEventsRequest(game_id="g"),
                                                 timeout=5):
                    pass
        for refused in (unary.value, stream.value):
            assert refused.code() == grpc.StatusCode.UNAVAILABLE
            assert reason_of(refused) == "SERVER_STARTING"
        signalled = time.monotonic()
        process.send_signal(signal.SIGTERM)
        assert process.wait(10) == 0
        assert time.monotonic() - signalled < 2.0
        stderr = process.stderr.read().decode() if process.stderr else ""
        assert "Traceback" not in stderr
        assert "waiting_for_database" in stderr  # its first attempt, at once
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_signal_during_start_up_interrupts_even_code_that_never_yields() -> None:
    """Recovery replays inputs without yielding to the event loop: the handler still runs
    between two bytecodes, so SIGTERM stops it at once (the real process exits 0)."""
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        stop_at_once_on_signals()
        with pytest.raises(StopDuringStartup) as stopped:
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(100_000_000):  # busy, like a long replay
                pass
        assert stopped.value.code == 0 and stopped.value.signum == signal.SIGTERM
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


async def test_sigterm_half_a_second_into_a_start_up_with_a_large_store_exits_0_within_2_s(
        tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data", "--create-rate", "0", "--keyless-create-rate", "0")
    (tmp_path / "data").mkdir()
    await server.start()
    try:
        async with channel(server.target) as grpc_channel:
            stub = pb_grpc.GameServiceStub(grpc_channel)
            for _ in range(10):
                await asyncio.gather(*(stub.CreateGame(pb.CreateGameRequest(
                    kind=pb.GAME_KIND_WAR, seat_configs=[
                        pb.SeatConfig(type=pb.SEAT_TYPE_PERSON) for _ in range(2)]))
                    for _ in range(300)))
        assert server.terminate() == 0
        # the command the image runs: its signal handlers come before any heavy import
        command = [str(Path(sys.executable).parent / "tapis-server"), *server.command()[3:]]
        restarted = subprocess.Popen(command, stderr=subprocess.PIPE)
        await asyncio.sleep(0.5)
        signalled = time.monotonic()
        restarted.send_signal(signal.SIGTERM)
        assert restarted.wait(10) == 0
        assert time.monotonic() - signalled < 2.0
        stderr = restarted.stderr.read().decode() if restarted.stderr else ""
        assert "Traceback" not in stderr
    finally:
        server.stop()


async def until_status(target: str, service: str, wanted: str,
                       process: subprocess.Popen[bytes]) -> None:
    """Poll ``service``'s health at ``target`` until ``wanted`` (bounded)."""
    give_up = time.monotonic() + 30
    while (status := await health_status(target, service)) != wanted:
        assert process.poll() is None, f"the server exited with {process.returncode}"
        assert time.monotonic() < give_up, f"{target} {service!r}: {status}"
        await asyncio.sleep(0.05)


async def test_the_health_port_answers_plaintext_probes_while_waiting_and_serving(
        tmp_path: Path) -> None:
    """``--health-port``: what Kubernetes' native gRPC probes ask (they speak no TLS), from
    the waiting room (liveness SERVING, readiness NOT_SERVING) to the server serving TLS on its
    own port, then NOT_SERVING during the stop."""
    from tests.support.certificates import issue

    probe = free_port()
    waiting = subprocess.Popen([*SERVER, "--port", str(free_port()), "--health-port",
                                str(probe), "--database-url", UNREACHABLE],
                               stderr=subprocess.PIPE)
    try:
        await until_status(f"127.0.0.1:{probe}", "liveness", "SERVING", waiting)
        assert await health_status(f"127.0.0.1:{probe}", "") == "NOT_SERVING"
        waiting.send_signal(signal.SIGTERM)
        assert waiting.wait(10) == 0
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.wait()

    issued = issue(tmp_path / "secrets", "server")
    port = free_port()
    serving = subprocess.Popen([*SERVER, "--port", str(port), "--health-port", str(probe),
                                "--data-dir", str(tmp_path / "data"), "--tls-cert",
                                str(issued.cert), "--tls-key", str(issued.key)],
                               stderr=subprocess.PIPE)
    try:
        await until_status(f"127.0.0.1:{probe}", "", "SERVING", serving)
        assert await health_status(f"127.0.0.1:{probe}", "liveness") == "SERVING"
        assert await health_status(f"127.0.0.1:{probe}", "tapis.v1.GameService") == "SERVING"
        assert await health_status(f"127.0.0.1:{port}", "") == "UNREACHABLE"  # TLS there
        serving.send_signal(signal.SIGTERM)
        assert serving.wait(30) == 0
        stderr = serving.stderr.read().decode() if serving.stderr else ""
        assert "Traceback" not in stderr
    finally:
        if serving.poll() is None:
            serving.kill()
            serving.wait()


def test_a_health_port_in_use_is_one_line(taken_port: int) -> None:
    line = refusal("--port", "0", "--health-port", str(taken_port))
    assert f"cannot serve health on 127.0.0.1:{taken_port}" in line
