"""A table's lifecycle (lifecycle.py): each transition does what ``TRANSITIONS`` declares —
timers, listing, streams, tokens, ownership confirmed — one it does not declare is refused and
changes nothing, and whatever the sequence of transitions each table is in one state, the
counts kept beside the one map equal a count of it."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tapis_engine import table as tbl
from tapis_engine.protocol import GameSetup
from tapis_engine.registry import rules_for
from tapis_service.codec.adapters import ADAPTERS
from tapis_service.observe.clock import ManualClock
from tapis_service.observe.errors import ServiceError
from tapis_service.stores.store import MemoryStore
from tapis_service.tables.healing import Quarantined
from tapis_service.tables.host import GameHost
from tapis_service.tables.lifecycle import HELD, TRANSITIONS, Tables, TableState, TransitionError
from tapis_service.tables.lobby import Lobby
from tapis_service.tables.ownership import Ownership
from tapis_service.tables.recovery import Restored
from tapis_service.tables.resting import RestingTable, listing_of
from tapis_service.tables.session import Session, Subscriber
from tapis_service.tables.tokens import SeatTokens, token_hash
from tests.support.server import TEST_SETTINGS
from tests.support.tables import live_of, unavailable_of


async def live_table(host: GameHost) -> Session:
    """A War table with both seats taken and a turn limit: its turn timers are armed."""
    rules = rules_for("war")
    assert rules is not None
    session = await host.create(kind="war", seats=2, seed=5, turn_time_ms=30_000,
                                bots=[None, None], options=rules.default_options(),
                                stacked_deck=None, stacked_first=None)
    for seat in (0, 1):
        await host.join(session.game_id, seat, f"p{seat}")
    assert session.deadline_timers  # armed by the commit (after_change)
    return session


async def test_a_failed_write_stops_the_timers_unlists_the_table_and_keeps_its_streams() -> None:
    host = GameHost(TEST_SETTINGS, ManualClock())
    session = await live_table(host)
    stream, _, _ = host.subscribe(session, 0, 0)
    effects = TRANSITIONS[TableState.LIVE, TableState.UNAVAILABLE]
    assert (effects.timers, effects.listing, effects.streams) == ("cancel", "remove", "keep")
    host.tables.failed(session)
    assert host.tables.state_of(session.game_id) is TableState.UNAVAILABLE
    assert unavailable_of(host)[session.game_id] is session and session.game_id not in live_of(host)
    assert not session.deadline_timers and session.game_id not in host.lobby
    assert not stream.closed  # it waits for the rebuild
    host.tables.give_up(session)  # another node owns it: its streams end
    assert host.tables.state_of(session.game_id) is TableState.GONE and stream.closed


async def test_a_discarded_table_ends_its_streams_and_stops_its_timers() -> None:
    host = GameHost(TEST_SETTINGS, ManualClock())
    session = await live_table(host)
    stream, _, _ = host.subscribe(session, None, 0)
    assert host.tables.discard(session.game_id) is session
    assert host.tables.state_of(session.game_id) is TableState.GONE
    assert stream.closed and not session.deadline_timers and session.game_id not in host.lobby
    assert host.tables.held("") == 0


async def test_a_transition_not_declared_is_refused_and_changes_nothing() -> None:
    host = GameHost(TEST_SETTINGS, ManualClock())
    session = await live_table(host)
    assert (TableState.LIVE, TableState.LIVE) not in TRANSITIONS
    with pytest.raises(TransitionError):  # a table in memory is not listed at rest as well
        host.tables.listed_at_rest(session.game_id,
                                   RestingTable.of(session.game_id, listing_of(session), 0))
    assert host.tables.state_of(session.game_id) is TableState.LIVE
    assert live_of(host)[session.game_id] is session and session.deadline_timers
    host.tables.failed(session)
    with pytest.raises(TransitionError):  # failed twice
        host.tables.failed(session)
    assert unavailable_of(host)[session.game_id] is session


# --- every declared transition, on a Tables with recording collaborators ---------------------

S = TableState
KEY = b"k" * 32
OWNER = Ownership(backend="b1")


class Handle:
    """A timer handle that says whether it was cancelled."""

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class RestingMemory(MemoryStore):
    """A store that keeps nothing but takes rest listings (so tables may rest)."""

    def __init__(self) -> None:
        self.rested_ids: list[str] = []

    async def rested(self, game_id: str, listing: dict[str, Any], epoch: int) -> None:
        self.rested_ids.append(game_id)

    async def woken(self, game_id: str, epoch: int) -> None:
        return None

    async def resting(self) -> list[tuple[str, dict[str, Any] | None]]:
        return []


class World:
    """A ``Tables`` whose arming arms a (fake) turn timer and whose restored tables are
    recorded."""

    def __init__(self) -> None:
        self.lobby = Lobby()
        self.tokens = SeatTokens(KEY)
        self.store = RestingMemory()
        self.armed: list[Session] = []
        self.restored: list[Session] = []
        self.tables = Tables(self.lobby, self.tokens, self.store, arm=self.arm,
                             restored=self.restored.append)

    def arm(self, session: Session) -> None:
        self.armed.append(session)
        session.deadline_timers[0, len(self.armed)] = Handle()  # type: ignore[assignment]

    def knows(self, game_id: str, token: str) -> bool:
        """Whether ``token`` is a known seat token of ``game_id``."""
        try:
            self.tokens.seat_of(war_session(game_id), token)
        except ServiceError:
            return False
        return True

    def state(self) -> tuple[Any, ...]:
        """What a refused transition must leave as it was."""
        tables = self.tables
        return ({g: (e.state, e.session, e.resting, e.damaged) for g, e in tables.by_game.items()},
                {s: tables.count(s) for s in HELD}, tables.held(OWNER.backend or ""),
                len(self.lobby), len(self.armed), len(self.restored))


def war_session(game_id: str) -> Session:
    """A War table of two people, not started (as ``GameHost.create`` makes one)."""
    rules = rules_for("war")
    assert rules is not None
    setup = GameSetup(seats=2, seed=5, options=rules.default_options(), stacked_deck=None,
                      stacked_first=None, salt="salt", seed_chosen=True)
    table, events = tbl.new_table(rules, setup, [None, None], 30_000, 0)
    session = Session(game_id=game_id, rules=rules, adapter=ADAPTERS["war"], table=table,
                      created_ms=0, names=["", ""], ownership=OWNER)
    session.record(events)
    return session


def restored(game_id: str) -> Restored:
    """The table as the store gives it back, with one seat token and a request id."""
    return Restored(war_session(game_id), tokens={token_hash(f"loaded-{game_id}"): 1},
                    create_request_id=f"c-{game_id}")


def resting_line(game_id: str) -> RestingTable:
    return RestingTable.of(game_id, listing_of(war_session(game_id)), 3)


def drive(world: World, game_id: str, state: TableState) -> Session | None:
    """Put ``game_id`` in ``state``; the session it holds there (with an open stream, armed
    timers and a known token, as far as that state keeps them)."""
    tables = world.tables
    if state is S.GONE:
        return None
    if state is S.RESTING:
        tables.listed_at_rest(game_id, resting_line(game_id))
        return None
    if state is S.QUARANTINED:
        tables.quarantine(game_id, Quarantined("war", "damaged", OWNER))
        return None
    session = war_session(game_id)
    session.subscribers.add(Subscriber(0, 8))
    tables.begin(session)
    if state is S.CREATING:
        return session
    tables.created(session)
    assert world.armed[-1] is session
    session.bot_timers[1] = Handle()  # type: ignore[assignment]
    world.tokens.add(token_hash(f"held-{game_id}"), game_id, 0)
    if state is S.UNAVAILABLE:
        tables.failed(session)
    return session


def transit(world: World, game_id: str, was: TableState, to: TableState,
            held: Session | None, confirmed: bool = True) -> Session | None:
    """Take ``game_id`` from ``was`` to ``to`` with the method that makes that transition;
    the session it holds then."""
    tables = world.tables
    if to is S.CREATING:
        session = war_session(game_id)
        tables.begin(session)
        return session
    if to is S.QUARANTINED and was is S.LIVE:  # its install failed part way
        assert held is not None
        tables.install_failed(held, Quarantined("war", "install failed", OWNER))
        return None
    if to is S.QUARANTINED:
        tables.quarantine(game_id, Quarantined("war", "damaged again", OWNER))
        return None
    if to is S.LIVE and was is S.CREATING:
        assert held is not None
        tables.created(held, "c1")
        return held
    if to is S.LIVE:
        kept = held if was is S.UNAVAILABLE else None
        return tables.install(restored(game_id), confirmed=confirmed, epoch=7, kept=kept)
    if was is S.CREATING:
        assert held is not None
        tables.not_created(held, in_doubt=to is S.UNAVAILABLE)
        return held if to is S.UNAVAILABLE else None
    if to is S.RESTING:
        if was is S.LIVE:
            assert held is not None
            tables.rest(held)
        else:
            tables.listed_at_rest(game_id, resting_line(game_id))
        return None
    if to is S.UNAVAILABLE:
        assert held is not None
        tables.failed(held)
        return held
    assert to is S.GONE, (was, to)
    if was is S.LIVE:
        assert tables.discard(game_id) is held
    elif was is S.RESTING:
        assert tables.unlist_resting(game_id) is not None
    else:
        assert held is not None
        tables.give_up(held)
    return None


def recount(tables: Tables) -> None:
    """Each table in one state, and the counts kept equal to a count of the map."""
    counted = Counter(entry.state for entry in tables.by_game.values())
    assert {state: tables.count(state) for state in HELD} == {s: counted[s] for s in HELD}
    assert tables.held(OWNER.backend or "") == counted[S.LIVE]
    for game_id, entry in tables.by_game.items():
        assert tables.state_of(game_id) is entry.state is not S.GONE
        assert (tables.session(game_id) is not None) == (entry.state is S.LIVE)


@pytest.mark.parametrize(("was", "to"), list(TRANSITIONS), ids=lambda s: s.value)
async def test_every_declared_transition_does_what_it_declares(was: TableState,
                                                               to: TableState) -> None:
    world, game_id = World(), "g1"
    held = drive(world, game_id, was)
    effects = TRANSITIONS[was, to]
    subscribers = list(held.subscribers) if held is not None else []
    timers = [*held.deadline_timers.values(), *held.bot_timers.values()] if held else []
    listed, armed, known = game_id in world.lobby, len(world.armed), world.knows(game_id,
                                                                                 f"held-{game_id}")
    if effects.ownership:  # refused unless the caller confirmed it owns the table
        before = world.state()
        with pytest.raises(TransitionError):
            transit(world, game_id, was, to, held, confirmed=False)
        assert world.state() == before and world.tables.state_of(game_id) is was
    now = transit(world, game_id, was, to, held)
    assert world.tables.state_of(game_id) is to
    recount(world.tables)
    # timers
    if effects.timers == "cancel":
        assert timers and all(t.cancelled for t in timers)  # type: ignore[attr-defined]
        assert held is not None and not held.deadline_timers and not held.bot_timers
    else:
        assert not any(t.cancelled for t in timers)  # type: ignore[attr-defined]
    if effects.timers == "arm":
        assert world.armed[-1] is now and len(world.armed) == armed + 1
        assert now is not None and now.deadline_timers
    else:
        assert len(world.armed) == armed
    # the ListGames line
    assert game_id in world.lobby if effects.listing in ("live", "rest") \
        else game_id not in world.lobby if effects.listing == "remove" \
        else (game_id in world.lobby) == listed
    # streams
    if effects.streams == "end":
        assert subscribers and all(s.closed for s in subscribers)
    else:
        assert not any(s.closed for s in subscribers)
    if effects.streams == "keep" and to is S.LIVE:
        assert now is not None and held is not None and now.subscribers is held.subscribers
    # tokens
    if effects.tokens == "forget":
        assert known and not world.knows(game_id, f"held-{game_id}")
    else:
        assert world.knows(game_id, f"held-{game_id}") == known
    if effects.tokens == "load":
        assert world.knows(game_id, f"loaded-{game_id}") and world.restored[-1] is now
    else:
        assert not world.knows(game_id, f"loaded-{game_id}") and not world.restored
    if to is S.RESTING and was is S.LIVE:
        await asyncio.sleep(0)  # the rest listing's write, queued: one turn of the loop
        assert world.store.rested_ids == [game_id]


UNDECLARED = [(was, to) for was in TableState for to in TableState
              if (was, to) not in TRANSITIONS]


@pytest.mark.parametrize(("was", "to"), UNDECLARED, ids=lambda s: s.value)
async def test_every_undeclared_transition_is_refused_and_changes_nothing(
        was: TableState, to: TableState) -> None:
    world, game_id = World(), "g1"
    held = drive(world, game_id, was)
    before = world.state()
    with pytest.raises(TransitionError):
        world.tables._move(game_id, to, tuple(TableState), session=held or war_session(game_id),
                           resting=resting_line(game_id), restored=restored(game_id),
                           damaged=Quarantined("war", "damaged", OWNER), confirmed=True)
    assert world.state() == before
    if held is not None:
        assert not any(s.closed for s in held.subscribers)


@pytest.mark.parametrize("to", [S.CREATING, S.LIVE, S.RESTING, S.QUARANTINED],
                         ids=lambda s: s.value)
async def test_a_state_entered_without_what_it_holds_is_refused(to: TableState) -> None:
    world = World()
    before = world.state()
    with pytest.raises(TransitionError):
        world.tables._move("g1", to, (S.GONE,), confirmed=True)
    assert world.state() == before


async def test_a_newer_session_over_a_discarded_one_ends_its_streams() -> None:
    world = World()
    held = drive(world, "g1", S.UNAVAILABLE)
    assert held is not None
    fresh = world.tables.install(restored("g1"), confirmed=True)  # not a rebuild of it
    assert world.tables.session("g1") is fresh and fresh.subscribers is not held.subscribers
    assert all(s.closed for s in held.subscribers)


async def test_a_table_installed_unarmed_is_armed_later_if_still_live() -> None:
    world = World()
    first = world.tables.install(restored("g1"), confirmed=True, arm=False)
    second = world.tables.install(restored("g2"), confirmed=True, arm=False)
    assert not world.armed and world.tables.unarmed() == [first, second]
    world.tables.discard("g2")
    assert world.tables.arm_deferred(first) and not world.tables.arm_deferred(second)
    assert world.armed == [first] and world.tables.unarmed() == []


# --- any sequence of transitions -------------------------------------------------------------

GAMES = ("g0", "g1", "g2")
OPERATIONS = ("begin", "created", "not_created", "in_doubt", "install", "rebuild",
              "unconfirmed", "listed_at_rest", "rest", "failed", "discard", "unlist_resting",
              "give_up", "quarantine", "install_failed", "drop")


def operate(world: World, operation: str, game_id: str) -> None:
    tables = world.tables
    entry = tables.by_game.get(game_id)
    held = entry.session if entry is not None and entry.session is not None \
        else war_session(game_id)
    if operation == "begin":
        tables.begin(war_session(game_id))
    elif operation == "created":
        tables.created(held)
    elif operation in ("not_created", "in_doubt"):
        tables.not_created(held, in_doubt=operation == "in_doubt")
    elif operation in ("install", "rebuild", "unconfirmed"):
        tables.install(restored(game_id), confirmed=operation != "unconfirmed",
                       kept=held if operation == "rebuild" else None)
    elif operation == "listed_at_rest":
        tables.listed_at_rest(game_id, resting_line(game_id))
    elif operation == "quarantine":
        tables.quarantine(game_id, Quarantined("war", "damaged", OWNER))
    elif operation == "install_failed":
        tables.install_failed(held, Quarantined("war", "install failed", OWNER))
    elif operation in ("discard", "unlist_resting", "drop"):
        getattr(tables, operation)(game_id)
    else:
        getattr(tables, operation)(held)


def check_invariants(world: World) -> None:
    tables = world.tables
    recount(tables)
    for game_id in GAMES:
        state = tables.state_of(game_id)
        assert (game_id in world.lobby) == (state in (S.LIVE, S.RESTING))
        live = tables.session(game_id)
        assert (live is not None) == (state is S.LIVE)
        if live is not None:  # armed once it entered LIVE, its timers since kept
            assert live.deadline_timers
        entry = tables.by_game.get(game_id)
        if entry is not None and entry.session is not None and state is not S.LIVE:
            assert not entry.session.deadline_timers  # not armed yet, or cancelled
        if state is not S.LIVE:  # a table's tokens are known while it is live only
            assert not world.knows(game_id, f"loaded-{game_id}")
    assert len(world.lobby) == tables.count(S.LIVE, S.RESTING)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.sampled_from(OPERATIONS), st.sampled_from(GAMES)), max_size=40))
def test_any_sequence_of_transitions_keeps_each_table_in_one_state(
        steps: list[tuple[str, str]]) -> None:
    async def run() -> None:
        world = World()
        for operation, game_id in steps:
            before = world.state()
            try:
                operate(world, operation, game_id)
            except TransitionError:
                assert world.state() == before  # refused: nothing changed
            check_invariants(world)

    asyncio.run(run())
