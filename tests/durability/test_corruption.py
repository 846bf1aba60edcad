"""A damaged database file: the server refuses to start (exit 2, one line naming the file),
never a traceback, and never takes a damaged file for a fresh install."""

from __future__ import annotations

import random
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_service.stores.sqlite_store import FILE_NAME
from tests.support.driver import play, start_game
from tests.support.process import ServerProcess, channel

pytestmark = pytest.mark.slow  # server processes started, killed, restarted

PAGE = 4096


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    process = ServerProcess(tmp_path, "--snapshot-every", "5")
    yield process
    process.stop()


async def a_used_data_directory(server: ServerProcess) -> Path:
    """A data directory that has served three games, checkpointed, then stopped."""
    await server.start()
    async with channel(server.target) as grpc_channel:
        stub = pb_grpc.GameServiceStub(grpc_channel)
        for seed in range(3):
            game = await start_game(stub, "war", seed=seed)
            await play(stub, game, random.Random(seed), 30)
    assert server.terminate() == 0
    database = server.data_dir / FILE_NAME
    assert database.stat().st_size > 4 * PAGE
    return database


def truncate(database: Path) -> None:
    database.write_bytes(b"")


def remove(database: Path) -> None:
    database.unlink()


def not_a_database(database: Path) -> None:
    database.write_bytes(b"this is not a database, just text\n" * 400)


def random_pages(database: Path) -> None:
    data = bytearray(database.read_bytes())
    rng = random.Random(7)
    for page in range(1, len(data) // PAGE):  # every page but the header's
        start = page * PAGE
        data[start:start + PAGE] = rng.randbytes(PAGE)
    database.write_bytes(bytes(data))


def cut_in_half(database: Path) -> None:
    data = database.read_bytes()
    database.write_bytes(data[:len(data) // 2 + 100])


@pytest.mark.parametrize("damage", [truncate, remove, not_a_database, random_pages,
                                    cut_in_half])
async def test_a_damaged_database_file_is_refused_at_start_with_exit_2(
        server: ServerProcess, damage: Callable[[Path], None]) -> None:
    database = await a_used_data_directory(server)
    for name in ("tapis.sqlite3-wal", "tapis.sqlite3-shm"):
        (database.parent / name).unlink(missing_ok=True)
    damage(database)
    refused = subprocess.run(server.command(), capture_output=True, timeout=60, check=False)
    stderr = refused.stderr.decode()
    assert refused.returncode == 2, stderr
    assert "Traceback" not in stderr
    lines = [line for line in stderr.splitlines() if line.startswith("tapis-server:")]
    assert len(lines) == 1, stderr
    assert str(database) in lines[0]
    assert "refusing to start" in lines[0]


async def test_a_fresh_data_directory_starts_empty(tmp_path: Path) -> None:
    """Only a directory that has served before (its join key is there) is protected."""
    from tapis_service.stores.sqlite_store import SqliteStore

    store = SqliteStore(tmp_path / "fresh")
    assert await store.load() == []
    store.close()


async def test_a_row_that_is_not_utf8_quarantines_its_game_and_quotes_nothing(
        server: ServerProcess) -> None:
    """Bytes overwritten inside one journal row: that game alone is refused, the others serve,
    and no message repeats the stored text (it holds request ids and cards)."""
    import sqlite3

    import grpc

    from tapis.v1 import game_service_pb2 as pb

    database = await a_used_data_directory(server)
    stored = sqlite3.connect(database)
    game_id, index, entry = stored.execute(
        "SELECT game_id, idx, entry FROM journal ORDER BY game_id, idx LIMIT 1 OFFSET 5"
    ).fetchone()
    damaged = entry.encode()[:20] + b"\xff\xfe\xff" + entry.encode()[23:]
    with stored:
        stored.execute("UPDATE journal SET entry = CAST(? AS TEXT) WHERE game_id = ? AND idx = ?",
                       (damaged, game_id, index))
    stored.close()
    await server.start()
    async with channel(server.target) as grpc_channel:
        stub = pb_grpc.GameServiceStub(grpc_channel)
        listed = (await stub.ListGames(pb.ListGamesRequest(include_finished=True))).games
        assert {g.game_id: g.status for g in listed}[game_id] == pb.GAME_STATUS_QUARANTINED
        assert sum(g.status != pb.GAME_STATUS_QUARANTINED for g in listed) == 2
        try:
            await stub.GetGame(pb.GetGameRequest(game_id=game_id))
            raise AssertionError("a quarantined game was served")
        except grpc.aio.AioRpcError as error:
            assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    server.stop()
    log = server.log.read_text(errors="replace")
    assert "game_quarantined" in log and "not valid JSON" in log
    assert entry[:20] not in log.replace('\\"', '"')


async def test_a_second_server_on_the_same_directory_or_port_refuses_in_one_line(
        server: ServerProcess, tmp_path: Path) -> None:
    await server.start()
    try:
        same_dir = subprocess.run([*server.command(), "--port", "0"],
                                  capture_output=True, timeout=60, check=False)
        other_dir = tmp_path / "other"
        same_port = subprocess.run(
            [*server.command(), "--data-dir", str(other_dir)],
            capture_output=True, timeout=60, check=False)
    finally:
        server.stop()
    for refused, says in ((same_dir, "another tapis-server is using"),
                          (same_port, f"cannot listen on 127.0.0.1:{server.port}")):
        stderr = refused.stderr.decode()
        assert refused.returncode == 2, stderr
        assert "Traceback" not in stderr
        assert stderr.strip().splitlines() == [line for line in stderr.strip().splitlines()
                                               if line.startswith("tapis-server:")]
        assert says in stderr
