"""A quarantined table is listed as its ownership allows: a backend's private table to that
backend only (by id and by kind), a public one to anyone, one whose owner cannot be read to
nobody."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tapis.v1 import game_service_pb2 as pb
from tapis_service.stores.sqlite_store import FILE_NAME
from tapis_service.tables.healing import Quarantined, stored_owner
from tapis_service.tables.ownership import PRIVATE, Ownership
from tests.support.tables import quarantined_of
from tests.trust.door import KEY_A, KEY_B, StartSecured, backend, door, war_request


def person_seats(request: pb.CreateGameRequest) -> pb.CreateGameRequest:
    for seat, config in enumerate(request.seat_configs):
        config.player_id = f"u-{seat}"
    return request


async def test_a_quarantined_private_table_is_listed_to_its_backend_only(
        tmp_path: Path, start_secured: StartSecured) -> None:
    files = door(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    first = await start_secured(files, store="sqlite", data_dir=data)
    private = (await first.stub.CreateGame(person_seats(war_request()),
                                           metadata=backend(KEY_A))).game.game_id
    public = (await first.stub.CreateGame(
        person_seats(war_request(visibility=pb.VISIBILITY_PUBLIC)),
        metadata=backend(KEY_A))).game.game_id
    await first.channel.close()
    await first.running.stop(0)
    with sqlite3.connect(data / FILE_NAME) as stored:
        stored.execute("UPDATE journal SET entry = '{' WHERE game_id IN (?, ?)",
                       (private, public))
        assert stored.total_changes >= 2  # journal is a view: rowcount counts none of its rows
    stored.close()
    second = await start_secured(files, store="sqlite", data_dir=data)
    assert set(quarantined_of(second.running.host)) == {private, public}
    for metadata, shown in ((None, {public}), (backend(KEY_B), {public}),
                            (backend(KEY_A), {private, public})):
        for kind in (pb.GAME_KIND_UNSPECIFIED, pb.GAME_KIND_WAR):
            games = (await second.stub.ListGames(pb.ListGamesRequest(
                kind=kind, include_finished=True), metadata=metadata)).games
            assert {g.game_id for g in games} == shown, (metadata, kind)
            assert all(g.status == pb.GAME_STATUS_QUARANTINED for g in games)


def test_a_table_whose_owner_cannot_be_read_is_listed_to_nobody() -> None:
    owner = Ownership(backend="backend-a", visibility=PRIVATE)
    assert stored_owner({"kind": "war", "ownership": owner.encode()}) == owner
    assert stored_owner({"kind": "war"}) == Ownership()  # created without a key: public
    assert stored_owner({"damaged": "journal", "kind": "war", "ownership": None}) == Ownership()
    for unreadable in ("{", None, {"ownership": "x"}, {"ownership": {"series_length": "z"}},
                       {"damaged": "the creation record is not valid JSON"}):
        assert stored_owner(unreadable) is None
        assert not Quarantined("war", "damaged", stored_owner(unreadable)).listed_to(None)
