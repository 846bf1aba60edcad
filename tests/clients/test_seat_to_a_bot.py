"""A seat a bot plays, as its player reads it in the `tapis` terminal client, in English and
French: their turn timer ran out (live, then on coming back with `tapis join`: the client reads
the table's events from its first), and a seat the table's backend hands over (ReplaceSeat),
read by the seat's former holder and by the other seat's.

The terminal has no door for a ticket (a seat token a backend hands out): a seat's new holder
after ReplaceSeat plays it in the web client (tests/browser/test_seat_to_the_computer.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis_clients import seats_file
from tapis_service.observe.clock import ManualClock
from tests.clients.terminal import (
    BACKEND,
    StartTerminal,
    backend_war,
    cli_to_move,
    target,
    view,
    war_for_two,
)
from tests.support.server import ServerFactory

SAID = {
    "en": {
        "banner": "Your time ran out: a bot plays your seat. Press t to take it back.",
        "time_ran_out": "your time ran out: a bot plays for you until you",
        "come_back": "You left seat 1 (bo) of this table: take it back? [Y/n]",
        "taken_back": "│you take your seat back",
        "bea": "Bea gets seat 0: a bot plays it until they take it",
        "nobody": "a bot plays seat 0 from now on",
        "given_away": "this seat was given to someone else",
    },
    "fr": {
        "banner": "Votre temps est écoulé : un robot joue à votre place. Appuyez sur t pour la",
        "time_ran_out": "votre temps est écoulé : un robot joue pour vous jusqu'à ce",
        "come_back": "Vous avez quitté la place 1 (bo) de cette table : la reprendre ? [O/n]",
        "taken_back": "│vous reprenez votre place",
        "bea": "Bea reçoit la place 0 : un robot la joue jusqu'à ce",
        "nobody": "un robot joue désormais la place 0",
        "given_away": "cette place a été donnée à quelqu'un d'autre",
    },
}
"""What the terminal says, in each of its languages (a log line's start: the log wraps)."""

LANGUAGES = ["en", "fr"]


@pytest.mark.parametrize("language", LANGUAGES)
async def test_a_timed_out_seat_is_said_live_then_again_on_coming_back(
        make_server: ServerFactory, terminal: StartTerminal, language: str) -> None:
    said = SAID[language]
    clock = ManualClock()
    h = await make_server(clock=clock)
    game_id, token = await war_for_two(h, turn_ms=5000)
    term = await terminal("join", game_id, "--target", target(h), "--name", "bo",
                          "--lang", language)
    await cli_to_move(h, game_id, token, term, language)
    clock.advance(5000)  # the CLI's seat runs out of time: a bot plays it, and keeps it
    await term.wait_for(lambda text: said["banner"] in text and said["time_ran_out"] in text,
                        "the banner and the log's line")
    assert await term.quit() == 0  # the player goes away; the bot keeps the seat
    assert (await view(h, game_id)).seats[1].bot_controlled
    again = await terminal("join", game_id, "--target", target(h), "--lang", language)
    await again.wait_for(said["come_back"])
    again.type("\r")
    await again.wait_for(lambda text: said["banner"] in text and said["time_ran_out"] in text,
                         "the banner and the log's line, read from the table's history")
    again.type("t")
    await again.wait_for(said["taken_back"])
    assert not (await view(h, game_id)).seats[1].bot_controlled
    await again.wait_for(lambda text: said["banner"] not in text, "the banner gone")


@pytest.mark.parametrize("language", LANGUAGES)
async def test_a_seat_its_backend_hands_over_is_said_to_its_former_holder_and_the_others(
        make_server: ServerFactory, terminal: StartTerminal, tmp_path: Path,
        language: str) -> None:
    """The CLI plays seat 1: the backend gives seat 0 to Bea, then to nobody (a line each),
    then gives seat 1 away. The former holder's stream ends before that SeatReplaced, with its
    token revoked: the client says so, forgets the seat and exits 1."""
    said = SAID[language]
    h, created = await backend_war(make_server, tmp_path)
    game_id = created.game.game_id
    term = await terminal("join", game_id, "--target", target(h), "--name", "bo",
                          "--lang", language)
    await cli_to_move(h, game_id, created.seat_tokens[0].seat_token, term, language)
    await h.stub.ReplaceSeat(pb.ReplaceSeatRequest(game_id=game_id, seat=0, player_id="u-9",
                                                   display_name="Bea"), metadata=BACKEND)
    await term.wait_for(said["bea"])
    await h.stub.ReplaceSeat(pb.ReplaceSeatRequest(game_id=game_id, seat=0), metadata=BACKEND)
    await term.wait_for(said["nobody"])
    await h.stub.ReplaceSeat(pb.ReplaceSeatRequest(game_id=game_id, seat=1, player_id="u-2"),
                             metadata=BACKEND)
    assert await term.exit_status() == 1
    await term.wait_for(said["given_away"])
    assert seats_file.find(game_id, tmp_path / "seats.json") is None
