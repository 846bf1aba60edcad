"""A backend's labels on its tables: checked before any work, kept with the table (restarts,
rest), given back to that backend only (GetGame with its key, its ListGames, every result
record) and never to a seat, a spectator or another backend."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis_service.door import limits
from tapis_service.door.api_keys import Backend
from tapis_service.observe.errors import ServiceError
from tapis_service.tables.ownership import decide
from tests.support.calls import auth
from tests.support.tables import live_of, resting_of
from tests.trust.door import (
    KEY_A,
    KEY_B,
    Door,
    Secured,
    StartSecured,
    backend,
    door,
    play_war,
    refused,
    reserved_request,
)

LABELS = {"match": "m-2026-0042", "league/round": "7", "note": "déjà vu"}


def refusal_of(labels: dict[str, str]) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(ServiceError) as raised:
        limits.check_sizes(pb.CreateGameRequest(kind=pb.GAME_KIND_WAR, labels=labels))
    return raised.value.code, raised.value.reason


def test_labels_within_their_limits_pass_and_each_limit_is_refused_with_its_reason() -> None:
    key = "k" * limits.MAX_LABEL_KEY_BYTES
    limits.check_sizes(pb.CreateGameRequest(labels={
        f"{n:02}{key[2:]}": "é" * (limits.MAX_LABEL_VALUE_BYTES // 2)
        for n in range(limits.MAX_LABELS)}))
    too_long = (grpc.StatusCode.INVALID_ARGUMENT, "VALUE_TOO_LONG")
    invalid = (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_LABEL")
    assert refusal_of({f"k{n}": "" for n in range(limits.MAX_LABELS + 1)}) == too_long
    assert refusal_of({"k": "é" * (limits.MAX_LABEL_VALUE_BYTES // 2 + 1)}) == too_long
    for key in ("", "k" * (limits.MAX_LABEL_KEY_BYTES + 1), "-k", "a b", "é", "k\n"):
        assert refusal_of({key: "v"}) == invalid, key


def test_labels_need_a_backend_key() -> None:
    request = pb.CreateGameRequest(kind=pb.GAME_KIND_WAR, labels={"match": "1"})
    with pytest.raises(ServiceError) as raised:
        decide(request, 2, None)
    assert raised.value.reason == "API_KEY_REQUIRED"
    owned = decide(request, 2, Backend("backend-a", "a" * 12))
    assert owned.labels == (("match", "1"),)
    assert type(owned).decode(owned.encode()) == owned


async def test_a_bad_label_is_refused_before_any_work(tmp_path: Path,
                                                      start_secured: StartSecured) -> None:
    secured = await start_secured(door(tmp_path))
    assert await refused(secured.stub.CreateGame(reserved_request(labels={"!": ""}),
                                                 metadata=backend(KEY_A))) \
        == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_LABEL")
    assert not live_of(secured.running.host)


async def listed(secured: Secured, key: str | None) -> dict[str, dict[str, str]]:
    answer = await secured.stub.ListGames(pb.ListGamesRequest(include_finished=True),
                                          metadata=None if key is None else backend(key))
    return {line.game_id: dict(line.labels) for line in answer.games}


async def seen(secured: Secured, game_id: str,
               metadata: tuple[tuple[str, str], ...] | None) -> dict[str, str]:
    return dict((await secured.stub.GetGame(pb.GetGameRequest(game_id=game_id),
                                            metadata=metadata)).game.labels)


async def test_labels_go_to_the_table_s_backend_only_and_survive_rest_and_restarts(
        tmp_path: Path, start_secured: StartSecured) -> None:
    data = tmp_path / "data"
    data.mkdir()
    await labels_kept(door(tmp_path), start_secured, {"store": "sqlite", "data_dir": data})


async def test_labels_survive_rest_and_restarts_on_postgresql(
        tmp_path: Path, start_secured: StartSecured, database_url: str) -> None:
    await labels_kept(door(tmp_path), start_secured,
                      {"store": "postgres", "database_url": database_url})


async def labels_kept(files: Door, start_secured: StartSecured,
                      where: dict[str, object]) -> None:
    """Labels seen by their backend only: held, at rest, and after a restart on ``where``."""
    secured = await start_secured(files, **where)
    stub = secured.stub
    created = await stub.CreateGame(reserved_request(
        labels=LABELS, series_length=1, visibility=pb.VISIBILITY_PUBLIC),
        metadata=backend(KEY_A))
    game_id = created.game.game_id
    tokens = [t.seat_token for t in created.seat_tokens]
    spectator = (await stub.CreateSpectatorToken(pb.CreateSpectatorTokenRequest(
        game_id=game_id), metadata=backend(KEY_A))).spectator_token
    assert dict(created.game.labels) == LABELS

    async def only_its_backend_sees_them() -> None:
        assert await seen(secured, game_id, backend(KEY_A)) == LABELS
        for token in (*tokens, spectator):
            assert await seen(secured, game_id, auth(token)) == {}
            assert await seen(secured, game_id, auth(token) + backend(KEY_A)) == {}
        assert await seen(secured, game_id, backend(KEY_B)) == {}
        assert (await listed(secured, KEY_A))[game_id] == LABELS
        assert (await listed(secured, KEY_B))[game_id] == {}

    await only_its_backend_sees_them()
    await play_war(stub, game_id, tokens, metadata=auth(tokens[0]))
    stream = stub.WatchResults(pb.WatchResultsRequest(), metadata=backend(KEY_A))
    records = (await stream.read()).records
    while len(records) < 2:
        records.extend((await stream.read()).records)
    stream.cancel()
    assert [r.WhichOneof("result") for r in records] == ["game_ended", "series_ended"]
    assert all(dict(r.labels) == LABELS for r in records)
    host = secured.running.host
    assert host.shelf.rest_idle() + host.shelf.rest_idle() == 1
    assert game_id in resting_of(host)
    assert (await listed(secured, KEY_A))[game_id] == LABELS  # from the resting line
    assert (await listed(secured, KEY_B))[game_id] == {}
    await secured.channel.close()
    await secured.running.stop(0)
    secured = await start_secured(files, **where)
    assert game_id in resting_of(secured.running.host)  # its stored listing, read back
    assert (await listed(secured, KEY_A))[game_id] == LABELS
    assert (await listed(secured, KEY_B))[game_id] == {}
    await only_its_backend_sees_them()  # loaded back from its records
