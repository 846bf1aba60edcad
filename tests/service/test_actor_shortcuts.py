"""The table actor's per-action shortcuts, each against the plain way it stands for: the game's
end worked out once per table (``Session.game_over``), the lobby told only when a game ends or
starts (``GameHost.publishing``), the rate-limited actions looked up per kind
(``realtime.LIMITED``)."""

from __future__ import annotations

import dataclasses
import random

import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis_engine import table as tbl
from tapis_engine.errors import RuleError
from tapis_engine.registry import BY_KIND, GAMES
from tapis_engine.war import WarOptions
from tapis_service.observe import metrics
from tapis_service.observe.clock import ManualClock
from tapis_service.stores.results import MemoryResults, ResultsFeed
from tapis_service.tables import realtime
from tapis_service.tables.host import GameHost
from tapis_service.tables.ownership import Ownership
from tapis_service.tables.results_clerk import ResultsClerk
from tapis_service.tables.session import Session
from tests.support.server import TEST_SETTINGS


async def _seated(host: GameHost, kind: str, options: object = None) -> Session:
    rules = GAMES[kind]
    seats = rules.min_seats
    session = await host.create(kind=kind, seats=seats, seed=11, turn_time_ms=0,
                                bots=[None] * seats,
                                options=rules.default_options() if options is None else options,
                                stacked_deck=None, stacked_first=None)
    for seat in range(seats):
        await host.join(session.game_id, seat, f"p{seat}")
    return host.get(session.game_id)


def _a_move(session: Session, rng: random.Random) -> tbl.Act | None:
    """A seeded random legal action of a seat that has one (None: none has)."""
    rules, state = session.rules, session.table.state
    choices = [(seat, action) for seat in range(len(session.table.seats))
               for action in rules.legal_actions(state, seat)]
    if not choices:
        return None
    seat, action = rng.choice(choices)
    return tbl.Act(seat, action)


@pytest.mark.parametrize("kind", sorted(GAMES))
async def test_game_over_is_the_tables_own_after_every_input(kind: str) -> None:
    host = GameHost(TEST_SETTINGS, ManualClock())
    session = await _seated(host, kind)
    rng = random.Random(3)
    now = host.clock.now_ms()
    for _ in range(5000):
        assert session.game_over() is session.table.game_over(session.rules)
        move = _a_move(session, rng)
        if move is None:
            break
        try:
            session.apply(move, now)
        except RuleError:  # a real-time game's race: the table is unchanged
            continue
        now += 1
    assert session.game_over() and session.table.game_over(session.rules)
    # a table set from outside (a restore, a rebuild), never seen by ``awaiting``: worked out
    session.table = dataclasses.replace(session.table, abandoned=False, state=None)
    assert session.game_over() is session.table.game_over(session.rules) is False
    session.table = dataclasses.replace(session.table, abandoned=True)
    assert session.game_over() is session.table.game_over(session.rules) is True


async def test_game_over_follows_an_abandoned_table() -> None:
    host = GameHost(TEST_SETTINGS, ManualClock())
    session = await _seated(host, "war")
    assert session.game_over() is False
    await host.actor.abandon(session)
    assert session.table.abandoned and session.game_over() is True


def _listed(host: GameHost, game_id: str) -> bool:
    """ListGames shows the table among the unfinished ones."""
    return any(row[1] == game_id for row in host.lobby.page(None, None, False, None))


async def test_the_listing_follows_each_game_end_and_start_and_each_arm() -> None:
    host = GameHost(TEST_SETTINGS, ManualClock())
    session = await _seated(host, "war", WarOptions(target_points=1))
    game_id, rng, played = session.game_id, random.Random(5), 0
    for game in range(3):
        for number in range(400):
            session = host.get(game_id)
            assert _listed(host, game_id) is not session.table.game_over(session.rules)
            played += 1
            move = _a_move(session, rng)
            if move is None:
                break
            await host.actor.submit(session, move.seat, move, f"g{game}-{number}", None)
        assert not _listed(host, game_id)  # over: not among the unfinished
        await host.actor.submit(session, 0, tbl.NextGame(0), f"next-{game}", None)
        assert _listed(host, game_id)  # the next game: listed again
    assert played > 6  # the games had inputs before their ends
    # the lifecycle's arm tells the lobby anew, whatever it was last told
    host.lobby.finished(game_id, True)
    assert not _listed(host, game_id)
    host.actor.after_change(host.get(game_id))
    assert _listed(host, game_id)


def test_the_rate_limited_actions_by_kind_are_each_game_s_declaration() -> None:
    assert set(realtime.LIMITED) == set(BY_KIND)
    for kind, game in BY_KIND.items():
        assert realtime.LIMITED[kind] == game.rate_limited_actions
    assert any(realtime.LIMITED.values())  # some game has one (the shortcut is exercised)


class _Filed(ResultsClerk):
    """A clerk that keeps what it files (no ledger); ``full``: it reads the log at every look,
    the plain way (no count of game ends remembered)."""

    def __init__(self, full: bool) -> None:
        super().__init__(ResultsFeed(MemoryResults()), lambda: 0)
        self.full = full
        self.filed: list[tuple[str, bytes]] = []

    def note(self, session: Session) -> None:
        if self.full and session.game_id in self._scanned:
            self._scanned[session.game_id] = (self._scanned[session.game_id][0], -1)
        super().note(session)

    def _file(self, backend: str, game_id: str,
              filings: list[tuple[str, pb.ResultRecord]]) -> None:
        self.filed.extend((key, record.SerializeToString()) for key, record in filings)


async def test_the_clerk_files_what_it_files_reading_the_log_at_every_look() -> None:
    host = GameHost(TEST_SETTINGS, ManualClock())
    rules = GAMES["war"]
    session = await host.create(kind="war", seats=2, seed=11, turn_time_ms=0, bots=[None, None],
                                options=WarOptions(target_points=1), stacked_deck=None,
                                stacked_first=None, ownership=Ownership(backend="b"))
    for seat in range(2):
        await host.join(session.game_id, seat, f"p{seat}")
    session = host.get(session.game_id)
    counted, plain = _Filed(full=False), _Filed(full=True)
    rng, now = random.Random(9), host.clock.now_ms()
    for _ in range(300):
        if session.table.game_over(rules):
            session.apply(tbl.NextGame(0), now)
        else:
            move = _a_move(session, rng)
            assert move is not None
            session.apply(move, now)
        if rng.random() < 0.6:  # committed up to somewhere behind the log, or all of it
            last = session.last_sequence
            session.durable_sequence = rng.randint(session.durable_sequence, last)
            for clerk in (counted, plain):
                clerk.note(session)
    session.apply(tbl.Abandon(), now)
    session.durable_sequence = session.last_sequence
    for clerk in (counted, plain):
        clerk.note(session)
    assert counted.filed == plain.filed
    keys = [key for key, _ in counted.filed]
    assert len(keys) == len(set(keys))  # each once
    assert sum("/game/" in key for key in keys) >= 5 and keys[-1].endswith("/series")


async def test_each_persons_input_is_counted_once_in_the_metric() -> None:
    host = GameHost(TEST_SETTINGS, ManualClock())
    session = await _seated(host, "war")
    before = metrics.ACTIONS.value("war", "person")
    rng = random.Random(1)
    for number in range(4):
        move = _a_move(session, rng)
        assert move is not None
        await host.actor.submit(session, move.seat, move, f"m-{number}", None)
    assert metrics.ACTIONS.value("war", "person") == before + 4
