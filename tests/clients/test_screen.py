"""What the interactive client draws and how typed keys name moves."""

from __future__ import annotations

import hashlib
import io
import uuid

import pytest
from rich.console import Console

from tapis.v1 import bataille_corse_pb2 as corse_pb2
from tapis.v1 import boutons_pb2, war_pb2
from tapis.v1 import game_service_pb2 as pb
from tapis.v1.cards_pb2 import Card
from tapis_clients import games
from tapis_clients.cli import prompt_for, resolve_keys
from tapis_clients.games import boutons
from tapis_clients.screen import Screen, fairness_line
from tests.support.calls import auth, person_seats
from tests.support.server import Harness, ServerFactory


def drawn(view: pb.GameView, actions: list[pb.Action], seat: int | None) -> list[str]:
    console = Console(width=100, height=40, file=io.StringIO(), record=True)
    screen = Screen(console, view.kind, seat)
    screen.draw(view, actions, prompt_for(view, actions, ""))
    return console.export_text().rstrip("\n").splitlines()


async def table(h: Harness, kind: int, seats: int = 2) -> tuple[pb.GameView, list[str]]:
    created = await h.stub.CreateGame(pb.CreateGameRequest(
        kind=kind, seats=seats, seed=9, seat_configs=person_seats(seats),  # type: ignore[arg-type]
        request_id=uuid.uuid4().hex))
    tokens = []
    for i in range(seats):
        joined = await h.stub.JoinGame(pb.JoinGameRequest(
            game_id=created.game.game_id, display_name=f"p{i}"))
        tokens.append(joined.seat_token)
    return created.game, tokens


@pytest.mark.parametrize(("seats", "moves"), [(3, 24), (4, 32)])
async def test_the_boutons_menu_fits_a_40_row_terminal(make_server: ServerFactory, seats: int,
                                                       moves: int) -> None:
    h = await make_server()
    created, tokens = await table(h, pb.GAME_KIND_BOUTONS, seats)
    views = [(await h.stub.GetGame(pb.GetGameRequest(game_id=created.game_id),
                                   metadata=auth(token))).game for token in tokens]
    view = max(views, key=lambda v: len(v.legal_actions))
    actions = list(view.legal_actions)
    assert len(actions) == moves
    lines = drawn(view, actions, view.your_seat)
    assert len(lines) <= 40, "\n".join(lines)
    assert any(f"[{moves}/" in line for line in lines)


def test_numbers_and_hotkeys_name_moves() -> None:
    bets = [pb.Action(boutons=boutons_pb2.BoutonsAction(bet=boutons_pb2.BoutonsBet(
        colour=colour, card=Card(rank=11, suit=suit))))  # type: ignore[arg-type]
        for colour in range(1, 4) for suit in range(1, 5)]
    kind = pb.GAME_KIND_BOUTONS
    assert resolve_keys(kind, bets, "", enter=True) == (bets[0], False)
    assert resolve_keys(kind, bets, "1", enter=False) == (None, True)  # 1 or 10, 11, 12?
    assert resolve_keys(kind, bets, "1", enter=True) == (bets[0], False)
    assert resolve_keys(kind, bets, "12", enter=False) == (bets[11], False)
    hotkey = boutons.hotkey(bets[5])
    assert hotkey is not None
    assert resolve_keys(kind, bets, hotkey, enter=False) == (bets[5], False)
    assert resolve_keys(kind, bets, "z", enter=False) == (None, False)
    assert resolve_keys(kind, [], "", enter=True) == (None, False)


async def test_a_waiting_table_says_who_is_missing(make_server: ServerFactory) -> None:
    h = await make_server()
    created = await h.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, seat_configs=person_seats(2),
        request_id=uuid.uuid4().hex))
    await h.stub.JoinGame(pb.JoinGameRequest(game_id=created.game.game_id, display_name="ana"))
    view = (await h.stub.GetGame(pb.GetGameRequest(game_id=created.game.game_id))).game
    text = "\n".join(drawn(view, [], None))
    assert "waiting for players: 1 of 2 seats taken" in text
    assert f"tapis join {view.game_id}" in text
    assert "target 0 points" not in text
    assert "seat 0: ana" in text and "seat 1: open" in text
    assert "keys:" not in text


def test_the_seat_claimed_line_speaks_to_its_reader() -> None:
    event = pb.Event(seat_claimed=pb.SeatClaimed(seat=0, display_name="ana"))
    assert games.describe_event(pb.GAME_KIND_WAR, event, 0) == "you sit at seat 0"
    assert games.describe_event(pb.GAME_KIND_WAR, event, 1) == "ana sits at seat 0"


def test_war_lines_say_who_took_each_trick() -> None:
    """The table shows the trick in play; the log says who took each trick."""
    revealed = pb.Event(war=war_pb2.WarEvent(card_revealed=war_pb2.WarCardRevealed(seat=1)))
    won = pb.Event(war=war_pb2.WarEvent(trick_won=war_pb2.WarTrickWon(seat=1, cards=2)))
    assert games.describe_event(pb.GAME_KIND_WAR, revealed, 0) is None
    assert games.describe_event(pb.GAME_KIND_WAR, won, 0) == "seat 1 took the trick (2 cards)"
    assert games.describe_event(pb.GAME_KIND_WAR, won, 1) == "you took the trick (2 cards)"
    assert games.describe_event(pb.GAME_KIND_WAR, won, None) == \
        "seat 1 took the trick (2 cards)"
    bataille = pb.Event(war=war_pb2.WarEvent(bataille=war_pb2.WarBatailleAnnounced()))
    assert games.describe_event(pb.GAME_KIND_WAR, bataille, 0) == "[bold yellow]Bataille![/]"


def test_the_deal_check_is_shown() -> None:
    committed = hashlib.sha256(b"42:salt").hexdigest()
    playing = pb.GameView(fairness=pb.Fairness(seed_commitment=committed))
    assert "deal committed before play: " + committed[:12] in fairness_line(playing)
    over = pb.GameView(fairness=pb.Fairness(seed_commitment=committed, seed=42,
                                            seed_salt="salt"))
    assert "✓ fixed before play" in fairness_line(over)
    # Checked against what the game's start published, not what the server says at the end.
    assert "✗ does not match" in fairness_line(over, committed="0" * 64)
    chosen = pb.GameView(fairness=pb.Fairness(seed_commitment=committed, deal_chosen=True))
    assert "dealt as the creator chose" in fairness_line(chosen)
    assert fairness_line(pb.GameView()) == ""


def test_the_end_is_said_to_its_reader() -> None:
    assert games.verdict([0], 0) == "you win"
    assert games.verdict([0], 1) == "you lose"
    assert games.verdict([], 1) == "draw"
    assert games.verdict([0, 2], 2) == "you share the win"
    assert games.verdict([1], None, ["ana", "bob"]) == "bob wins"
    assert games.verdict([1], None, ["ana", ""]) == "seat 1 wins"
    assert games.verdict([0, 2], None) == "seat 0 and seat 2 share the win"
    ended = pb.Event(game_ended=pb.GameEnded(
        game_number=1, winners=[0], summary="seat 0 wins: reached 3 points (points 3-1)"))
    assert games.describe_event(pb.GAME_KIND_WAR, ended, 0).startswith(  # type: ignore[union-attr]
        "game 1 over — you win: reached 3 points (points 3-1).")
    assert games.describe_event(pb.GAME_KIND_WAR, ended, 1).startswith(  # type: ignore[union-attr]
        "game 1 over — you lose: reached 3 points")
    assert games.describe_event(pb.GAME_KIND_WAR, ended, None).startswith(  # type: ignore[union-attr]
        "game 1 over — seat 0 wins: reached 3 points")
    assert games.summary_for("seat 0 and seat 2 win with 12 points", [0, 2], 0) == \
        "you share the win with 12 points"
    over = pb.GameView(kind=pb.GAME_KIND_WAR, your_seat=1, war=war_pb2.WarView(
        deck_sizes=[52, 0], points=[0, 0], winner=0,
        end_reason=war_pb2.WAR_END_REASON_ALL_CARDS))
    text = "\n".join(drawn(over, [], 1))
    assert "you lose: holds all 52 cards" in text
    assert "Bataille · " in text and "War" not in text


def test_flipping_out_of_turn_says_whose_turn_it_is() -> None:
    view = pb.GameView(kind=pb.GAME_KIND_BATAILLE_CORSE, your_seat=0,
                       bataille_corse=corse_pb2.BatailleCorseView(turn=2))
    assert games.key_hint(view.kind, view, "f") == "not your turn: seat 2 flips"
    assert games.key_hint(view.kind, view, "z") is None
    view.bataille_corse.turn = 0
    assert games.key_hint(view.kind, view, "f") is None
    assert games.key_hint(pb.GAME_KIND_WAR, view, "f") is None  # a game without hints
