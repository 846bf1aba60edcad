"""The table actor's shielding: chosen by the store, and the same answers either way."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tapis_engine import table as tbl
from tapis_engine.registry import rules_for
from tapis_service.observe.clock import ManualClock
from tapis_service.stores.sqlite_store import SqliteStore
from tapis_service.tables.host import GameHost
from tapis_service.tables.session import Session
from tapis_service.tables.shielding import Shield
from tapis_service.tables.table_actor import SHIELDED
from tests.support.server import TEST_SETTINGS


def _legal(session: Session, seat: int) -> object:
    """The seat's first legal action."""
    return session.rules.legal_actions(session.table.state, seat)[0]


async def _war(host: GameHost) -> tuple[str, list[int]]:
    rules = rules_for("war")
    assert rules is not None
    session = await host.create(kind="war", seats=2, seed=7, turn_time_ms=0, bots=[None, None],
                                options=rules.default_options(), stacked_deck=None,
                                stacked_first=None)
    for seat in range(2):
        await host.join(session.game_id, seat, f"p{seat}")
    return session.game_id, [0, 1]


async def _play(host: GameHost, game_id: str, submit: object, rounds: int) -> list[object]:
    answers = []
    for number in range(rounds):
        session = host.get(game_id)
        rules = session.rules
        seat = next(s for s in range(2) if rules.legal_actions(session.table.state, s))
        move = tbl.Act(seat, rules.legal_actions(session.table.state, seat)[0])
        applied = await submit(session, seat, move, f"r-{number}", None)  # type: ignore[operator]
        answers.append((applied.version, [logged.event for logged in applied.events]))
    return answers


async def test_a_store_that_keeps_nothing_gets_the_methods_unwrapped_with_the_same_answers(
) -> None:
    bound, wrapped = GameHost(TEST_SETTINGS, ManualClock()), GameHost(TEST_SETTINGS, ManualClock())
    first, _ = await _war(bound)
    second, _ = await _war(wrapped)
    session = bound.get(first)
    calls = {"submit": (session, 0, tbl.Act(0, _legal(session, 0)), "", None),
             "claim": (session, 0, "p0", ""), "replace": (session, 0, "", "", ""),
             "rotate_spectator": (session, "")}
    assert set(calls) == set(SHIELDED)
    for name, args in calls.items():  # called by the caller itself: its input's coroutine
        called = getattr(bound.actor, name)(*args)
        assert asyncio.iscoroutine(called) and not isinstance(called, asyncio.Future)
        called.close()
    shield = Shield(keeps_journal=True)  # what a journaling store's actor does with it

    def through_the_wrapper(*args: object) -> object:
        return shield.run(wrapped.actor._submit(*args, None))  # type: ignore[arg-type,call-arg]

    assert await _play(bound, first, bound.actor.submit, 6) == \
        await _play(wrapped, second, through_the_wrapper, 6)


async def test_a_journaling_store_runs_each_input_in_a_task_of_its_own(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)
    host = GameHost(TEST_SETTINGS, ManualClock(), store=store)
    game_id, _ = await _war(host)
    session = host.get(game_id)
    seat = next(s for s in range(2) if session.rules.legal_actions(session.table.state, s))
    move = tbl.Act(seat, _legal(session, seat))
    waiting = host.actor.submit(session, seat, move, "r-0", None)
    assert isinstance(waiting, asyncio.Future)  # shielded: the task goes on if the wait ends
    await waiting
    store.close()
