"""What the screens say, without a terminal: keys naming moves, people named (a long name cut
short), the deal check, refusals in sentences, and the registry of games the clients know."""

from __future__ import annotations

import hashlib
import io
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from rich.console import Console

from tapis.v1 import basra_pb2, boutons_pb2, errors_pb2, war_pb2
from tapis.v1 import bataille_corse_pb2 as corse_pb2
from tapis.v1 import game_service_pb2 as pb
from tapis.v1.cards_pb2 import Card
from tapis_clients import games, i18n, lines, refusals
from tapis_clients.app import TableApp, countdown, resolve_keys
from tapis_clients.games import basra, boutons, corse, war
from tapis_clients.people import Table
from tests.support.calls import refusal_error as refusal
from tests.support.screens import ScriptedServer, screen_rows, scripted, until
from tools import messages

CLIENTS = Path(__file__).resolve().parents[2] / "clients" / "tapis_clients"


def text_of(renderable: object) -> str:
    console = Console(width=80, file=io.StringIO(), record=True)
    console.print(renderable)
    return console.export_text()


def test_numbers_and_keys_name_moves() -> None:
    bets = [pb.Action(boutons=boutons_pb2.BoutonsAction(bet=boutons_pb2.BoutonsBet(
        colour=colour, card=Card(rank=11, suit=suit))))  # type: ignore[arg-type]
        for colour in range(1, 4) for suit in range(1, 5)]
    game = boutons.GAME
    assert resolve_keys(game, bets, "", enter=True) == (bets[0], False)
    assert resolve_keys(game, bets, "1", enter=False) == (None, True)  # 1 or 10, 11, 12?
    assert resolve_keys(game, bets, "1", enter=True) == (bets[0], False)
    assert resolve_keys(game, bets, "12", enter=False) == (bets[11], False)
    assert resolve_keys(game, bets, "bh", enter=False) == (bets[6], False)  # blue on ♥
    assert resolve_keys(game, bets, "z", enter=False) == (None, False)
    assert resolve_keys(game, [], "", enter=True) == (None, False)


def test_boutons_keys_keep_their_meaning_and_every_colour_differs() -> None:
    """A bet's key is its colour's letter and its card's suit, whatever else is legal; each
    colour has its own symbol and hue."""
    bet = pb.Action(boutons=boutons_pb2.BoutonsAction(bet=boutons_pb2.BoutonsBet(
        colour=boutons_pb2.BOUTONS_COLOUR_BLACK, card=Card(rank=12, suit=3))))
    assert boutons.hotkey(bet) == "kh"
    colours = range(1, 10)
    symbols = {boutons.button(c) for c in colours}
    assert len(symbols) == 9
    assert len({re.sub(r"\[[^]]*\]", "", s) for s in symbols}) == 9  # without colour too


def test_people_not_seats() -> None:
    view = pb.GameView(your_seat=0, seats=[
        pb.Seat(seat=0, type=pb.SEAT_TYPE_PERSON, taken=True, display_name="ana"),
        pb.Seat(seat=1, type=pb.SEAT_TYPE_BOT, taken=True, bot_strategy="basic"),
        pb.Seat(seat=2, type=pb.SEAT_TYPE_BOT, taken=True, bot_strategy="basic")])
    table = Table.of(view)
    assert table.names == ["ana", "basic bot", "basic bot 2"]
    assert table.who(0) == "you" and table.who(1) == "basic bot"
    assert table.verdict([0]) == "you win"
    assert table.verdict([1]) == "basic bot wins"
    assert table.verdict([]) == "draw"
    assert table.verdict([0, 2]) == "you share the win with basic bot 2"
    won = pb.Event(war=war_pb2.WarEvent(trick_won=war_pb2.WarTrickWon(seat=1, cards=2)))
    assert war.describe_event(won, table) == "basic bot takes the trick (2 cards)"
    won.war.trick_won.seat = 0
    assert war.describe_event(won, table) == "you take the trick (2 cards)"
    claimed = pb.Event(seat_claimed=pb.SeatClaimed(seat=0, display_name="ana"))
    assert lines.describe_event(war.GAME, claimed, table) == "you sit down"
    resumed = pb.Event(turn_timers_resumed=pb.TurnTimersResumed(
        deadlines=[pb.Deadline(seat=1)]))
    assert lines.describe_event(war.GAME, resumed, table) == \
        "the table is back: the turn timers start again"
    resumed.turn_timers_resumed.deadlines[0].seat = 0
    assert "you have a whole turn" in str(lines.describe_event(war.GAME, resumed, table))
    abandoned = pb.Event(game_abandoned=pb.GameAbandoned(reason=pb.ABANDON_REASON_IDLE))
    assert lines.describe_event(war.GAME, abandoned, table) == \
        "the table was abandoned: nobody played for too long"
    abandoned.game_abandoned.reason = pb.ABANDON_REASON_ENDED_BY_BACKEND
    assert lines.describe_event(war.GAME, abandoned, table) == \
        "the table was closed by the service that set it up"


def test_basra_flags_a_basra_and_names_teams() -> None:
    floor = [Card(rank=3, suit=1), Card(rank=4, suit=2)]
    view = pb.GameView(basra=basra_pb2.BasraView(floor=floor))
    sweep = pb.Action(basra=basra_pb2.BasraAction(play_card=basra_pb2.BasraPlayCard(
        card=Card(rank=7, suit=1), capture=basra_pb2.BasraCapture(cards=floor))))
    part = pb.Action(basra=basra_pb2.BasraAction(play_card=basra_pb2.BasraPlayCard(
        card=Card(rank=3, suit=3), capture=basra_pb2.BasraCapture(cards=floor[:1]))))
    jack = pb.Action(basra=basra_pb2.BasraAction(play_card=basra_pb2.BasraPlayCard(
        card=Card(rank=11, suit=3), capture=basra_pb2.BasraCapture(cards=floor))))
    assert basra.makes_basra(sweep, view) and "Basra!" in basra.describe_action(sweep, 0, view)
    assert not basra.makes_basra(part, view)
    assert not basra.makes_basra(jack, view)  # a jack sweeping two cards: no basra
    table = Table(["ana", "bo", "cy", "di"], 0)
    assert basra.side_name([0, 2], table) == "team ana (you) & cy"
    sheet = basra_pb2.BasraDealScored(deal=1, lines=[basra_pb2.BasraScoreLine(
        side=0, seats=[0, 2], cards=30, most_cards=30, ten_of_diamonds=3, aces=2, jacks=1,
        basras=1, basra_points=10, points=46, total=46)])
    shown = text_of(basra.score_sheet(sheet, table))
    for header in ("most", "10♦", "2♣", "aces", "jacks", "basras", "total"):
        assert header in shown
    assert "×" not in shown and "you & cy: 1 basra" in shown  # points in the grid, count apart
    assert re.search(r"you & cy +30 +30 +3 +0 +2 +1 +10 +46 +46", shown), shown
    i18n.use("fr")
    try:
        french = text_of(basra.score_sheet(sheet, table))
    finally:
        i18n.use("en")
    assert "vous & cy : 1 basra" in french and "×" not in french, french


def test_a_slap_caption_shows_the_combination_its_cards_and_the_time() -> None:
    table = Table(["ana", "bo"], 0)
    memory = corse.CorseMemory()
    for sequence, (card, ms) in enumerate([(Card(rank=9, suit=1), 0),
                                           (Card(rank=9, suit=3), 1000)], 1):
        event = pb.Event(sequence=sequence, bataille_corse=corse_pb2.BatailleCorseEvent(
            card_flipped=corse_pb2.BatailleCorseCardFlipped(seat=sequence - 1, card=card)))
        event.time.FromMilliseconds(ms)
        memory.see(event, table)
    won = pb.Event(sequence=3, bataille_corse=corse_pb2.BatailleCorseEvent(
        pile_won=corse_pb2.BatailleCorsePileWon(
            seat=1, cards=2, reason=corse_pb2.BATAILLE_CORSE_PILE_REASON_COMBINATION,
            combination=corse_pb2.BATAILLE_CORSE_COMBINATION_DOUBLE)))
    won.time.FromMilliseconds(1420)
    memory.see(won, table)
    caption = text_of(memory.caption(table))
    assert caption.strip() == "Double! 9♣ 9♥ — bo slapped first in 0.42 s"
    assert memory.refusal("SLAP_TOO_LATE", table) == "too late: bo slapped first"


@pytest.mark.parametrize(("lang", "said"), [("en", "off: big mac, seven"),
                                            ("fr", "désactivées : big mac, sept")])
def test_the_corse_board_names_the_combinations_switched_off(lang: str, said: str) -> None:
    """From the view's combinations on: nothing said while all six are on."""
    view = pb.GameView(bataille_corse=corse_pb2.BatailleCorseView(
        seats=[corse_pb2.BatailleCorseSeat(seat=seat, deck_size=27) for seat in (0, 1)],
        flip_cap=10_000, combinations=list(corse.COMBINATION_NAMES)))
    i18n.use(lang)
    try:
        assert said.split(":")[0].strip() not in text_of(corse.board(view, 0))
        del view.bataille_corse.combinations[:]
        view.bataille_corse.combinations.extend(
            c for c in corse.COMBINATION_NAMES if c not in (
                corse_pb2.BATAILLE_CORSE_COMBINATION_BIG_MAC,
                corse_pb2.BATAILLE_CORSE_COMBINATION_SEVEN))
        assert said in text_of(corse.board(view, 0))
    finally:
        i18n.use("en")


def test_the_war_row_shows_the_bubble_and_the_countdown() -> None:
    view = pb.GameView(your_seat=1, war=war_pb2.WarView(
        deck_sizes=[20, 21], points=[3, 4], target_points=50, to_move=1, batailles=1))
    table = Table(["ana", "bo"], 1, timers={1: countdown(9_200)})
    rows = text_of(war.board(view, table)).splitlines()
    assert "ana" in rows[0] and "Bataille !" in rows[0]
    assert "bo (you)" in rows[1] and "Bataille !" in rows[1] and "0:10" in rows[1]
    assert countdown(0) == "0:00" and countdown(61_000) == "1:01" and countdown(-5) == "0:00"


def test_the_deal_check_is_shown() -> None:
    committed = hashlib.sha256(b"42:salt").hexdigest()
    playing = pb.GameView(fairness=pb.Fairness(seed_commitment=committed))
    assert any(f"sha256 = {committed}" in line for line in lines.fairness_lines(playing))
    over = pb.GameView(fairness=pb.Fairness(seed_commitment=committed, seed=42,
                                            seed_salt="salt"))
    assert any("✓" in line for line in lines.fairness_lines(over))
    # Checked against what the game's start published, not what the server says at the end.
    assert any("✗" in line for line in lines.fairness_lines(over, committed="0" * 64))
    chosen = pb.GameView(fairness=pb.Fairness(seed_commitment=committed, deal_chosen=True))
    assert any("chosen by the table's creator" in line for line in lines.fairness_lines(chosen))


def test_every_refusal_a_player_can_meet_is_a_sentence() -> None:
    """Every reason of the contract is a sentence, in English and in French, or one of the
    few no client of ours can meet (``UNSAID``, named on purpose)."""
    reasons = {name.removeprefix("ERROR_REASON_") for name in errors_pb2.ErrorReason.keys()}  # noqa: SIM118
    assert set(refusals.SENTENCES) | refusals.UNSAID == reasons
    assert not set(refusals.SENTENCES) & refusals.UNSAID
    french = i18n.load("fr")
    for reason, said in refusals.SENTENCES.items():
        assert refusals.sentence(reason) == said
        assert said and reason not in said and "_" not in said, reason
        assert french.gettext(said) != said, f"{reason}: no French for {said!r}"
    for said in (refusals.REFUSED, refusals.IN_DOUBT):
        assert french.gettext(said) != said


def test_the_registry_matches_the_contract_and_names_each_game_once() -> None:
    kinds = {value for name, value in pb.GameKind.items() if value}
    assert {game.kind for game in games.GAMES} == kinds
    fields = {f.name for f in pb.GameView.DESCRIPTOR.oneofs_by_name["game"].fields}
    assert {game.field for game in games.GAMES} == fields
    assert games.KINDS["war"] == pb.GAME_KIND_WAR and games.command_name(
        pb.GAME_KIND_BATAILLE_CORSE) == "bataille-corse"


@pytest.mark.parametrize("word", messages.games())
def test_a_game_is_named_in_at_most_three_files_outside_its_own(word: str) -> None:
    """Each game is declared once per layer: outside its own files, the clients name it in the
    registry (and a docstring or two), never in a table keyed by game. Every game of the
    registry is checked (its module's name, as a word: "war" in "toward" is not War; a
    command given as an example, ``tapis play war``, names no game in a table)."""
    named = re.compile(rf"\b{word}\b")
    naming = [path for path in CLIENTS.rglob("*") if path.is_file()
              and path.suffix in (".py", ".po", ".pot")
              and word not in str(path.relative_to(CLIENTS))
              and named.search(re.sub(r"tapis (play|create) \w+", "", path.read_text().lower()))]
    assert len(naming) <= 3, naming


def test_french_is_chosen_by_flag_then_environment() -> None:
    assert i18n.language_from("fr", {}) == "fr"
    assert i18n.language_from(None, {"LANG": "fr_FR.UTF-8"}) == "fr"
    assert i18n.language_from(None, {"LC_ALL": "en_US.UTF-8", "LANG": "fr_FR.UTF-8"}) == "en"
    assert i18n.language_from("en", {"LC_ALL": "fr_FR.UTF-8"}) == "en"
    assert i18n.language_from(None, {}) == "en"
    i18n.use("fr")
    assert i18n._("game {number}").format(number=1) == "partie 1"
    assert Table(["ana"], 0).verdict([0]) == "vous gagnez"


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_the_series_line_of_four_long_names_fits_one_line(lang: str) -> None:
    from tapis_clients import lines

    sides = [("you", 0), ("heuristic bot 2", 1), ("heuristic bot 3", 0), ("heuristic bot 4", 2)]
    i18n.use(lang)
    try:
        shown = lines.fitted(sides, 3)
        text = lines._series_text(shown, 3)
        assert len(text) <= lines.SERIES_WIDTH, text
        assert [name.rsplit(" ", 1)[-1] for name, _ in shown[1:]] == ["2", "3", "4"]  # apart
        assert shown[0] == ("you", 0)  # a short name stays whole
        assert lines.fitted(sides[:2], 0) == sides[:2]  # what fits is left alone
    finally:
        i18n.use("en")


class RestoredTable:
    """A table whose stream refuses the screen's cursor for good: it went back to an earlier
    copy of itself (a restore) while the screen followed it."""

    def __init__(self, view: pb.GameView) -> None:
        self.view = view
        self.on_retry: object = None
        self.stub = type("Stub", (), {"GetGame": "GetGame"})()

    async def events(self, game_id: str, after: int = 0, token: str | None = None,
                     on_presence: object = None) -> AsyncIterator[pb.Event]:
        raise refusal(grpc.StatusCode.INVALID_ARGUMENT, "INVALID_CURSOR")
        yield pb.Event()  # an async generator, as the connection's

    async def call(self, method: object, request: object, *args: object,
                   **kwargs: object) -> pb.GetGameResponse:
        return pb.GetGameResponse(game=self.view)


async def test_a_stream_refused_for_good_ends_the_screen_in_a_sentence(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Not a traceback: status 1 and the refusal's sentence (here a table restored behind
    the screen's cursor)."""
    view = pb.GameView(game_id="g", kind=pb.GAME_KIND_WAR, status=pb.GAME_STATUS_IN_PROGRESS,
                       your_seat=0, version=3, seats=[
                           pb.Seat(seat=seat, type=pb.SEAT_TYPE_PERSON, taken=True)
                           for seat in (0, 1)],
                       war=war_pb2.WarView(deck_sizes=[26, 26], points=[0, 0], target_points=50))
    screen = TableApp(RestoredTable(view), view, 0, "t")  # type: ignore[arg-type]
    async with screen.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
    assert screen.return_code == 1
    said = capsys.readouterr().err
    assert "went back to an earlier copy of itself" in said and "Traceback" not in said


def basra_for_four(name: str) -> pb.GameView:
    """Seat 0's view of a Basra deal at four (teams), seat 0 named ``name``, dealing, to
    play, a minute on its clock."""
    seats = [pb.Seat(seat=0, type=pb.SEAT_TYPE_PERSON, taken=True, display_name=name)] + [
        pb.Seat(seat=seat, type=pb.SEAT_TYPE_BOT, taken=True, bot_strategy="heuristic")
        for seat in (1, 2, 3)]
    view = pb.GameView(
        game_id="g", kind=pb.GAME_KIND_BASRA, status=pb.GAME_STATUS_IN_PROGRESS, your_seat=0,
        version=5, seats=seats, awaiting_seats=[0],
        basra=basra_pb2.BasraView(
            seat=0, hand_sizes=[4] * 4, playing_seats=[0, 1, 2, 3], teams=True, deal=1,
            target=101, variant=basra_pb2.BASRA_VARIANT_EGYPTIAN, dealer=0, to_move=0,
            sides=[basra_pb2.BasraSide(side=0, seats=[0, 2], captured_cards=12, basras=1,
                                       score=37),
                   basra_pb2.BasraSide(side=1, seats=[1, 3], captured_cards=9, basras=0,
                                       score=25)]))
    view.deadlines.add(seat=0).expire_time.FromSeconds(int(time.time()) + 60)
    return view


@pytest.mark.parametrize(("lang", "said"), [
    ("en", ["Egyptian · to 101", "Lebanese · to 151", "Iraqi · to 101", "jack on two: basra"]),
    ("fr", ["égyptienne · en 101", "libanaise · en 151", "irakienne · en 101",
            "valet sur deux : basra"])])
def test_the_basra_board_names_its_rules(lang: str, said: list[str]) -> None:
    """The board's header says the table's variant and its target, the line under the floor
    the two-card jack basra when the table plays it: from the view."""
    rules = [(basra_pb2.BASRA_VARIANT_UNSPECIFIED, False, 101),
             (basra_pb2.BASRA_VARIANT_LEBANESE, False, 151),
             (basra_pb2.BASRA_VARIANT_IRAQI, True, 101)]
    i18n.use(lang)
    try:
        for (variant, jack, target), words in zip(rules, said[:-1], strict=True):
            view = basra_for_four("Zoé")
            view.basra.variant, view.basra.two_card_jack_basra = variant, jack
            view.basra.target = target
            shown = text_of(basra.board(view, 0))
            assert words in shown
            assert (said[-1] in shown) == jack, shown
    finally:
        i18n.use("en")


@pytest.mark.parametrize(("lang", "headers", "you"), [
    ("en", ("in hand", "team", "cards", "basras", "score"), "(you)"),
    ("fr", ("en main", "équipe", "cartes", "basras", "points"), "(vous)")])
async def test_a_name_as_long_as_the_server_takes_leaves_every_basra_number_on_screen(
        lang: str, headers: tuple[str, ...], you: str) -> None:
    """At 80x24, a display name of 128 characters is cut short (…); every column keeps its
    header whole and its number, and the player's marks and countdown stay."""
    i18n.use(lang)
    view = basra_for_four(("Marie-Charlotte " * 8).strip().ljust(128, "e"))
    async with scripted(ScriptedServer(view)) as conn:
        app = TableApp(conn, view, 0, "token")
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: app.drawn_version == view.version)
            app._tick()  # the countdown now, not at the next quarter second
            await pilot.pause()
            rows = screen_rows(app)
    screen = "\n".join(rows)
    header = next((row for row in rows if headers[0] in row), screen)
    assert all(word in header for word in headers), header
    mine = next((row for row in rows if you in row), screen)
    numbers = re.compile(r"▶ Marie-Charlotte[\w -]*… " + re.escape(you)
                         + r" ⓓ +\d:\d\d +4 +A +12 +1 +37\s*$")
    assert numbers.search(mine), mine


@pytest.mark.parametrize(("lang", "awaited", "said"), [
    ("en", [0], "waiting for you ·"), ("fr", [0], "on vous attend ·"),
    ("en", [1], "waiting for bo ·"), ("fr", [1], "on attend bo ·")])
async def test_the_keys_row_says_who_is_awaited_as_the_language_does(
        lang: str, awaited: list[int], said: str) -> None:
    """The reader awaited alone is "you" in a sentence of its own: French puts the pronoun
    before the verb ("on vous attend", never "on attend vous")."""
    i18n.use(lang)
    view = pb.GameView(game_id="g", kind=pb.GAME_KIND_WAR, status=pb.GAME_STATUS_IN_PROGRESS,
                       your_seat=0, version=3, awaiting_seats=awaited, seats=[
                           pb.Seat(seat=seat, type=pb.SEAT_TYPE_PERSON, taken=True,
                                   display_name=name) for seat, name in ((0, "ana"), (1, "bo"))],
                       war=war_pb2.WarView(deck_sizes=[26, 26], points=[0, 0], target_points=50,
                                           to_move=awaited[0]))
    async with scripted(ScriptedServer(view)) as conn:
        app = TableApp(conn, view, 0, "token")
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: app.drawn_version == view.version)
            keys = str(app.query_one("#keys").render())
    assert keys.startswith(said), keys
