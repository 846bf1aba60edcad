"""Turn timers always fire: whenever a table is live and awaits a seat under a turn limit,
exactly one armed timer stands for each of its deadlines, whatever led there.

The stuck tables of issue 32 (a War table idle past its deadline for good) came from a timer
that woke a millisecond before its deadline by the server's clock (uvloop counts whole
milliseconds of libuv's clock, floored at another phase than ``SystemClock.now_ms``): the
engine refused the early ``Timeout``, and the fired timer stayed in ``deadline_timers`` under a
key still wanted, so no later ``rearm`` armed it again. The state machine below checks the
invariant after every step of random sequences of actions, timeouts, reclaims, replaces,
restarts, rests and wakes, for every game of the registry, on a journaling store.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import shutil
import tempfile
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from tapis_engine import table as tbl
from tapis_engine.errors import RuleError
from tapis_engine.registry import GAMES, descriptor_for
from tapis_service.observe.clock import ManualClock, SystemClock, TimerHandle
from tapis_service.observe.errors import ServiceError
from tapis_service.stores.sqlite_store import SqliteStore
from tapis_service.tables.host import GameHost
from tapis_service.tables.resting import restable
from tapis_service.tables.session import Session
from tests.support.server import TEST_SETTINGS
from tests.support.tables import live_of

TURN_MS = 3_000


# --- the clock: a timer never runs before its time ------------------------------------------


class _Handle:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FlooringLoop:
    """A loop whose timers count whole milliseconds of its own clock, as libuv's do: a timer
    armed ``d`` ms from now is due when the loop's floored millisecond reaches the floored
    millisecond of arming plus ``d``, so it may run up to a millisecond early."""

    def __init__(self, monotonic: list[int]) -> None:
        self.monotonic = monotonic  # ns, shared with the clock under test
        self.timers: list[tuple[int, Callable[[], None], _Handle]] = []

    def is_running(self) -> bool:
        return True

    def call_soon(self, callback: Callable[[], None]) -> _Handle:
        return self.call_later(0, callback)

    def call_later(self, delay: float, callback: Callable[[], None]) -> _Handle:
        handle = _Handle()
        self.timers.append((self.monotonic[0] // 1_000_000 + round(delay * 1000), callback,
                            handle))
        return handle

    def run_due(self) -> None:
        """Run the timers due by the loop's floored millisecond."""
        now = self.monotonic[0] // 1_000_000
        due = [t for t in self.timers if t[0] <= now]
        self.timers = [t for t in self.timers if t[0] > now]
        for _, callback, handle in due:
            if not handle.cancelled:
                callback()


def test_the_system_clock_never_runs_a_timer_before_its_time_by_its_own_reading() -> None:
    # the wall anchor's sub-millisecond phase (0.7 ms) differs from the loop's (0): floored
    # apart, the loop's millisecond turns 0.7 ms before the clock's
    monotonic = [5_000_000_000]
    clock = SystemClock(wall_ns=lambda: 1_700_000_000_000_700_000 + monotonic[0],
                        monotonic_ns=lambda: monotonic[0])
    clock._loop = FlooringLoop(monotonic)  # type: ignore[assignment]
    loop: FlooringLoop = clock._loop  # type: ignore[assignment]
    monotonic[0] += 400_000  # the clock's reading: ...001.1 ms; the loop's: ...000.4 ms
    at = clock.now_ms() + TURN_MS
    ran: list[int] = []
    clock.call_at(at, lambda: ran.append(clock.now_ms()))
    monotonic[0] += (TURN_MS - 1) * 1_000_000 + 600_000  # the loop's ms is due, not the clock's
    loop.run_due()
    assert clock.now_ms() == at - 1 and ran == []  # woke early: it waits for the rest
    monotonic[0] += 1_000_000
    loop.run_due()
    assert ran == [at]


def test_a_cancelled_system_timer_that_woke_early_never_runs() -> None:
    monotonic = [5_000_000_000]
    clock = SystemClock(wall_ns=lambda: 1_700_000_000_000_700_000 + monotonic[0],
                        monotonic_ns=lambda: monotonic[0])
    loop = FlooringLoop(monotonic)
    clock._loop = loop  # type: ignore[assignment]
    monotonic[0] += 400_000
    ran: list[int] = []
    handle = clock.call_at(clock.now_ms() + 10, lambda: ran.append(1))
    monotonic[0] += 9_600_000
    loop.run_due()  # early: armed again
    handle.cancel()
    monotonic[0] += 5_000_000
    loop.run_due()
    assert ran == []


# --- the stuck table: a timer that fires a millisecond early --------------------------------


class EarlyClock(ManualClock):
    """A manual clock whose timers fire a millisecond before their time (as a loop that
    rounds its own clock may), but never before the next millisecond."""

    def call_at(self, at_ms: int, callback: Callable[[], None]) -> TimerHandle:
        early = at_ms - 1 if at_ms - self.now_ms() > 1 else at_ms
        return super().call_at(early, callback)


async def _war_for_two(host: GameHost) -> Session:
    rules = GAMES["war"]
    session = await host.create(kind="war", seats=2, seed=7, turn_time_ms=TURN_MS,
                                bots=[None, None], options=rules.default_options(),
                                stacked_deck=None, stacked_first=None)
    for seat in range(2):
        await host.join(session.game_id, seat, f"p{seat}")
    return host.get(session.game_id)


async def _settled(host: GameHost) -> None:
    """Every journal write and server move in flight has settled."""
    for _ in range(100):
        writes = [w for s in list(live_of(host).values()) for w in s.writes]
        if not writes and not host.actor._moves:
            return
        await asyncio.gather(*writes, return_exceptions=True)
        await host.actor.settle()
        await asyncio.sleep(0)
    raise AssertionError("writes still in flight")


@pytest.mark.parametrize("moves_before", [0, 1, 2, 3])
async def test_a_turn_timer_that_fires_a_millisecond_early_still_plays_its_seat(
        tmp_path: Path, moves_before: int) -> None:
    clock = EarlyClock()
    store = SqliteStore(tmp_path, synchronous="OFF")
    host = GameHost(TEST_SETTINGS, clock, store=store)
    try:
        session = await _war_for_two(host)
        for number in range(moves_before):  # the trick stops at a different point each time
            seat = next(iter(session.rules.to_act(session.table.state)))
            move = tbl.Act(seat, session.rules.legal_actions(session.table.state, seat)[0])
            await host.actor.submit(session, seat, move, f"r{number}", None)
            session = host.get(session.game_id)
        (idle, _), = session.table.deadlines
        version = session.table.version
        clock.advance(TURN_MS + 10)
        await _settled(host)
        session = host.get(session.game_id)
        assert session.table.version > version  # the idle seat was played
        assert session.table.seats[idle].taken_over
        assert all(deadline > clock.now_ms() for _, deadline in session.table.deadlines)
    finally:
        await host.close()


# --- the invariant, over every game ----------------------------------------------------------


def _armed_deadlines(clock: ManualClock) -> list[tuple[Session, int, int, int]]:
    """(session, seat, at, when) of every turn timer armed on ``clock`` (any host's)."""
    found = []
    for when, callback in clock.armed():
        if isinstance(callback, functools.partial) \
                and getattr(callback.func, "__name__", "") == "_deadline_due":
            session, seat, at = callback.args
            found.append((session, seat, at, when))
    return found


class TimerMachine(RuleBasedStateMachine):
    """One table of ``KIND`` on a journaling store, driven at random."""

    KIND = "war"
    host: GameHost
    """The server (opened by ``create``, again by each restart)."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.directory = Path(tempfile.mkdtemp(prefix="tapis-timers-"))
        self.clock = ManualClock()
        self.game_id = ""
        self.persons: list[int] = []
        self.requests = 0

    def _open(self) -> GameHost:
        store = SqliteStore(self.directory, synchronous="OFF")
        return GameHost(TEST_SETTINGS, self.clock, store=store)

    def _run(self, work: Coroutine[Any, Any, Any]) -> Any:
        return self.loop.run_until_complete(work)

    def teardown(self) -> None:
        if hasattr(self, "host"):
            self._run(self.host.close())
        self.loop.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    async def _session(self) -> Session:
        """The table, loaded back from rest when it rests (a call's ``find``)."""
        return await self.host.find(self.game_id)

    async def _input(self, seat: int, move: tbl.Input) -> None:
        session = await self._session()
        self.requests += 1
        with contextlib.suppress(RuleError, ServiceError):  # a refusal changes nothing
            await self.host.actor.submit(session, seat, move, f"r{self.requests}", None)
        await _settled(self.host)

    @initialize(data=st.data(), early=st.booleans())
    def create(self, data: st.DataObject, early: bool) -> None:
        """A table of ``KIND`` with a person at least; its clock's timers fire on time, or a
        millisecond early (as uvloop's may)."""
        self.clock = EarlyClock() if early else ManualClock()
        self.host = self._open()
        rules = GAMES[self.KIND]
        game = descriptor_for(self.KIND)
        seats = data.draw(st.integers(rules.min_seats, rules.max_seats), label="seats")
        bots: list[str | None] = [
            data.draw(st.sampled_from([None, rules.bot_strategies[0]]), label=f"bot {seat}")
            for seat in range(seats)]
        bots[data.draw(st.integers(0, seats - 1), label="a person")] = None
        self.persons = [seat for seat, bot in enumerate(bots) if bot is None]

        async def create() -> None:
            session = await self.host.create(
                kind=self.KIND, seats=seats, seed=data.draw(st.integers(0, 2**32)),
                turn_time_ms=TURN_MS, bots=bots, options=game.short_options,
                stacked_deck=None, stacked_first=None)
            self.game_id = session.game_id
            for seat in self.persons:
                await self.host.join(session.game_id, seat, f"p{seat}")
            await _settled(self.host)

        self._run(create())

    @rule(data=st.data())
    def act(self, data: st.DataObject) -> None:
        """A person plays one of its legal moves (a bot-controlled seat's is refused)."""
        session = self._run(self._session())
        seat = data.draw(st.sampled_from(self.persons), label="seat")
        legal = session.rules.legal_actions(session.table.state, seat) \
            if session.table.state is not None else []
        if not legal:
            return
        action = legal[data.draw(st.integers(0, len(legal) - 1), label="action")]
        self._run(self._input(seat, tbl.Act(seat, action)))

    @rule(data=st.data(), ms=st.sampled_from([1, TURN_MS // 2, TURN_MS - 1, TURN_MS,
                                              TURN_MS + 1, 2 * TURN_MS]))
    def act_while_timers_fire(self, data: st.DataObject, ms: int) -> None:
        """A person's move is applied and its write still pending while time passes (the
        timers fire against a table whose last input is not committed yet)."""

        async def interleaved() -> None:
            session = await self._session()
            seat = data.draw(st.sampled_from(self.persons), label="seat")
            legal = session.rules.legal_actions(session.table.state, seat) \
                if session.table.state is not None else []
            if not legal:
                return
            action = legal[data.draw(st.integers(0, len(legal) - 1), label="action")]
            self.requests += 1
            waiting = asyncio.ensure_future(self.host.actor.submit(
                session, seat, tbl.Act(seat, action), f"r{self.requests}", None))
            await asyncio.sleep(0)  # applied; its journal write queued
            self.clock.advance(ms)
            await asyncio.gather(waiting, return_exceptions=True)
            await _settled(self.host)

        self._run(interleaved())

    @rule(ms=st.sampled_from([0, 1, 500, TURN_MS - 1, TURN_MS, TURN_MS + 1, 2 * TURN_MS]))
    def time_passes(self, ms: int) -> None:
        """Time passes: the due timers fire (turn timers play ``Timeout``, bots move)."""

        async def passes() -> None:
            self.clock.advance(ms)
            await _settled(self.host)
            # as a loop would: a timer armed meanwhile (once a write committed) for a time
            # already passed runs at once
            while any(when <= self.clock.now_ms() for when, _ in self.clock.armed()):
                self.clock.advance(0)
                await _settled(self.host)

        self._run(passes())
        session = self.host.tables.session(self.game_id)
        if session is not None:  # no deadline is left behind, passed and unplayed
            assert all(at > self.clock.now_ms() for _, at in session.table.deadlines), \
                (session.table.deadlines, self.clock.now_ms())

    @rule(data=st.data())
    def reclaim(self, data: st.DataObject) -> None:
        seat = data.draw(st.sampled_from(self.persons), label="seat")
        self._run(self._input(seat, tbl.Reclaim(seat)))

    @rule(data=st.data())
    def next_game(self, data: st.DataObject) -> None:
        seat = data.draw(st.sampled_from(self.persons), label="seat")
        self._run(self._input(seat, tbl.NextGame(seat)))

    @rule(data=st.data())
    def replace(self, data: st.DataObject) -> None:
        """The backend gives a seat to someone else (or to nobody): a bot plays it until its
        holder reclaims it."""
        seat = data.draw(st.sampled_from(self.persons), label="seat")
        holder = data.draw(st.sampled_from(["", f"player-{seat}"]), label="holder")

        async def replace() -> None:
            session = await self._session()
            self.requests += 1
            with contextlib.suppress(RuleError, ServiceError):
                await self.host.actor.replace(session, seat, holder, "", f"x{self.requests}")
            await _settled(self.host)

        self._run(replace())

    @rule()
    def restart(self) -> None:
        """The server stops and starts again: its tables are recovered from the store."""

        async def restart() -> None:
            await _settled(self.host)
            await self.host.close()
            self.host = self._open()
            await self.host.recover()
            await _settled(self.host)

        self._run(restart())

    @precondition(lambda self: self.host.tables.session(self.game_id) is not None
                  and restable(self.host.tables.session(self.game_id)))
    @rule()
    def rest(self) -> None:
        """The finished table leaves memory (the next rule's call wakes it)."""

        async def rest() -> None:
            self.host.shelf.rest(self.host.tables.session(self.game_id))
            await _settled(self.host)

        self._run(rest())

    @rule()
    def wake(self) -> None:
        self._run(self._session())
        self._run(_settled(self.host))

    @invariant()
    def one_armed_timer_per_deadline(self) -> None:
        if not self.game_id:
            return
        armed = _armed_deadlines(self.clock)
        session = self.host.tables.session(self.game_id)
        assert all(s is session for s, *_ in armed), "a timer of a table no longer served"
        assert all(when in (at, at - 1) for _, _, at, when in armed), "armed for another time"
        expected = sorted(session.table.deadlines) if session is not None else []
        assert sorted((seat, at) for _, seat, at, _ in armed) == expected
        if session is not None:
            assert sorted(session.deadline_timers) == expected


@pytest.mark.parametrize("kind", sorted(GAMES))
def test_one_armed_timer_per_deadline_whatever_the_path(kind: str) -> None:
    machine = type(f"TimerMachine_{kind}", (TimerMachine,), {"KIND": kind})
    run_state_machine_as_test(machine, settings=settings(
        max_examples=20, stateful_step_count=25, deadline=None, derandomize=True,
        suppress_health_check=[HealthCheck.too_slow]))
