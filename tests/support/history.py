"""A store with a long history: many finished tables, written fast (one game played, its rows
copied under new ids), for the tests of memory and start-up (resting.py)."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import grpc

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis.v1 import war_pb2
from tapis_service.observe.clock import ManualClock
from tapis_service.process.server import create_server
from tapis_service.stores.sqlite_store import FILE_NAME
from tests.support.calls import auth, person_seats
from tests.support.server import TEST_SETTINGS
from tests.support.tables import resting_of

REVEAL = pb.Action(war=war_pb2.WarAction(reveal=war_pb2.WarReveal()))

_COPY = """
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
INSERT INTO {table} SELECT printf('%016x', n.i), {columns} FROM {table}, n
WHERE {table}.game_id = ?2
"""


async def finished_war_tables(data_dir: Path, count: int) -> str:
    """Fill ``data_dir`` (a SQLite data directory) with ``count`` finished, resting War tables:
    one played to its end by two people through a real server, the others copies of its rows;
    the id of the one played."""
    settings = replace(TEST_SETTINGS, store="sqlite", data_dir=data_dir)
    running = await create_server(settings, clock=ManualClock())
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
    try:
        stub = pb_grpc.GameServiceStub(channel)
        created = await stub.CreateGame(pb.CreateGameRequest(
            kind=pb.GAME_KIND_WAR, seats=2, seed=3, seat_configs=person_seats(2),
            war=war_pb2.WarOptions(target_points=1)))
        game_id = created.game.game_id
        tokens = [(await stub.JoinGame(pb.JoinGameRequest(game_id=game_id, seat=seat,
                                                          display_name=f"p{seat}"))).seat_token
                  for seat in (0, 1)]
        while True:
            view = (await stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
            if view.status == pb.GAME_STATUS_GAME_OVER:
                break
            await stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=REVEAL),
                                    metadata=auth(tokens[view.awaiting_seats[0]]))
        running.host.shelf.rest_idle(force=True)
        assert game_id in resting_of(running.host)
    finally:
        await channel.close()
        await running.stop(0)
    with sqlite3.connect(data_dir / FILE_NAME) as connection:
        for table, columns in (("games", "created_order + n.i, record, finished, listing"),
                               ("journal", "idx, entry"),
                               ("snapshots", "idx, format, checksum, data")):
            connection.execute(_COPY.format(table=table, columns=columns),
                               (count - 1, game_id))
    return game_id
