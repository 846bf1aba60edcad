"""The table: seats, series, turn timers, bot takeover and reclaim (RULES.md common rulings)."""

from __future__ import annotations

import json

import pytest

from tapis_engine import table as tbl
from tapis_engine import table_codec
from tapis_engine.errors import Reason, RuleError
from tapis_engine.protocol import GameSetup
from tapis_engine.war import RULES, Reveal, WarOptions


def new(turn_ms: int = 0, target: int = 50, bots: tuple[str | None, ...] = (None, None),
        seed: int = 11) -> tbl.Table:
    table, _ = tbl.new_table(RULES, GameSetup(2, seed, WarOptions(target)), list(bots),
                             turn_ms, now_ms=0)
    return table


def claimed(turn_ms: int = 0, target: int = 50) -> tuple[tbl.Table, list[tbl.TableEvent]]:
    table = new(turn_ms, target)
    table, events = tbl.step(RULES, table, tbl.Claim(0), 0)
    table, more = tbl.step(RULES, table, tbl.Claim(1), 0)
    return table, events + more


def test_game_starts_when_every_person_seat_is_taken() -> None:
    table = new()
    assert not table.started
    with pytest.raises(RuleError) as refused:
        tbl.step(RULES, table, tbl.Act(0, Reveal()), 0)
    assert refused.value.reason is Reason.GAME_NOT_STARTED
    table, events = claimed()
    assert table.started and table.game_number == 1
    kinds = [type(e.body).__name__ for e in events]
    assert kinds[:3] == ["SeatClaimed", "SeatClaimed", "GameStarted"]
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))


def test_a_taken_seat_cannot_be_claimed_again() -> None:
    table, _ = tbl.step(RULES, new(), tbl.Claim(0), 0)
    with pytest.raises(RuleError):
        tbl.step(RULES, table, tbl.Claim(0), 0)


def test_bot_seats_sit_at_once() -> None:
    table = new(bots=("basic", "basic"))
    assert table.started
    assert tbl.pending_bot_seats(RULES, table) == [table.state.first]


def test_deadline_set_for_the_awaited_person_and_timeout_only_after_it() -> None:
    table, _ = claimed(turn_ms=1000)
    first = table.state.first
    assert table.deadlines == ((first, 1000),)
    with pytest.raises(RuleError):
        tbl.step(RULES, table, tbl.Timeout(first), 999)
    table, events = tbl.step(RULES, table, tbl.Timeout(first), 1000)
    assert isinstance(events[0].body, tbl.SeatTakenOver)
    assert events[0].body.until_reclaimed
    assert table.seats[first].taken_over
    assert table.deadlines == ((1 - first, 2000),)


def test_resume_gives_each_person_awaited_at_least_a_whole_turn_from_then() -> None:
    # docs/rulings.md, "Turn timers while nobody can play": the clocks stand still
    table, _ = claimed(turn_ms=1000)
    first = table.state.first
    assert not tbl.resume_due(table, 0) and tbl.resume_due(table, 1)
    with pytest.raises(RuleError) as refused:  # a whole turn left: nothing to resume
        tbl.step(RULES, table, tbl.Resume(), 0)
    assert refused.value.reason is Reason.NOT_ALLOWED_NOW
    resumed, events = tbl.step(RULES, table, tbl.Resume(), 5000)  # past its deadline
    assert resumed.deadlines == ((first, 6000),)
    assert [e.body for e in events] == [tbl.TurnTimersResumed(((first, 6000),))]
    assert events[0].sequence == table.next_sequence
    assert resumed.next_sequence == table.next_sequence + 1
    assert resumed.version == table.version  # no move: a move chosen before still applies
    with pytest.raises(RuleError):  # the timer runs from the resume
        tbl.step(RULES, resumed, tbl.Timeout(first), 5999)
    taken, _ = tbl.step(RULES, resumed, tbl.Timeout(first), 6000)
    assert taken.seats[first].taken_over
    # the other seat's move keeps the resumed deadline of a seat still awaited (Corse-like
    # tables await several); here the person moves and the next gets a fresh turn
    moved, _ = tbl.step(RULES, resumed, tbl.Act(first, Reveal()), 5500)
    assert moved.deadlines == ((1 - first, 6500),)


def test_resume_keeps_a_deadline_further_than_a_turn_and_skips_tables_without_timers() -> None:
    table, _ = claimed(turn_ms=1000)
    first = table.state.first
    assert tbl.step(RULES, table, tbl.Resume(), 500)[0].deadlines == ((first, 1500),)
    untimed, _ = claimed(turn_ms=0)
    assert not tbl.resume_due(untimed, 10**9)
    with pytest.raises(RuleError):
        tbl.step(RULES, untimed, tbl.Resume(), 10**9)


def test_a_turns_clocks_stop_for_three_interruptions_then_keep_their_deadlines() -> None:
    # docs/rulings.md: a server restarting faster than a turn must not keep a person who left
    # from being timed out for ever
    table, _ = claimed(turn_ms=1000)
    first = table.state.first
    now = 0
    for resumes in range(1, tbl.MAX_RESUMES + 1):
        now += 600  # served again before the deadline the last resume set
        assert tbl.resume_due(table, now)
        table, _ = tbl.step(RULES, table, tbl.Resume(), now)
        assert (table.resumes, table.deadlines) == (resumes, ((first, now + 1000),))
    now += 600
    assert not tbl.resume_due(table, now)  # the fourth time: the deadline is kept
    assert not tbl.resume_due(table, now + 10**6)  # ...even once it has passed
    deadline = table.deadline_of(first)
    assert deadline is not None
    taken, _ = tbl.step(RULES, table, tbl.Timeout(first), deadline)
    assert taken.seats[first].taken_over and taken.resumes == 0
    # a journal written before the bound replays as it was played: a fourth Resume applies
    replayed, _ = tbl.step(RULES, table, tbl.Resume(), now)
    assert replayed.deadlines == ((first, now + 1000),)
    # any move starts the count again
    moved, _ = tbl.step(RULES, table, tbl.Act(first, Reveal()), now)
    assert moved.resumes == 0 and tbl.resume_due(moved, now + 10**6)
    reclaimed, _ = tbl.step(RULES, taken, tbl.Reclaim(first), now)
    assert reclaimed.resumes == 0


def test_the_interruptions_count_is_kept_in_a_snapshot_and_absent_means_none() -> None:
    table, _ = claimed(turn_ms=1000)
    resumed, _ = tbl.step(RULES, table, tbl.Resume(), 5000)
    data = table_codec.encode_table(RULES, resumed)
    assert data["resumes"] == 1 and table_codec.decode_table(RULES, data) == resumed
    assert "resumes" not in table_codec.encode_table(RULES, table)  # records as before
    assert table_codec.decode_table(RULES, table_codec.encode_table(RULES, table)) == table


def test_taken_over_seat_is_played_by_the_bot_until_reclaimed() -> None:
    table, _ = claimed(turn_ms=1000)
    first = table.state.first
    table, _ = tbl.step(RULES, table, tbl.Timeout(first), 1000)
    table, _ = tbl.step(RULES, table, tbl.Act(1 - first, Reveal()), 1100)
    assert table.state.to_move == first
    assert tbl.pending_bot_seats(RULES, table) == [first]
    assert table.deadline_of(first) is None  # the bot needs no timer
    with pytest.raises(RuleError) as refused:
        tbl.step(RULES, table, tbl.Act(first, Reveal()), 1200)
    assert refused.value.reason is Reason.SEAT_BOT_CONTROLLED
    table, events = tbl.step(RULES, table, tbl.Reclaim(first), 1200)
    assert isinstance(events[0].body, tbl.SeatReclaimed)
    assert not table.seats[first].taken_over
    assert table.deadline_of(first) == 2200
    table, _ = tbl.step(RULES, table, tbl.Act(first, Reveal()), 1300)
    with pytest.raises(RuleError) as refused:
        tbl.step(RULES, table, tbl.Reclaim(first), 1300)
    assert refused.value.reason is Reason.SEAT_NOT_BOT_CONTROLLED


def _finish(table: tbl.Table) -> tuple[tbl.Table, list[tbl.TableEvent]]:
    events: list[tbl.TableEvent] = []
    while not table.game_over(RULES):
        seat = next(iter(RULES.to_act(table.state)))
        table, new_events = tbl.step(RULES, table, tbl.Act(seat, Reveal()), 0)
        events += new_events
    return table, events


def test_series_summary_at_every_game_end_and_next_game() -> None:
    table, _ = claimed(target=3)
    with pytest.raises(RuleError) as refused:
        tbl.step(RULES, table, tbl.NextGame(0), 0)
    assert refused.value.reason is Reason.GAME_NOT_OVER
    table, events = _finish(table)
    ended = events[-1].body
    assert isinstance(ended, tbl.GameEnded) and len(ended.records) == 1
    table, events = tbl.step(RULES, table, tbl.NextGame(1), 0)
    assert table.game_number == 2 and isinstance(events[0].body, tbl.GameStarted)
    table, events = _finish(table)
    ended = events[-1].body
    assert [r.number for r in ended.records] == [1, 2]
    board = tbl.scoreboard(2, table.records)
    assert sum(board.wins) + board.draws == 2
    assert table.records[0].seed != table.records[1].seed


def test_same_inputs_same_table_event_for_event_and_snapshot_round_trip() -> None:
    def run() -> tuple[tbl.Table, list[tbl.TableEvent]]:
        table, events = claimed(turn_ms=500, target=5)
        now = 0
        while not table.game_over(RULES):
            seat = next(iter(RULES.to_act(table.state)))
            now += 100
            move: tbl.Input = tbl.Act(seat, Reveal()) if now % 300 else tbl.Timeout(seat)
            if isinstance(move, tbl.Timeout):
                now = table.deadline_of(seat) or now
            if table.seats[seat].taken_over:
                move = tbl.BotMove(seat)
            table, new_events = tbl.step(RULES, table, move, now)
            events += new_events
        return table, events

    first, second = run(), run()
    assert first == second
    data = json.loads(json.dumps(table_codec.encode_table(RULES, first[0])))
    assert table_codec.decode_table(RULES, data) == first[0]


def test_inputs_encode_and_decode() -> None:
    for move in (tbl.Claim(1), tbl.Act(0, Reveal()), tbl.BotMove(1), tbl.Timeout(0),
                 tbl.Reclaim(1), tbl.NextGame(0), tbl.Abandon(), tbl.Resume()):
        data = json.loads(json.dumps(table_codec.encode_input(RULES, move)))
        assert table_codec.decode_input(RULES, data) == move


def test_unknown_bot_and_bad_seat_are_refused() -> None:
    with pytest.raises(RuleError):
        tbl.new_table(RULES, GameSetup(2, 1, WarOptions()), ["genius", None], 0, 0)
    with pytest.raises(RuleError):
        tbl.step(RULES, new(), tbl.Claim(5), 0)


def test_a_replaced_seat_is_played_by_the_bot_until_its_new_holder_reclaims_it() -> None:
    table, _ = claimed(turn_ms=1000)
    first = table.state.first
    table, events = tbl.step(RULES, table, tbl.Replace(first), 500)
    assert [type(e.body) for e in events] == [tbl.SeatReplaced]
    assert events[0].body.seat == first and table.version == 3
    assert table.seats[first].taken_over and table.seats[first].claimed
    assert table.deadline_of(first) is None  # the bot needs no timer
    assert tbl.pending_bot_seats(RULES, table) == [first]
    with pytest.raises(RuleError) as refused:
        tbl.step(RULES, table, tbl.Act(first, Reveal()), 600)
    assert refused.value.reason is Reason.SEAT_BOT_CONTROLLED
    table, events = tbl.step(RULES, table, tbl.Reclaim(first), 600)
    assert isinstance(events[0].body, tbl.SeatReclaimed)
    assert table.deadline_of(first) == 1600
    tbl.step(RULES, table, tbl.Act(first, Reveal()), 700)


def test_replacing_a_free_seat_takes_it_and_may_start_the_game() -> None:
    table, _ = tbl.step(RULES, new(), tbl.Claim(0), 0)
    table, events = tbl.step(RULES, table, tbl.Replace(1), 0)
    assert [type(e.body).__name__ for e in events] == ["SeatReplaced", "GameStarted", *[
        type(e.body).__name__ for e in events[2:]]]
    assert table.started and table.seats[1].taken_over
    assert [e.sequence for e in events] == list(range(2, 2 + len(events)))


def test_a_bot_seat_or_a_seat_that_does_not_exist_is_not_replaced() -> None:
    table = new(bots=(None, "basic"))
    with pytest.raises(RuleError) as bot:
        tbl.step(RULES, table, tbl.Replace(1), 0)
    assert bot.value.reason is Reason.NOT_ALLOWED_NOW
    with pytest.raises(RuleError) as missing:
        tbl.step(RULES, table, tbl.Replace(2), 0)
    assert missing.value.reason is Reason.INVALID_ACTION
    ended, _ = tbl.step(RULES, table, tbl.Abandon(), 0)
    with pytest.raises(RuleError) as abandoned:
        tbl.step(RULES, ended, tbl.Replace(0), 0)
    assert abandoned.value.reason is Reason.GAME_ABANDONED


def test_a_replace_is_journaled_like_any_input() -> None:
    encoded = table_codec.encode_input(RULES, tbl.Replace(1))
    assert encoded == {"input": "Replace", "seat": 1}
    assert table_codec.decode_input(RULES, json.loads(json.dumps(encoded))) == tbl.Replace(1)
