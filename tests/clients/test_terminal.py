"""The `tapis` CLI in a real terminal (a pty at 80x24, its screen emulated by pyte): every game
fits, War draws the bataille beside both players and ends on a window listing the series, the
countdown runs, a resize redraws, French texts, one seat per terminal, quitting and coming back,
keys typed ahead thrown away, a bot taking a seat over, a seat its backend gives away, watching,
and Bataille Corse's slaps."""

from __future__ import annotations

import asyncio
import re
import signal
import termios
import uuid
from pathlib import Path

import pytest

from tapis.v1 import bataille_corse_pb2 as corse_pb2
from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import war_pb2
from tapis.v1.cards_pb2 import Card
from tapis_clients import seats_file
from tapis_service.observe.clock import ManualClock
from tests.clients.terminal import (
    BACKEND,
    PATIENCE_S,
    REVEAL,
    StartTerminal,
    Terminal,
    backend_war,
    cli_to_move,
    target,
    view,
    war_for_two,
)
from tests.support.calls import auth, person_seats
from tests.support.server import Harness, ServerFactory

FLIP = pb.Action(bataille_corse=corse_pb2.BatailleCorseAction(
    flip=corse_pb2.BatailleCorseFlip()))
COUNTDOWN = re.compile(r"\b(\d):(\d\d)\b")
END_WINDOW = re.compile(r"Game \d+ is over|Partie \d+ terminée")


def row(text: str, name: str) -> str:
    """The screen's first row naming ``name``."""
    return next((line for line in text.splitlines() if name in line), "")


def full_deck(first: list[Card]) -> list[Card]:
    """52 cards, ``first`` on top, the rest in order."""
    top = {(c.rank, c.suit) for c in first}
    return first + [Card(rank=r, suit=s) for s in (1, 2, 3, 4) for r in range(2, 15)  # type: ignore[arg-type]
                    if (r, s) not in top]


async def the_only_table(h: Harness) -> str:
    listed = await h.stub.ListGames(pb.ListGamesRequest(include_finished=True))
    (game,) = listed.games
    return game.game_id


async def settled(h: Harness, game_id: str, term: Terminal, token: str) -> str:
    """Wait until the screen shows the table as the server has it (both decks) with the CLI's
    menu, or the end window."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + PATIENCE_S
    while loop.time() < give_up:
        text = term.text
        if END_WINDOW.search(text):
            return text
        table = await view(h, game_id, token)
        shown = [re.search(r"(?:deck|paquet) (\d+)", row(text, name))
                 for name in ("(you)", "bot")]
        if [int(m.group(1)) if m else -1 for m in shown] == list(table.war.deck_sizes) \
                and ("reveal your top card" in text or "retourner votre" in text):
            return text
        await term.next_update()
    raise AssertionError(f"the screen never settled:\n{term.text}")


async def test_a_whole_war_game_ends_on_a_window_listing_the_series(
        make_server: ServerFactory, terminal: StartTerminal) -> None:
    h = await make_server()
    term = await terminal("play", "war", "--points", "2", "--seed", "2", "--target", target(h),
                          "--name", "ana", "--turn-time-ms", "0")
    text = await term.wait_for("reveal your top card")
    game_id = await the_only_table(h)
    token = seats_file.find(game_id, term_state(term)).token  # type: ignore[union-attr]
    assert term.rows()[0].startswith(" Bataille"), text  # the title on the first row
    assert "ana (you)" in text and "basic bot" in text  # people, not seats
    assert re.search(r"series: you \(0\) · basic bot \(0\)$", text, re.M)  # from game 1
    while not END_WINDOW.search(text):
        term.type("r")
        text = await settled(h, game_id, term, token)
    assert "Game 1 is over: " in text
    winner = (await view(h, game_id)).series[0].winners[0]
    assert ("you win" if winner == 0 else "basic bot wins") in text  # the winner named
    assert re.search(r"game 1 +(you win|basic bot wins) +\d–\d +\(reached 2 points\)", text), text
    assert "Enter: next game" in text
    term.type("\r")  # the next game of the series
    text = await term.wait_for(lambda text: text.startswith(" Bataille · game 2")
                               and re.search(r"series: you \((0\) · basic bot \(1|1\) · "
                                             r"basic bot \(0)\)", text) is not None,
                               "game 2 and the series")
    assert await term.quit() == 0
    await term.wait_for(f"`tapis join {game_id}` takes it back")


def term_state(term: Terminal) -> Path:
    return term.state_dir / "seats.json"


async def test_a_tie_shows_the_bataille_bubble_beside_both_players(
        make_server: ServerFactory, terminal: StartTerminal) -> None:
    h = await make_server()
    tie = [Card(rank=10, suit=1), Card(rank=10, suit=2),  # both players' top cards: a tie
           Card(rank=2, suit=1), Card(rank=3, suit=1),  # face down
           Card(rank=9, suit=1), Card(rank=5, suit=1)]  # face up: seat 0 wins
    game_id, token = await war_for_two(h, deck=full_deck(tie))
    term = await terminal("join", game_id, "--target", target(h), "--name", "bo")
    await cli_to_move(h, game_id, token, term)
    term.type("r")
    text = await term.wait_for(lambda text: "Bataille !" in row(text, "tester")
                               and "Bataille !" in row(text, "bo (you)")
                               and "waiting for tester" in text, "two bubbles")
    assert "this trick: tester 10♣   you 10♦" in text
    await h.stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=REVEAL),
                              metadata=auth(token))
    await term.wait_for("reveal your top card")
    term.type("r")  # the bataille's face-down and face-up cards
    text = await term.wait_for("last trick: tester 10♣ ▩ 9♣   you 10♦ ▩ 5♣  → tester")
    assert "Bataille !" not in row(text, "tester") and "Bataille !" not in row(text, "bo")


async def test_the_countdown_runs_beside_the_player_to_act(
        make_server: ServerFactory, terminal: StartTerminal) -> None:
    h = await make_server()
    term = await terminal("play", "war", "--target", target(h), "--name", "ana")
    text = await term.wait_for(lambda text: COUNTDOWN.search(row(text, "ana (you)")) is not None,
                               "a countdown beside the player")
    first = COUNTDOWN.search(row(text, "ana (you)"))
    assert first is not None and first.group(0) in ("0:15", "0:14")  # on by default: 15 s
    await term.wait_for(lambda text: (m := COUNTDOWN.search(row(text, "ana (you)"))) is not None
                        and m.group(0) != first.group(0), "the countdown moving on")
    assert (await view(h, await the_only_table(h))).settings.turn_time_limit_ms == 15_000


async def test_too_small_asks_for_more_and_a_resize_redraws(
        make_server: ServerFactory, terminal: StartTerminal) -> None:
    h = await make_server()
    term = await terminal("play", "war", "--target", target(h), "--name", "ana",
                          "--turn-time-ms", "0", size=(60, 20))
    await term.wait_for("Enlarge the terminal to at least 64×22 (now 60×20)")
    term.resize(80, 24)
    text = await term.wait_for("reveal your top card")
    assert "Enlarge" not in text
    term.resize(70, 21)
    await term.wait_for("Enlarge the terminal to at least 64×22 (now 70×21)")


async def test_french_texts_with_lang_fr(make_server: ServerFactory,
                                         terminal: StartTerminal) -> None:
    h = await make_server()
    term = await terminal("play", "war", "--points", "1", "--seed", "3", "--target", target(h),
                          "--name", "ana", "--lang", "fr", "--turn-time-ms", "0")
    text = await term.wait_for(lambda text: all(shown in text for shown in (
        "retourner votre carte du dessus", "ana (vous)", "robot simple", "q quitter")),
        "the table in French")
    game_id = await the_only_table(h)
    token = seats_file.find(game_id, term_state(term)).token  # type: ignore[union-attr]
    while not END_WINDOW.search(text):
        term.type("r")
        text = await settled(h, game_id, term, token)
    assert "Partie 1 terminée" in text and re.search(r"partie 1 +(vous gagnez|robot simple gagne)",
                                                     text), text


async def test_french_from_the_environment(make_server: ServerFactory,
                                           terminal: StartTerminal) -> None:
    h = await make_server()
    term = await terminal("play", "war", "--target", target(h), "--name", "ana",
                          environ={"LANG": "fr_FR.UTF-8"})
    await term.wait_for("retourner votre carte du dessus")


FRENCH_SLIPS = [
    (re.compile(r"[^\s\d][:;!?](\s|$)", re.MULTILINE), "no space before : ; ! ?"),
    (re.compile(r"\b(basic|reflex|heuristic|sloppy|random)\b"), "an English robot name"),
    (re.compile(r"(?<![\w/])[JQK][♣♦♥♠]"), "English court cards (V D R in French)"),
    (re.compile(r"\b1 \w+s\b"), "a plural after 1"),
    (re.compile(r"\b(tour|round)\b"), "a round not called a manche"),
    (re.compile(r"×="), "the sheet's 2×=20"),
]
"""What a French player stumbled on, in the issue (#33) that listed them."""


def french_slips(text: str) -> list[str]:
    """What a French reader would stumble on in ``text`` (the events' box drawn aside)."""
    inner = "\n".join(line.strip("│╭╮╰╯─ ") for line in text.splitlines())
    return [f"{why}: {match.group(0)!r}" for pattern, why in FRENCH_SLIPS
            for match in pattern.finditer(inner)]


def game_cases() -> list[tuple[str, ...]]:
    """Every game the clients know (the registry), at its largest table that fits 80x24."""
    from tapis_clients import games
    from tapis_engine.registry import DESCRIPTORS

    seats = {pb.GameKind.Value("GAME_KIND_" + d.kind.replace("-", "_").upper()):
             d.rules.max_seats for d in DESCRIPTORS}
    cases = []
    for game in games.GAMES:
        extra = ("--bot-speed", "60") if game.reflexes else ()
        cases.append((game.commands[0], "--players", str(min(4, seats[game.kind])), *extra))
    return cases


@pytest.mark.parametrize("args", game_cases(), ids=lambda args: args[0])
async def test_every_game_reads_in_french_at_80_by_24(
        make_server: ServerFactory, terminal: StartTerminal, args: tuple[str, ...]) -> None:
    h = await make_server()
    term = await terminal("play", *args, "--seed", "5", "--target", target(h), "--name", "ana",
                          "--turn-time-ms", "0", "--lang", "fr")
    text = await term.wait_for(lambda text: "q quitter" in text and "ana (vous)" in text
                               and "robot" in text, "the table in French")
    await term.wait_for(lambda text: "partie 1" in text and "Entrée = 1" in text, "a move")
    text = term.text
    assert not french_slips(text), (french_slips(text), text)
    series = next(line for line in text.splitlines() if "série :" in line)
    assert series.rstrip().endswith(")"), text  # on one line, even at four
    assert french_slips("défi: 1 cartes, robot heuristic, J♥, tour 1, 2×=20") == [
        "no space before : ; ! ?: 'i: '", "an English robot name: 'heuristic'",
        "English court cards (V D R in French): 'J♥'", "a plural after 1: '1 cartes'",
        "a round not called a manche: 'tour'", "the sheet's 2×=20: '×='"]
    assert await term.quit() == 0


@pytest.mark.parametrize(("kind", "players"), [("basra", 3), ("basra", 4), ("boutons", 3),
                                               ("boutons", 4)])
async def test_each_player_has_a_name_a_hand_and_a_score_apart(
        make_server: ServerFactory, terminal: StartTerminal, kind: str, players: int) -> None:
    """At 3 and 4 players, a name never runs into a number: each row is the name, then the
    cards in hand (a count, or Boutons' laid-out cards), then the score, in columns."""
    h = await make_server()
    term = await terminal("play", kind, "--players", str(players), "--seed", "5", "--target",
                          target(h), "--name", "ana", "--turn-time-ms", "0")
    text = await term.wait_for(lambda text: "q quit" in text and "heuristic bot 2" in text,
                               "the table")
    names = ["ana (you)", "heuristic bot", *(f"heuristic bot {n}" for n in range(2, players))]
    for name in names:
        row = re.compile(r"^ *(▶ )?" + re.escape(name) + r"( ⓓ| ★)? {2,}(\S+)", re.MULTILINE)
        found = row.search(text)
        assert found, (name, text)
        if kind == "basra":  # name · in hand · [team] · cards · basras · score
            assert found.group(3).isdigit(), (name, text)
        else:  # name · laid-out cards · buttons · score
            assert found.group(3)[-1] in "♣♦♥♠", (name, text)
            line = text[found.start():].splitlines()[0]
            assert re.search(r"  score \d+$", line), (name, text)
    assert "ⓓ" in text if kind == "basra" else "★" in text
    if kind == "basra":
        header = next(line for line in text.splitlines() if "in hand" in line)
        assert all(word in header for word in ("cards", "basras", "score")), header
        assert ("team" in header) == (players == 4), header
    assert await term.quit() == 0


async def test_a_persons_name_is_asked_once_then_kept(
        make_server: ServerFactory, terminal: StartTerminal) -> None:
    h = await make_server()
    term = await terminal("play", "war", "--target", target(h), "--turn-time-ms", "0",
                          environ={"TAPIS_NAME": ""})
    await term.wait_for("Your name at the tables (others see it):")
    term.type("Zoé\r")
    await term.wait_for("Zoé (you)")
    assert await term.quit() == 0
    again = await terminal("play", "war", "--target", target(h), "--turn-time-ms", "0",
                           environ={"TAPIS_NAME": ""})
    text = await again.wait_for("(you)")
    assert "Zoé (you)" in text and "Your name" not in text
    assert await again.quit() == 0
    named = await terminal("play", "war", "--target", target(h), "--turn-time-ms", "0",
                           environ={"TAPIS_NAME": "Ada"})
    await named.wait_for("Ada (you)")
    assert await named.quit() == 0


MENUS = {"war": "reveal your top card", "bataille-corse": "flip your top card",
         "basra": "play ", "boutons": " rc "}
"""What each game's menu shows first (a test fails for a game the clients know that is not
here, so a new game is added)."""


@pytest.mark.parametrize("args", game_cases(), ids=lambda args: args[0])
async def test_every_game_fits_80_by_24(make_server: ServerFactory, terminal: StartTerminal,
                                        args: tuple[str, ...]) -> None:
    menu = MENUS[args[0]]
    h = await make_server()
    term = await terminal("play", *args, "--seed", "5", "--target", target(h), "--name", "ana",
                          "--turn-time-ms", "0")
    text = await term.wait_for(lambda text: menu in text and "q quit" in text, menu)
    rows = term.rows()
    from tapis_clients import games

    assert rows[0].startswith(" " + games.by_command(args[0]).title), text
    assert "q quit" in rows[-1], text  # the last row still on screen
    assert "ana (you)" in text
    assert await term.quit() == 0


async def test_two_terminals_never_share_a_seat(make_server: ServerFactory,
                                                terminal: StartTerminal) -> None:
    h = await make_server()
    game_id, token = await war_for_two(h)
    first = await terminal("join", game_id, "--target", target(h), "--name", "bo")
    await cli_to_move(h, game_id, token, first)
    # No seat is free: said at once, without a question nor a name asked for.
    second = await terminal("join", game_id, "--target", target(h), environ={"TAPIS_NAME": ""})
    await second.wait_for("Seat 1 of this table is in use in another terminal of yours.")
    text = await second.wait_for("No other seat of this table is free.")
    assert await second.exit_status() == 1
    assert "Take a free seat" not in text and "Your name" not in text, text
    first.type("r")  # the first terminal still plays its seat
    await first.wait_for(lambda text: "waiting for tester" in text, "its move taken")
    assert (await view(h, game_id)).awaiting_seats[0] == 0


async def test_a_seat_in_use_offers_a_free_one_when_the_table_has_one(
        make_server: ServerFactory, terminal: StartTerminal) -> None:
    h = await make_server()
    created = await h.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, seat_configs=person_seats(2), seed=4,
        request_id=uuid.uuid4().hex))
    game_id = created.game.game_id
    first = await terminal("join", game_id, "--target", target(h), "--name", "bo")
    await first.wait_for("waiting for players: 1 of 2 seats taken")
    second = await terminal("join", game_id, "--target", target(h), "--name", "al")
    await second.wait_for("Seat 0 of this table is in use in another terminal of yours.")
    await second.wait_for("Take a free seat instead? [Y/n]")
    second.type("\r")
    await second.wait_for("al (you)")
    assert [seat.display_name for seat in (await view(h, game_id)).seats] == ["bo", "al"]
    assert await second.quit() == 0
    assert await first.quit() == 0


async def test_quit_mid_game_then_take_the_seat_back(
        make_server: ServerFactory, terminal: StartTerminal, tmp_path: Path) -> None:
    h = await make_server()
    game_id, token = await war_for_two(h)
    term = await terminal("join", game_id, "--target", target(h), "--name", "bo")
    modes_before = termios.tcgetattr(term.slave)
    await cli_to_move(h, game_id, token, term)
    assert not termios.tcgetattr(term.slave)[3] & termios.ICANON  # raw keys while playing
    assert await term.quit() == 0
    await term.wait_for(f"`tapis join {game_id}` takes it back")
    assert term.slave_modes()[3] == modes_before[3]  # the terminal is given back as it was
    held = seats_file.find(game_id, tmp_path / "seats.json")
    assert held is not None and held.seat == 1
    # Coming back: the seat is offered, Enter takes it, and the table is where it was.
    again = await terminal("join", game_id, "--target", target(h))
    await again.wait_for("You left seat 1 (bo) of this table: take it back? [Y/n]")
    again.type("\r")
    text = await again.wait_for("reveal your top card")
    assert "bo (you)" in text
    again.type("\x03")  # Ctrl-C leaves too, with the shell's status for it
    assert await again.exit_status() == 130
    assert again.slave_modes()[3] == modes_before[3]
    assert (await view(h, game_id)).seats[1].display_name == "bo"


async def test_a_sigterm_leaves_as_ctrl_c_does_and_gives_the_terminal_back(
        make_server: ServerFactory, terminal: StartTerminal) -> None:
    """A ``kill`` (SIGTERM) of the client mid-game leaves the table as q and Ctrl-C do: the
    terminal's line modes back, the seat kept for ``tapis join``, the shell's status for it."""
    h = await make_server()
    game_id, token = await war_for_two(h)
    term = await terminal("join", game_id, "--target", target(h), "--name", "bo")
    modes_before = termios.tcgetattr(term.slave)
    await cli_to_move(h, game_id, token, term)
    term.process.send_signal(signal.SIGTERM)
    assert await term.exit_status() == 128 + signal.SIGTERM
    await term.wait_for(f"`tapis join {game_id}` takes it back")
    assert term.slave_modes()[3] == modes_before[3]


async def test_a_key_typed_while_waiting_is_thrown_away(
        make_server: ServerFactory, terminal: StartTerminal) -> None:
    h = await make_server()
    game_id, token = await war_for_two(h)
    term = await terminal("join", game_id, "--target", target(h))
    table = await cli_to_move(h, game_id, token, term)
    term.type("r")  # the CLI plays; now the test's seat is awaited
    await term.wait_for("waiting for tester")
    term.type("r")  # typed ahead while it is not the CLI's move
    await h.stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=REVEAL),
                              metadata=auth(token))
    moved = await view(h, game_id)
    assert moved.version == table.version + 2
    await term.wait_for("reveal your top card")
    term.type("9")  # keys are taken in order: once this one is refused, any "r" was seen
    await term.wait_for("no such move: 9")
    after = await view(h, game_id)
    assert after.version == moved.version
    assert list(after.awaiting_seats) == [1]


async def test_a_timeout_takeover_shows_a_banner_with_the_key_to_take_the_seat_back(
        make_server: ServerFactory, terminal: StartTerminal) -> None:
    clock = ManualClock()
    h = await make_server(clock=clock)
    game_id, token = await war_for_two(h, turn_ms=5000)
    term = await terminal("join", game_id, "--target", target(h), "--name", "bo")
    await cli_to_move(h, game_id, token, term)
    clock.advance(5000)  # the CLI's seat runs out of time: a bot plays it, and keeps it
    await term.wait_for(lambda text: "a bot plays your seat. Press t to take it back." in text
                        and "your time ran out: a bot plays for you" in text, "the banner")
    term.type("t")
    await term.wait_for(lambda text: "Press t" not in text, "the banner gone")
    assert not (await view(h, game_id)).seats[1].bot_controlled
    await term.wait_for("│you take your seat back")


async def test_a_seat_its_backend_gives_away_ends_the_screen_saying_so(
        make_server: ServerFactory, terminal: StartTerminal, tmp_path: Path) -> None:
    h, created = await backend_war(make_server, tmp_path)
    game_id = created.game.game_id
    term = await terminal("join", game_id, "--target", target(h), "--name", "bo")
    await cli_to_move(h, game_id, created.seat_tokens[0].seat_token, term)
    await h.stub.ReplaceSeat(pb.ReplaceSeatRequest(game_id=game_id, seat=1, player_id="u-2"),
                             metadata=BACKEND)
    assert await term.exit_status() == 1
    await term.wait_for("this seat was given to someone else")
    assert seats_file.find(game_id, tmp_path / "seats.json") is None


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
        await term.wait_for(f"Game {game} is over")
        await close_the_window(term)  # a spectator closes it; the series goes on
        if game == 1:
            await h.stub.SubmitAction(pb.SubmitActionRequest(
                game_id=game_id, action=pb.Action(start_next_game=pb.StartNextGame())),
                metadata=auth(tokens[0]))
            await term.wait_for("game 2 starts")
    board = (await view(h, game_id)).scoreboard
    text = await term.wait_for(f"series: ana ({board.wins[0]}) · bo ({board.wins[1]})")
    assert "(you)" not in text and "watching" in text
    assert term.process.returncode is None  # still watching
    assert await term.quit() == 0


async def close_the_window(term: Terminal) -> None:
    """Enter until the end-of-game window is gone: a key that reaches the client before the
    window takes keys is discarded as typed ahead (as it must be), so it is sent again, a
    bounded number of times, each after the screen had time to change."""
    for _ in range(20):
        if "Enter: close" not in term.text:
            return
        term.type("\r")
        await term.next_update()
    assert "Enter: close" not in term.text, term.text


async def corse_for_two(h: Harness, first: list[Card]) -> tuple[str, str]:
    deck = [*full_deck(first), Card(rank=15), Card(rank=15)]
    created = await h.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_BATAILLE_CORSE, seats=2, seat_configs=person_seats(2),
        stacked_deck=deck, request_id=uuid.uuid4().hex))
    game_id = created.game.game_id
    token = (await h.stub.JoinGame(pb.JoinGameRequest(
        game_id=game_id, seat=0, display_name="tester"))).seat_token
    return game_id, token


async def test_flipping_out_of_turn_says_whose_turn_it_is(
        make_server: ServerFactory, terminal: StartTerminal) -> None:
    h = await make_server()
    game_id, token = await corse_for_two(h, [Card(rank=2, suit=1), Card(rank=4, suit=2)])
    term = await terminal("join", game_id, "--target", target(h))
    await term.wait_for(lambda text: "(you)" in text and "deck 27" in text, "the game started")
    await h.stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=FLIP),
                              metadata=auth(token))
    await term.wait_for("flip your top card")
    term.type("f")  # the CLI's turn: it flips
    await term.wait_for("pile (2)")
    flipped = await view(h, game_id)
    term.type("f")  # now seat 0 is due to flip
    await term.wait_for("not your turn: tester flips")
    assert (await view(h, game_id)).version == flipped.version
    assert await term.quit() == 0


async def test_a_slap_is_captioned_with_its_combination_and_cards(
        make_server: ServerFactory, terminal: StartTerminal) -> None:
    h = await make_server()
    game_id, token = await corse_for_two(h, [Card(rank=5, suit=1), Card(rank=5, suit=2)])
    term = await terminal("join", game_id, "--target", target(h))
    await term.wait_for(lambda text: "(you)" in text and "deck 27" in text, "the game started")
    await h.stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=FLIP),
                              metadata=auth(token))
    await term.wait_for("flip your top card")
    term.type("f")  # 5♦ on 5♣: a double
    await term.wait_for(lambda text: "pile (2)" in text and "slap the pile" in text
                        and "flip your top card" not in text, "the slap alone in the menu")
    term.type("s")
    # the caption and the log line come from the same change, drawn in one or two frames
    await term.wait_for(lambda text: "Double! 5♣ 5♦ — you slapped first in " in text
                        and "you take the pile (double): 2 cards" in text,
                        "the slap's caption and its log line")


async def test_tapis_play_seats_the_servers_bots_at_the_reaction_asked(
        make_server: ServerFactory, terminal: StartTerminal, tmp_path: Path) -> None:
    """`tapis play` plays against the server's bots, the web table's (issue 33.1), at the
    reaction time --bot-speed asks for (``bot_reaction_ms``); none of the CLI's own."""
    h = await make_server()
    term = await terminal("play", "corse", "--bot-speed", "0.05", "--seed", "3", "--target",
                          target(h), "--name", "ana")
    await term.wait_for("flip your top card")
    game_id = await the_only_table(h)
    held = seats_file.find(game_id, tmp_path / "seats.json")
    assert held is not None and held.bots == []
    table = await view(h, game_id)
    assert table.settings.bot_reaction_ms == 50
    assert [s.type for s in table.seats] == [pb.SEAT_TYPE_PERSON, pb.SEAT_TYPE_BOT]
    term.type("f")
    await term.wait_for("reflex bot flips")  # the server's bot answers
    assert await term.quit() == 0
