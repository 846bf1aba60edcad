"""ListGames costs a page's worth of work, whatever the tables held: at 20,000 tables a page
looks at most at page_size + 1 tables (counted, not timed), and pages cover every table the
caller may see exactly once, in creation order (tables created in the same millisecond by id)
— a backend's private tables to it only."""

from __future__ import annotations

import base64
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis_service.codec import convert
from tapis_service.door.caller import Caller
from tapis_service.game_api import GameApi
from tapis_service.observe.clock import ManualClock
from tapis_service.tables import lobby
from tapis_service.tables.lifecycle import TableState
from tests.support.server import ServerFactory
from tests.trust.door import KEY_A, KEY_B, door

TABLES = 20_000
PAGE = 100


class CountingSessions(OrderedDict[str, Any]):
    """The host's map of its tables, counting every table looked up or walked over."""

    touched = 0

    def get(self, key: Any, default: Any = None) -> Any:
        CountingSessions.touched += 1
        return super().get(key, default)

    def __getitem__(self, key: Any) -> Any:
        CountingSessions.touched += 1
        return super().__getitem__(key)

    def __iter__(self) -> Any:
        CountingSessions.touched += len(self)
        return super().__iter__()

    def values(self) -> Any:
        CountingSessions.touched += len(self)
        return super().values()

    def items(self) -> Any:
        CountingSessions.touched += len(self)
        return super().items()


async def create(api: GameApi, kind: int, key: str | None = None,
                 visibility: int = 0) -> str:
    request = pb.CreateGameRequest(kind=kind, visibility=visibility,  # type: ignore[arg-type]
                                   seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_PERSON)] * 2)
    created = await api.create_game(request, Caller(peer="ipv4:10.0.0.1:4000", api_key=key))
    return str(created.game.game_id)


async def test_a_page_looks_at_a_page_of_tables_at_20000_tables(
        make_server: ServerFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = door(tmp_path)
    harness = await make_server(clock=ManualClock(), api_keys_file=files.keys,
                                create_rate_per_s=0, keyless_create_rate_per_s=0,
                                keyless_max_tables=0, list_rate_per_s=0,
                                backend_create_rate_per_s=0)
    api, host = harness.running.api, harness.running.host
    assert api is not None
    private = [await create(api, pb.GAME_KIND_WAR, KEY_A) for _ in range(10)]
    public = [await create(api, pb.GAME_KIND_WAR, KEY_B, pb.VISIBILITY_PUBLIC)
              for _ in range(TABLES - 30)]
    corse = [await create(api, pb.GAME_KIND_BATAILLE_CORSE, KEY_B, pb.VISIBILITY_PUBLIC)
             for _ in range(20)]
    assert host.tables.count(TableState.LIVE) == len(host.lobby) == TABLES
    assert len({s.created_ms for s in host.tables.sessions()}) == 1  # a clock standing still
    host.tables.by_game = CountingSessions(host.tables.by_game)
    listed = 0
    original = convert.listing

    def counted(session: Any) -> pb.GameListing:
        nonlocal listed
        listed += 1
        return original(session)

    monkeypatch.setattr(convert, "listing", counted)

    async def every_page(key: str | None, kind: int = 0, pages: int = TABLES) -> list[str]:
        """The tables the pages list, each page checked to have looked at a page's worth."""
        seen: list[str] = []
        token = ""
        for _ in range(pages):
            CountingSessions.touched = 0
            examined, before = host.lobby.examined, listed
            answer = await api.list_games(pb.ListGamesRequest(  # type: ignore[arg-type]
                page_size=PAGE, page_token=token, kind=kind), Caller(api_key=key))
            assert CountingSessions.touched <= PAGE + 1
            assert host.lobby.examined - examined <= PAGE + 1
            assert listed - before == len(answer.games) <= PAGE
            seen.extend(g.game_id for g in answer.games)
            token = answer.next_page_token
            if not token:
                break
        return seen

    # all created in one millisecond: listed by id
    assert await every_page(None) == sorted(public + corse)  # 200 pages, each a page's work
    assert await every_page(KEY_B, pages=3) == sorted(public + corse)[:3 * PAGE]
    assert await every_page(KEY_A, pages=3) == sorted(private + public + corse)[:3 * PAGE]
    assert await every_page(KEY_A, pb.GAME_KIND_BATAILLE_CORSE) == sorted(corse)
    assert await every_page(None, pb.GAME_KIND_BOUTONS) == []


def test_a_table_moves_when_its_game_ends_and_keeps_its_order() -> None:
    index = lobby.Lobby()
    for number, (created_ms, game_id) in enumerate([(1000, "c"), (1001, "a"), (1001, "b")]):
        index.put(game_id, created_ms, "war", None, finished=number == 1)
    index.put("p", 999, "war", "backend-a", finished=False)
    index.put("d", 1000, "war", None, finished=False)  # the same millisecond as "c": by id
    assert [r[1] for r in index.page(None, None, False, None)] == ["c", "d", "b"]
    assert [r[1] for r in index.page(None, None, True, None)] == ["c", "d", "a", "b"]
    assert [r[1] for r in index.page("backend-a", "war", True, None)] == ["p", "c", "d", "a",
                                                                          "b"]
    assert [r[1] for r in index.page("backend-b", "corse", True, None)] == []
    index.remove("d")
    index.finished("c", True)
    index.finished("a", False)
    assert [r[1] for r in index.page(None, None, False, None)] == ["a", "b"]
    assert [r[1] for r in index.page(None, None, True, None)] == ["c", "a", "b"]
    first = next(index.page(None, None, True, None))
    cursor = lobby.cursor_of(lobby.token_after(first))
    assert cursor.after == (1000, "c")
    assert [r[1] for r in index.page(None, None, True, cursor.after)] == ["a", "b"]
    assert [r[1] for r in index.page(None, None, True, (1000, "zz"))] == ["a", "b"]  # gone
    index.remove("a")
    index.remove("a")
    assert [r[1] for r in index.page(None, None, True, cursor.after)] == ["b"]
    assert len(index) == 3 and "a" not in index
    assert lobby.cursor_of(lobby.token_after(quarantined="x.y")).quarantined_after == "x.y"
    assert lobby.cursor_of(lobby.token_after((5, "a.b"))).after == (5, "a.b")
    # offsets (a cluster's of old) and (created, order, id) rows of old name no position
    for bad in ("x", *(base64.urlsafe_b64encode(t).decode() for t in (
            b"100", b"t12.3.ab", b"k12", b"k12.", b"kx.ab", b"z", b"\xff"))):
        with pytest.raises(ValueError):
            lobby.cursor_of(bad)
