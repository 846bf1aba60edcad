"""The `tapis` CLI in a real terminal (a pty, its screen emulated): a whole War game, quitting
mid-game and coming back, a key typed ahead thrown away, a timeout takeover drawn as it
happens."""

from __future__ import annotations

import re
import termios
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from tapis.v1 import bataille_corse_pb2 as corse_pb2
from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import war_pb2
from tapis.v1.cards_pb2 import Card
from tapis_clients import seats_file
from tapis_service.clock import ManualClock
from tests.clients.terminal import Terminal
from tests.support.calls import auth, person_seats
from tests.support.server import Harness, ServerFactory

REVEAL = pb.Action(war=war_pb2.WarAction(reveal=war_pb2.WarReveal()))
StartTerminal = Callable[..., Awaitable[Terminal]]


@pytest.fixture
async def terminal(tmp_path: Path) -> AsyncIterator[StartTerminal]:
    started: list[Terminal] = []

    async def start(*args: str) -> Terminal:
        term = await Terminal.start(*args, state_dir=tmp_path)
        started.append(term)
        return term

    yield start
    for term in started:
        await term.close()


def target(h: Harness) -> str:
    return f"127.0.0.1:{h.running.port}"


async def war_for_two(h: Harness, turn_ms: int = 0) -> tuple[str, str]:
    """A War table for two people; the test sits at seat 0 (its token), the CLI gets seat 1."""
    created = await h.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, seed=4, seat_configs=person_seats(2),
        turn_time_limit_ms=turn_ms, request_id=uuid.uuid4().hex,
        war=war_pb2.WarOptions(target_points=20)))
    joined = await h.stub.JoinGame(pb.JoinGameRequest(
        game_id=created.game.game_id, seat=0, display_name="tester"))
    return created.game.game_id, joined.seat_token


async def view(h: Harness, game_id: str) -> pb.GameView:
    return (await h.stub.GetGame(pb.GetGameRequest(game_id=game_id))).game


async def cli_to_move(h: Harness, game_id: str, token: str, term: Terminal) -> pb.GameView:
    """Play the test's seat until the CLI's seat (1) is awaited and its menu is on screen."""
    await term.wait_for(lambda text: "(you)" in text and "waiting for the other" not in text,
                        "the CLI seated and the game started")
    table = await view(h, game_id)
    if table.awaiting_seats[0] == 0:
        await h.stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=REVEAL),
                                  metadata=auth(token))
        table = await view(h, game_id)
    assert table.awaiting_seats[0] == 1
    await term.wait_for(lambda text: "your move" in text and term.version() == table.version,
                        f"the menu at v{table.version}")
    return table


async def test_a_whole_war_game(make_server: ServerFactory, terminal: StartTerminal) -> None:
    h = await make_server()
    term = await terminal("play", "war", "--points", "3", "--seed", "2", "--target", target(h),
                          "--name", "ana")
    last = -1
    reveals = 0
    while True:
        text = await term.wait_for(
            lambda text, last=last: re.search(r"you (win|lose): ", text) is not None
            or ("your move" in text and term.version() > last),
            "a new move or the end")
        if re.search(r"you (win|lose): ", text):
            assert " wins: " not in text  # said to its reader, not as "seat 0 wins"
            break
        assert "Bataille · " in text  # the panel's title: the game's name
        assert "seat 1: bot" in text and "ana (you)" in text  # names on screen
        assert "target 3 points" in text
        last = term.version()
        term.type("r")
        reveals += 1
    assert reveals >= 3
    await term.wait_for(lambda text: re.search(r"game 1 over — you (win|lose): reached 3 points",
                                               text) is not None, "the end said to its reader")
    # The game over screen offers the next game of the series; q leaves.
    text = await term.wait_for("start the next game of the series")
    assert "✓ fixed before play" in text  # the seed checked against its commitment
    assert "dealt as the creator chose" in text  # --seed: a chosen deal, and it says so
    assert "took the trick (" in text  # the log says who took each trick
    term.type("q")
    assert await term.exit_status() == 0
    await term.wait_for("takes it back")


async def test_quit_mid_game_then_take_the_seat_back(
        make_server: ServerFactory, terminal: StartTerminal, tmp_path: Path) -> None:
    h = await make_server()
    game_id, token = await war_for_two(h)
    term = await terminal("join", game_id, "--target", target(h), "--name", "bo")
    modes_before = termios.tcgetattr(term.slave)
    await cli_to_move(h, game_id, token, term)
    assert not termios.tcgetattr(term.slave)[3] & termios.ICANON  # cbreak while playing
    term.type("q")
    assert await term.exit_status() == 0
    await term.wait_for(f"tapis join {game_id}")
    assert term.slave_modes()[3] == modes_before[3]  # the terminal is given back as it was
    held = seats_file.find(game_id, tmp_path / "seats.json")
    assert held is not None and held.seat == 1
    # Coming back: the seat is offered, Enter takes it, and the table is where it was.
    again = await terminal("join", game_id, "--target", target(h))
    await again.wait_for("take it back? [Y/n]")
    again.type("\r")
    text = await again.wait_for("your move")
    assert "seat 1: bo (you)" in text
    again.type("\x03")  # Ctrl-C quits too, with the shell's status for it
    assert await again.exit_status() == 130
    assert again.slave_modes()[3] == modes_before[3]
    assert (await view(h, game_id)).seats[1].display_name == "bo"


async def test_a_key_typed_while_waiting_is_thrown_away(
        make_server: ServerFactory, terminal: StartTerminal) -> None:
    h = await make_server()
    game_id, token = await war_for_two(h)
    term = await terminal("join", game_id, "--target", target(h))
    table = await cli_to_move(h, game_id, token, term)
    term.type("r")  # the CLI plays; now the test's seat is awaited
    await term.wait_for(lambda text: "waiting for seat 0" in text
                        and term.version() == table.version + 1, "waiting for seat 0")
    term.type("r")  # typed ahead while it is not the CLI's move
    await h.stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=REVEAL),
                              metadata=auth(token))
    moved = await view(h, game_id)
    await term.wait_for(lambda text: "your move" in text and term.version() == moved.version,
                        "the new menu")
    term.type("9")  # keys are taken in order: once this one is refused, any "r" was seen
    await term.wait_for("no such move: 9")
    after = await view(h, game_id)
    assert after.version == moved.version
    assert list(after.awaiting_seats) == [1]


async def test_a_timeout_takeover_is_redrawn(make_server: ServerFactory,
                                            terminal: StartTerminal) -> None:
    clock = ManualClock()
    h = await make_server(clock=clock)
    game_id, token = await war_for_two(h, turn_ms=5000)
    term = await terminal("join", game_id, "--target", target(h))
    table = await cli_to_move(h, game_id, token, term)
    clock.advance(5000)  # the CLI's seat runs out of time: a bot plays it, and keeps it
    text = await term.wait_for("take your seat back from the bot")
    assert "seat 1's time ran out" in text
    assert term.version() > table.version
    term.type("1")
    await term.wait_for("seat 1 is back in human hands")
    seat = (await view(h, game_id)).seats[1]
    assert not seat.bot_controlled


async def test_watch_shows_a_waiting_table_then_follows_the_series(
        make_server: ServerFactory, terminal: StartTerminal) -> None:
    h = await make_server()
    created = await h.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, seed=4, seat_configs=person_seats(2),
        request_id=uuid.uuid4().hex, war=war_pb2.WarOptions(target_points=1)))
    game_id = created.game.game_id
    term = await terminal("watch", game_id, "--target", target(h))
    await term.wait_for("waiting for players: 0 of 2 seats taken")
    tokens = [(await h.stub.JoinGame(pb.JoinGameRequest(
        game_id=game_id, display_name=name))).seat_token for name in ("ana", "bo")]
    for game in (1, 2):
        while (table := await view(h, game_id)).status == pb.GAME_STATUS_IN_PROGRESS:
            await h.stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=REVEAL),
                                      metadata=auth(tokens[table.awaiting_seats[0]]))
        await term.wait_for(f"game {game} over")
        if game == 1:  # the spectator stays for the next game of the series
            await h.stub.SubmitAction(pb.SubmitActionRequest(
                game_id=game_id, action=pb.Action(start_next_game=pb.StartNextGame())),
                metadata=auth(tokens[0]))
            await term.wait_for("game 2 starts")
    text = await term.wait_for("series after 2 game(s)")
    assert "seat 0: ana" in text and "seat 1: bo" in text
    assert term.process.returncode is None  # still watching
    term.type("q")
    assert await term.exit_status() == 0


async def test_flipping_out_of_turn_says_whose_turn_it_is(
        make_server: ServerFactory, terminal: StartTerminal) -> None:
    h = await make_server()
    low = [Card(rank=2, suit=1), Card(rank=4, suit=2)]  # 2♣ to seat 0, 4♦ to seat 1: no face
    deck = [Card(rank=r, suit=s) for s in (1, 2, 3, 4) for r in range(2, 15)  # type: ignore[arg-type]
            if (r, s) not in ((2, 1), (4, 2))] + [Card(rank=15), Card(rank=15)]
    created = await h.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_BATAILLE_CORSE, seats=2, seat_configs=person_seats(2),
        stacked_deck=low + deck, request_id=uuid.uuid4().hex))
    game_id = created.game.game_id
    token = (await h.stub.JoinGame(pb.JoinGameRequest(
        game_id=game_id, seat=0, display_name="tester"))).seat_token
    term = await terminal("join", game_id, "--target", target(h))
    await term.wait_for(lambda text: "(you)" in text and "waiting for the other" not in text,
                        "the CLI seated and the game started")
    flip = pb.Action(bataille_corse=corse_pb2.BatailleCorseAction(
        flip=corse_pb2.BatailleCorseFlip()))
    await h.stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=flip),
                              metadata=auth(token))
    flipped = await view(h, game_id)
    await term.wait_for(lambda text: term.version() == flipped.version, "seat 0's flip")
    term.type("f")  # the CLI's turn: it flips
    await term.wait_for(lambda text: term.version() == flipped.version + 1, "its own flip")
    term.type("f")  # now seat 0 is due to flip
    await term.wait_for("not your turn: seat 0 flips")
    assert (await view(h, game_id)).version == flipped.version + 1
    term.type("q")
    assert await term.exit_status() == 0
