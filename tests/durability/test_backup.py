"""`tapis-admin backup/restore/check`: a backup taken during play restores to a server that
answers every request acknowledged before it (retried JoinGames get the same token); a data
directory with a database but no join.key is refused; damage and tampering are reported."""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import grpc
import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_service.process import admin
from tapis_service.process.server import RunningServer, create_server, open_store
from tapis_service.stores.joinkey import DATABASE_NAME, KEY_NAME
from tests.support.driver import Ack, Game, auth, play
from tests.support.server import TEST_SETTINGS

GAMES = 4


@dataclass
class Joined:
    """A JoinGame the server acknowledged: its request and the token it answered."""

    request: pb.JoinGameRequest
    token: str


@dataclass
class Acknowledged:
    joins: list[Joined] = field(default_factory=list)
    actions: list[Ack] = field(default_factory=list)


async def serve(data_dir: Path) -> tuple[RunningServer, grpc.aio.Channel]:
    settings = replace(TEST_SETTINGS, store="sqlite", data_dir=data_dir)
    running = await create_server(settings, store=await open_store(settings))
    return running, grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")


async def new_game(stub: pb_grpc.GameServiceStub, seed: int, acked: Acknowledged) -> Game:
    created = await stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, seed=seed, request_id=f"create-{seed}",
        seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_PERSON) for _ in range(2)]))
    game_id = created.game.game_id
    tokens = []
    for seat in range(2):
        request = pb.JoinGameRequest(game_id=game_id, seat=seat, request_id=f"join-{seed}-{seat}")
        token = (await stub.JoinGame(request)).seat_token
        acked.joins.append(Joined(request, token))
        tokens.append(token)
    return Game(game_id, "war", tokens, [])


async def test_a_backup_taken_during_play_answers_every_acknowledged_request(
        tmp_path: Path) -> None:
    running, channel = await serve(tmp_path / "data")
    stub = pb_grpc.GameServiceStub(channel)
    acked = Acknowledged()
    rng = random.Random(25)
    games = [await new_game(stub, seed, acked) for seed in range(GAMES)]
    for game in games:
        await play(stub, game, rng, 10)
    late_joins = [new_game(stub, 100 + n, Acknowledged()) for n in range(3)]

    async def keep_playing() -> None:  # the play goes on while the backup runs
        for _ in range(5):
            for game in games:
                await play(stub, game, rng, 2)
        await asyncio.gather(*late_joins)

    before = {game.game_id: len(game.acks) for game in games}
    joins_before = len(acked.joins)
    playing = asyncio.create_task(keep_playing())
    manifest = await asyncio.to_thread(admin.backup, tmp_path / "data", tmp_path / "backup")
    await playing
    await channel.close()
    await running.stop(0)
    acked.actions = [ack for game in games for ack in game.acks[:before[game.game_id]]]
    assert manifest["counts"]["tables"] >= GAMES and len(acked.actions) == 10 * GAMES

    admin.restore(tmp_path / "backup", tmp_path / "restored")
    report = admin.check(tmp_path / "restored")
    assert report["problems"] == [] and report["integrity"] == "ok"
    running, channel = await serve(tmp_path / "restored")
    stub = pb_grpc.GameServiceStub(channel)
    try:
        for joined in acked.joins[:joins_before]:
            assert (await stub.JoinGame(joined.request)).seat_token == joined.token
        for ack in acked.actions:
            tokens = next(g.tokens for g in games if g.game_id == ack.game_id)
            retried = await stub.SubmitAction(ack.request, metadata=auth(tokens[ack.seat]))
            assert retried.version == ack.version, ack.request_id
    finally:
        await channel.close()
        await running.stop(0)


def test_a_data_directory_with_a_database_but_no_join_key_is_refused(tmp_path: Path) -> None:
    asyncio.run(_two_tables(tmp_path / "data"))
    (tmp_path / "data" / KEY_NAME).unlink()
    result = subprocess.run([sys.executable, "-m", "tapis_service.process.main", "--port", "0",
                             "--data-dir", str(tmp_path / "data")],
                            capture_output=True, timeout=60, check=False)
    stderr = result.stderr.decode()
    assert result.returncode == 2, stderr
    assert stderr.splitlines() == [
        f"tapis-server: refusing to start: {tmp_path / 'data'} has a database but no join.key: "
        "retried joins could not get their seat tokens again (restore join.key from the same "
        "backup as the database)"]
    assert not (tmp_path / "data" / KEY_NAME).exists()  # no new key was made


async def _two_tables(data_dir: Path) -> None:
    running, channel = await serve(data_dir)
    try:
        await new_game(pb_grpc.GameServiceStub(channel), 1, Acknowledged())
        await new_game(pb_grpc.GameServiceStub(channel), 2, Acknowledged())
    finally:
        await channel.close()
        await running.stop(0)


def test_restore_refuses_a_directory_in_use_and_a_changed_backup(tmp_path: Path) -> None:
    asyncio.run(_two_tables(tmp_path / "data"))
    admin.main(["backup", "--data-dir", str(tmp_path / "data"), str(tmp_path / "backup")])
    with pytest.raises(admin.Refused, match=r"already holds tapis\.sqlite3"):
        admin.restore(tmp_path / "backup", tmp_path / "data")
    with pytest.raises(admin.Refused, match="not empty"):
        admin.backup(tmp_path / "data", tmp_path / "backup")
    key = tmp_path / "backup" / KEY_NAME
    key.write_bytes(bytes(32))
    with pytest.raises(admin.Refused, match="changed since the backup"):
        admin.restore(tmp_path / "backup", tmp_path / "elsewhere")
    assert not (tmp_path / "elsewhere" / DATABASE_NAME).exists()


def test_check_reports_counts_and_damage(tmp_path: Path) -> None:
    asyncio.run(_two_tables(tmp_path / "data"))
    report = admin.check(tmp_path / "data")
    assert report["problems"] == []
    assert report["counts"]["tables"] == 2 and report["counts"]["inputs"] == 4  # 2 claims each
    damaged = tmp_path / "data" / DATABASE_NAME
    data = bytearray(damaged.read_bytes())
    for offset in range(4096 + 100, len(data), 4096):  # every page after the first
        data[offset:offset + 64] = bytes(range(64))
    damaged.write_bytes(bytes(data))
    for name in ("tapis.sqlite3-wal", "tapis.sqlite3-shm"):
        (tmp_path / "data" / name).unlink(missing_ok=True)
    (tmp_path / "data" / KEY_NAME).unlink()
    result = subprocess.run([sys.executable, "-m", "tapis_service.process.admin", "check",
                             str(tmp_path / "data")], capture_output=True, timeout=60,
                            check=False)
    assert result.returncode == 1, result.stderr.decode()  # checked, and found wrong
    assert b"join.key" in result.stdout


def exit_code(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as ended:
        admin.main(argv)
    return int(ended.value.code or 0)


def test_check_exits_0_when_sound_1_on_a_problem_2_with_nothing_to_check(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    asyncio.run(_two_tables(tmp_path / "data"))
    assert exit_code(["check", str(tmp_path / "data")]) == 0
    admin.main(["backup", "--data-dir", str(tmp_path / "data"), str(tmp_path / "backup")])
    assert exit_code(["check", str(tmp_path / "backup")]) == 0
    capsys.readouterr()
    # nothing to check: a missing directory, an empty one, neither argument or both (2)
    (tmp_path / "empty").mkdir()
    for argv, said in (
            (["check", str(tmp_path / "missing")], "nothing to check"),
            (["check", str(tmp_path / "empty")], "nothing to check"),
            (["check"], "a directory or --database-url"),
            (["check", str(tmp_path / "data"), "--database-url", "postgresql:x"],
             "a directory or --database-url")):
        assert exit_code(argv) == 2, argv
        printed = capsys.readouterr()
        assert printed.out == "" and len(printed.err.splitlines()) == 1, argv
        assert said in printed.err, argv
    # a problem (1): a backup that lost its database, a file SQLite cannot read
    (tmp_path / "backup" / DATABASE_NAME).unlink()
    assert exit_code(["check", str(tmp_path / "backup")]) == 1
    assert "lost its tables' database" in capsys.readouterr().out
    (tmp_path / "empty" / DATABASE_NAME).write_bytes(b"not a database, " * 512)
    assert exit_code(["check", str(tmp_path / "empty")]) == 1
    assert "cannot be read as a database" in capsys.readouterr().out
