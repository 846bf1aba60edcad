"""The web client in headless Chromium against a real server: a whole War game against the
computer, a Basra capture chosen, a Corse slap, a reconnect after a restart, a table restored
behind the page, the French texts, on a server with API keys a seat taken from a backend's
ticket, then given away; the four games to their end in French; another seat's person going
away and coming back; the table's own events in the history (seats, games, a restart, a
backend's doings).
Every wait is on a DOM condition, never a fixed time."""

from __future__ import annotations

import asyncio
import re
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tapis.v1 import basra_pb2, war_pb2
from tapis.v1 import bataille_corse_pb2 as corse_pb2
from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import websocket_pb2 as ws_pb
from tapis_engine.cards import deck_with_jokers
from tapis_service.codec.adapters.cards import cards_to_proto
from tapis_service.observe.clock import SystemClock
from tests.browser.tables import (
    basra_against_the_computer,
    basra_sweep_deck,
    boutons_against_the_computer,
    corse_against_the_computer,
    corse_for_two,
    war_against_the_computer,
    war_deck,
)
from tests.support.browser import address, open_page, screenshot_path, socket_to
from tests.support.calls import auth
from tests.support.cards import cards
from tests.support.server import Harness, Restartable, ServerFactory
from tests.support.websocket import Client

BACKEND_KEY = "backend-a-key-0123456789abcdef"
playwright_api = pytest.importorskip(  # installed by `make test-browser`
    "playwright.async_api", reason="needs Playwright for Python (make test-browser)")
expect = playwright_api.expect
MOVE_GONE_MS = 5_000
"""How long a click waits for a move the page offered a moment before: a move can go as the
page renders what arrived meanwhile (the game's end), and the loop then looks again."""

async def assert_suits_coloured(page: Any) -> None:
    """Every face-up ♥ and ♦ on the page is drawn red (in hand as on the table), ♣ and ♠ not."""
    cards = page.locator(".card[data-card]")
    await expect(cards).not_to_have_count(0)
    shown = await cards.evaluate_all(
        "cards => cards.map(c => [c.dataset.card, c.classList.contains('red')])")
    wrong = [card for card, red in shown if red != any(suit in card for suit in "♥♦")]
    assert not wrong, f"cards in the wrong colour: {wrong}"


async def test_the_page_names_the_four_games(browser: Any, served: Harness) -> None:
    page = await open_page(browser, served)
    for name in ("Bataille (War)", "Bataille corse", "La bataille des boutons", "Basra"):
        await expect(page.get_by_role("heading", name=name)).to_be_visible()
    await page.locator("section.war button.play").click()  # the lobby starts a real table
    await expect(page.locator(".war-player")).to_have_count(2)
    await expect(page.locator(".countdown")).to_contain_text("s left")
    assert page.errors == []


async def test_the_lobby_creates_a_basra_table_of_the_variant_chosen(
        browser: Any, served: Harness) -> None:
    """Basra's variant, two-card jack basra and target are chosen in the lobby; the jack option
    is not offered with Lebanese (the server refuses that pair); the table names its rules
    from the server's view."""
    page = await open_page(browser, served)
    basra = page.locator("section.basra")
    jack = basra.locator("input.two-card-jack")
    await expect(jack).to_be_enabled()  # Egyptian first
    await jack.check()
    await basra.locator("select.variant").select_option(label="Lebanese")
    await expect(jack).to_be_disabled()
    await expect(jack).not_to_be_checked()
    await basra.locator("select.basra-target").select_option("151")
    await basra.locator("button.play").click()
    rules = page.locator("#basra-rules")
    await expect(rules).to_have_text("Lebanese Basra · first to 151 points")
    await expect(rules).to_have_attribute("data-variant", "LEBANESE")
    game_id = page.url.rsplit("/", 1)[1]
    client = await socket_to(served)
    view = (await client.call(get_game=pb.GetGameRequest(game_id=game_id))).get_game.game.basra
    assert (view.variant, view.two_card_jack_basra, view.target) == (
        basra_pb2.BASRA_VARIANT_LEBANESE, False, 151)
    await page.locator("a.back").click()  # Iraqi with the two-card jack basra, in French
    await page.locator("#language").click()
    await basra.locator("select.variant").select_option(label="irakienne")
    await jack.check()
    await basra.locator("button.play").click()
    await expect(rules).to_have_text(
        "Basra irakienne · en 101 points · un valet qui prend deux cartes fait une basra")
    assert page.errors == []
    client.close()


async def test_the_lobby_creates_corse_boutons_and_war_tables_of_the_options_chosen(
        browser: Any, served: Harness) -> None:
    """Bataille Corse with a combination switched off, La bataille des boutons with fewer rounds,
    War with fewer points, each chosen in the lobby: the server's view holds them, and the table
    says them (the combination off in French too)."""
    page = await open_page(browser, served)
    client = await socket_to(served)

    async def settings() -> Any:
        game_id = page.url.rsplit("/", 1)[1]
        return (await client.call(get_game=pb.GetGameRequest(game_id=game_id))).get_game.game

    corse = page.locator("section.corse")
    boxes = corse.locator("input.combination")
    await expect(boxes).to_have_count(6)
    for i in range(6):
        await expect(boxes.nth(i)).to_be_checked()
    await corse.locator("input[data-combination=SANDWICH]").uncheck()
    await corse.locator("button.play").click()
    off = page.locator("#combinations-off")
    await expect(off).to_have_text("Switched off: sandwich")
    view = await settings()
    assert list(view.settings.bataille_corse.disabled_combinations) == [
        corse_pb2.BATAILLE_CORSE_COMBINATION_SANDWICH]
    assert corse_pb2.BATAILLE_CORSE_COMBINATION_SANDWICH not in view.bataille_corse.combinations
    await page.locator("a.back").click()
    boutons = page.locator("section.boutons")
    await boutons.locator("select.rounds").select_option("3")
    await boutons.locator("button.play").click()
    await expect(page.locator("#boutons-round")).to_have_attribute("data-rounds", "3")
    view = await settings()
    assert (view.settings.boutons.rounds, view.boutons.rounds) == (3, 3)
    await page.locator("a.back").click()
    await page.locator("section.war select.war-target").select_option("10")
    await page.locator("section.war button.play").click()
    await expect(page.locator(".war .target")).to_have_text("First to 10 points")
    assert (await settings()).war.target_points == 10
    await page.locator("a.back").click()  # two combinations off, in French
    await page.locator("#language").click()
    await corse.locator("input[data-combination=TEN]").uncheck()
    await corse.locator("input[data-combination=SEVEN]").uncheck()
    await corse.locator("button.play").click()
    await expect(off).to_have_text("Désactivées : dix, sept")
    assert page.errors == []
    client.close()


async def test_the_lobby_creates_a_corse_table_of_the_flip_cap_chosen(
        browser: Any, served: Harness) -> None:
    """Bataille Corse's flip cap chosen in the lobby (the server's 10,000 unless changed): the
    server's view holds it, and the table counts the flips against it (in French too)."""
    page = await open_page(browser, served)
    client = await socket_to(served)

    async def view() -> Any:
        game_id = page.url.rsplit("/", 1)[1]
        return (await client.call(get_game=pb.GetGameRequest(game_id=game_id))).get_game.game

    corse = page.locator("section.corse")
    cap = corse.locator("select.flip-cap")
    await expect(cap).to_have_value("10000")
    await cap.select_option("300")
    await corse.locator("input[data-combination=SEVEN]").uncheck()
    await corse.locator("button.play").click()
    flips = page.locator("#corse-flips")
    await expect(flips).to_have_attribute("data-cap", "300")
    await expect(flips).to_have_text(re.compile(r"^Cards flipped: \d+ of 300$"))
    shown = await view()
    assert (shown.settings.bataille_corse.flip_cap, shown.bataille_corse.flip_cap) == (300, 300)
    assert list(shown.settings.bataille_corse.disabled_combinations) == [
        corse_pb2.BATAILLE_CORSE_COMBINATION_SEVEN]
    await page.locator("a.back").click()  # the default, in French
    await page.locator("#language").click()
    await expect(cap).to_have_value("10000")
    await corse.locator("button.play").click()
    await expect(flips).to_have_text(re.compile(r"^Cartes retournées : \d+ sur 10000$"))
    assert (await view()).bataille_corse.flip_cap == 10_000
    assert page.errors == []
    client.close()


async def test_a_whole_war_game_against_the_computer(browser: Any, served: Harness) -> None:
    client = await socket_to(served)
    game_id = await war_against_the_computer(client)
    page = await open_page(browser, served, f"#/join/{game_id}")
    await expect(page.locator(".war-player")).to_have_count(2)
    await expect(page.locator('.war-player[data-seat="0"] .deck-size')).to_have_attribute(
        "data-deck", "26")
    await page.locator("#reveal").click()  # K against K: "Bataille !" beside each player
    await expect(page.locator(".bataille-bubble")).to_have_count(2)
    await expect(page.locator(".bataille-bubble").first).to_have_text("Bataille !")
    if path := screenshot_path("war"):
        await page.screenshot(path=path)
    clicks = 1
    while not await page.locator("#series").count():
        version = await page.locator("body").get_attribute("data-version")
        await page.locator("#reveal, #series").first.wait_for()
        if await page.locator("#series").count():
            break
        await page.locator("#reveal").click()
        clicks += 1
        await expect(page.locator("body")).not_to_have_attribute("data-version", version or "")
        assert clicks < 60
    series = page.locator("#series")
    await expect(series).to_contain_text("Game over")
    await expect(series).to_contain_text("Game 1")
    await expect(page.locator(".last-trick-cards .card")).not_to_have_count(0)
    if path := screenshot_path("war-series"):
        await page.screenshot(path=path)
    await page.locator("#next-game").click()  # the series goes on
    await expect(page.locator("#series")).to_have_count(0)
    await expect(page.locator('.war-player[data-seat="0"] .points')).to_have_text("0 points")
    assert page.errors == []
    client.close()


async def test_a_basra_capture_is_chosen(browser: Any, served: Harness) -> None:
    client = await socket_to(served)
    game_id = await basra_against_the_computer(client)
    page = await open_page(browser, served, f"#/join/{game_id}")
    await expect(page.locator("#hand .card")).to_have_count(4)
    await expect(page.locator("#floor .card")).to_have_count(4)
    await expect(page.locator('#hand .card[data-card="4♥"]')).to_have_class(re.compile(r"\bred\b"))
    await assert_suits_coloured(page)
    await page.locator('#hand .card[data-card="8♠"]').click()
    options = page.locator("#capture-picker button.capture")
    await expect(options).to_have_count(2)  # 7♣ with A♣, or 7♣ with A♦
    if path := screenshot_path("basra"):
        await page.screenshot(path=path)
    await page.locator('#capture-picker button[data-capture="7♣ A♦"]').click()
    await expect(page.locator(".log")).to_contain_text("You took 8♠ 7♣ A♦")
    events = await client.call(get_game=pb.GetGameRequest(game_id=game_id))
    assert events.get_game.game.basra.sides[0].captured_cards == 3
    assert page.errors == []
    client.close()


async def test_basra_and_boutons_cards_are_played_from_the_keyboard(
        browser: Any, served: Harness) -> None:
    """A card of the hand (Basra), a card to bet on (Boutons): each is focused like a button
    and played with Enter."""
    client = await socket_to(served)
    page = await open_page(browser, served,
                           f"#/join/{await basra_against_the_computer(client)}")
    four = page.locator('#hand .card[data-card="4♥"]')  # takes nothing: played at once
    await four.focus()
    await expect(four).to_be_focused()
    await page.keyboard.press("Enter")
    await expect(page.locator("#hand .card")).to_have_count(3)
    await expect(four).to_have_count(0)
    await page.goto(address(served) + f"#/join/{await boutons_against_the_computer(client)}")
    mine = page.locator('.boutons-player[data-seat="0"] .laid')
    bet = mine.locator(".card.playable").first
    await bet.focus()
    await expect(bet).to_be_focused()
    await page.keyboard.press("Enter")
    await expect(mine.locator(".button-pile")).to_have_count(1)
    assert page.errors == []
    client.close()


async def test_a_corse_slap_with_the_space_bar(browser: Any, served: Harness) -> None:
    client = await socket_to(served)
    game_id, other = await corse_for_two(client)
    page = await open_page(browser, served, f"#/join/{game_id}")
    await page.locator("#flip").click()  # 5♠
    await expect(page.locator("#pile .card")).to_have_count(1)
    flip = pb.Action(bataille_corse=corse_pb2.BatailleCorseAction(
        flip=corse_pb2.BatailleCorseFlip()))
    answer = await client.call(seat_token=other, submit_action=pb.SubmitActionRequest(
        game_id=game_id, action=flip))  # 5♥: a double
    assert answer.HasField("submit_action")
    await expect(page.locator("#pile .card")).to_have_count(2)
    if path := screenshot_path("corse"):
        await page.screenshot(path=path)
    await page.keyboard.press(" ")
    await expect(page.locator(".log")).to_contain_text("You take the pile (2 cards)")
    await expect(page.locator('.corse-player[data-seat="0"] .deck-size')).to_have_attribute(
        "data-deck", "28")
    assert page.errors == []
    client.close()


async def test_boutons_shows_the_bets(browser: Any, served: Harness) -> None:
    client = await socket_to(served)
    game_id = await boutons_against_the_computer(client)
    page = await open_page(browser, served, f"#/join/{game_id}")
    await expect(page.locator(".boutons-player")).to_have_count(2)
    mine = page.locator('.boutons-player[data-seat="0"] .laid')
    await expect(mine.locator(".button-pile")).to_have_count(0)
    await page.locator(".colour-choice").nth(1).click()  # a colour, then a card to bet it on
    await expect(page.locator(".colour-choice.chosen")).to_have_attribute(
        "data-colour", await page.locator(".colour-choice").nth(1).get_attribute("data-colour")
        or "")
    await assert_suits_coloured(page)
    await mine.locator(".card.playable").first.click()
    await expect(mine.locator(".button-pile")).to_have_count(1)
    if path := screenshot_path("boutons"):
        await page.screenshot(path=path)
    assert page.errors == []
    client.close()


async def durable_with_a_socket(data: Path) -> tuple[Restartable, int, Client]:
    """A server on SQLite in ``data`` with its WebSocket on a free port (started again on the
    same port by ``start(clock, ws_port=port)``), its port, and a client socket on it."""
    durable = Restartable(data)
    await durable.start(SystemClock(), ws_port=0)  # type: ignore[arg-type]
    assert durable.running is not None and durable.running.ws_port is not None
    port = durable.running.ws_port
    return durable, port, await Client.open(f"ws://127.0.0.1:{port}/ws")


async def test_the_page_reconnects_after_the_server_restarts(
        browser: Any, tmp_path: Path) -> None:
    durable, port, client = await durable_with_a_socket(tmp_path)
    game_id = await war_against_the_computer(client)
    client.close()
    page = await open_page(browser, port, f"#/join/{game_id}")
    await page.locator("#reveal").click()
    await expect(page.locator(".bataille-bubble")).to_have_count(2)
    await durable.stop()
    await expect(page.locator("#banner")).to_contain_text("reconnecting")
    await durable.start(SystemClock(), ws_port=port)  # type: ignore[arg-type]
    try:
        await expect(page.locator("body")).to_have_attribute("data-socket", "open",
                                                             timeout=15_000)
        await expect(page.locator("#banner")).to_be_hidden()
        version = await page.locator("body").get_attribute("data-version")
        await page.locator("#reveal").click()  # the seat's token still holds after it
        await expect(page.locator("body")).not_to_have_attribute("data-version", version or "")
        assert page.errors == []
    finally:
        await durable.stop()


async def test_the_history_says_who_sat_down_and_that_the_table_is_back_after_a_restart(
        browser: Any, tmp_path: Path) -> None:
    """Two pages at a War table with a turn timer, seat 0's in English, seat 1's in French:
    seat 0's sees seat 1 sit down and the game start; the server restarts while seat 0 is
    awaited (TurnTimersResumed): seat 0's page says it has a whole turn, seat 1's that the
    timers start again (the terminal client's lines)."""
    durable, port, client = await durable_with_a_socket(tmp_path)
    created = await client.call(create_game=pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, stacked_deck=war_deck(), stacked_first_seat=0,
        turn_time_limit_ms=120_000, war=war_pb2.WarOptions(target_points=50),
        seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_PERSON)] * 2))
    game_id = created.create_game.game.game_id
    client.close()
    try:
        first = await open_page(browser, port, f"#/join/{game_id}")
        await expect(first.locator("body")).to_have_attribute("data-status",
                                                              "WAITING_FOR_PLAYERS")
        second = await open_page(browser, port, f"#/join/{game_id}", locale="fr-FR")
        await expect(second.locator("#reveal")).to_have_count(0)  # seat 0 reveals first
        history, historique = first.locator("#history"), second.locator("#history")
        await expect(history).to_contain_text("Moi sits down")
        await expect(history).to_contain_text("Game 1 starts")
        await durable.stop()
        await expect(first.locator("#banner")).to_contain_text("reconnecting")
        await durable.start(SystemClock(), ws_port=port)  # type: ignore[arg-type]
        await expect(history).to_contain_text(
            "The table is back: you have a whole turn to play", timeout=15_000)
        await expect(historique).to_contain_text(
            "La table est de retour : les chronomètres repartent", timeout=15_000)
        await expect(history).not_to_contain_text("timers start again")
        await expect(historique).not_to_contain_text("tour entier")
        await first.locator("#reveal").click()  # and the game goes on
        await expect(second.locator("#reveal")).to_be_visible()
        assert first.errors == [] and second.errors == []
    finally:
        await durable.stop()


BANNERS = """() => { window.banners = []; const banner = document.getElementById('banner');
  new MutationObserver(() => { if (!banner.hidden) window.banners.push(banner.textContent); })
    .observe(banner, {attributes: true, childList: true, characterData: true, subtree: true}); }"""
"""Keep every text the page's banner shows from now on (in ``window.banners``)."""


def submits_of(page: Any) -> dict[str, int]:
    """How many times the page sent each SubmitAction (by request_id), counted as it sends."""
    sent: dict[str, int] = {}

    def on_socket(socket: Any) -> None:
        def on_frame(payload: Any) -> None:
            if isinstance(payload, bytes | bytearray):
                frame = ws_pb.ClientFrame.FromString(bytes(payload))
                if frame.HasField("submit_action"):
                    sent[frame.submit_action.request_id] = (
                        sent.get(frame.submit_action.request_id, 0) + 1)
        socket.on("framesent", on_frame)

    page.on("websocket", on_socket)
    return sent


async def test_a_move_cut_by_a_stop_is_sent_again_with_its_request_id(
        browser: Any, tmp_path: Path) -> None:
    """A reveal applied, its answer cut COMMIT_UNKNOWN by a stop: the page says it is sending
    (never the server's sentence), and once the server is back sends the same request again;
    the server answers what it applied, and the line at the top goes."""
    durable, port, client = await durable_with_a_socket(tmp_path)
    assert durable.running is not None and durable.running.ws is not None
    game_id = await war_against_the_computer(client, target=30)
    client.close()
    page = await browser.new_page(locale="en-GB")
    sent = submits_of(page)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    await page.goto(address(port) + f"#/join/{game_id}")
    await page.locator("#reveal").wait_for()
    await page.evaluate(BANNERS)
    served = durable.running.ws.calls["submit_action"]
    applied = asyncio.Event()

    async def applied_then_held(request: Any, caller: Any) -> Any:
        await served.serve(request, caller)
        applied.set()
        await asyncio.Event().wait()  # its answer never leaves: the stop cuts it

    durable.running.ws.calls["submit_action"] = served._replace(serve=applied_then_held)
    try:
        await page.locator("#reveal").click()
        await asyncio.wait_for(applied.wait(), 15)
        await durable.stop()
        await expect(page.locator("#banner")).to_contain_text("reconnecting")
        [request_id] = sent
        await durable.start(SystemClock(), ws_port=port)  # type: ignore[arg-type]
        await expect(page.locator("body")).to_have_attribute("data-socket", "open",
                                                             timeout=15_000)
        await expect(page.locator("#banner")).to_be_hidden(timeout=15_000)
        assert sent == {request_id: 2}, sent  # the same request, sent once more
        shown = await page.evaluate("window.banners")
        assert "Sending…" in shown, shown
        # never the server's own sentence ("... retry on another node ..."); the page's own
        # may be said: a read it sends as the stop begins is refused "The server is stopping"
        assert not [text for text in shown if "node" in text or "request_id" in text], shown
        await expect(page.locator(".bataille-bubble")).to_have_count(2)  # the move, once
        assert errors == []
    finally:
        await durable.stop()


async def events_after_the_read(route: Any) -> None:
    """Between the page and the server: the event batches the server sends hold until the
    page's GetGame is answered (then in their order)."""
    server = route.connect_to_server()
    held: list[bytes] | None = []

    def from_server(message: str | bytes) -> None:
        nonlocal held
        frame = ws_pb.ServerFrame.FromString(bytes(message))  # type: ignore[arg-type]
        if held is not None and frame.HasField("events"):
            held.append(bytes(message))  # type: ignore[arg-type]
            return
        route.send(message)
        if held is not None and frame.HasField("get_game"):
            for batch in held:
                route.send(batch)
            held = None

    server.on_message(from_server)


async def test_an_event_made_while_the_page_was_away_reaches_its_history(
        browser: Any, tmp_path: Path) -> None:
    """While the page's server is down, the other seat moves (the server up without its
    WebSocket port): once back, the page reads the table and its stream resumes; the move's
    event, after what the page streamed but within the view it read (its batch held until the
    read is answered), is in its history."""
    durable, port, client = await durable_with_a_socket(tmp_path)
    created = await client.call(create_game=pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, stacked_deck=war_deck(), stacked_first_seat=0,
        seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_PERSON)] * 2))
    game_id = created.create_game.game.game_id
    joined = await client.call(join_game=pb.JoinGameRequest(game_id=game_id, seat=1,
                                                            display_name="Zoé"))
    other = joined.join_game.seat_token
    client.close()
    page = await open_page(browser, port, f"#/join/{game_id}")
    try:
        await page.locator("#reveal").click()  # K
        await expect(page.locator("#reveal")).to_have_count(0)
        await durable.stop()
        await page.route_web_socket(re.compile(r"/ws$"), events_after_the_read)
        stub = await durable.start(SystemClock())  # type: ignore[arg-type]
        await stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=pb.Action(
            war=war_pb2.WarAction(reveal=war_pb2.WarReveal()))), metadata=auth(other))  # K
        await durable.stop()
        await durable.start(SystemClock(), ws_port=port)  # type: ignore[arg-type]
        await expect(page.locator("body")).to_have_attribute("data-socket", "open",
                                                             timeout=15_000)
        await expect(page.locator(".bataille-bubble")).to_have_count(2)
        await expect(page.locator("#history")).to_contain_text("Bataille !")
        assert page.errors == []
    finally:
        await durable.stop()


async def test_a_table_restored_behind_the_page_is_shown_as_it_now_is(
        browser: Any, tmp_path: Path) -> None:
    """The operator restores a copy taken before the page's last moves: the page's stream is
    refused (INVALID_CURSOR), it says so, reads the table again, and plays on from there."""
    data, copy = tmp_path / "data", tmp_path / "copy"
    durable, port, client = await durable_with_a_socket(data)
    game_id = await war_against_the_computer(client)
    client.close()
    page = await open_page(browser, port, f"#/join/{game_id}")
    try:
        await page.locator("#reveal").click()
        await expect(page.locator("body")).not_to_have_attribute("data-version", "1")
        await durable.stop()
        shutil.copytree(data, copy)  # the backup: the table as it is now
        await durable.start(SystemClock(), ws_port=port)  # type: ignore[arg-type]
        await expect(page.locator("body")).to_have_attribute("data-socket", "open",
                                                             timeout=15_000)
        restored = await page.locator("body").get_attribute("data-version")
        for _ in range(2):  # moves the backup does not hold
            before = await page.locator("body").get_attribute("data-version")
            await page.locator("#reveal").click()
            await expect(page.locator("body")).not_to_have_attribute("data-version",
                                                                     before or "")
        await durable.stop()
        shutil.rmtree(data)
        shutil.copytree(copy, data)  # the restore
        await durable.start(SystemClock(), ws_port=port)  # type: ignore[arg-type]
        await expect(page.locator("#banner")).to_contain_text("earlier copy", timeout=15_000)
        await expect(page.locator("body")).to_have_attribute("data-version", restored or "")
        await page.locator("#reveal").click()  # and the game goes on from there
        await expect(page.locator("body")).not_to_have_attribute("data-version",
                                                                 restored or "")
        assert page.errors == []
    finally:
        await durable.stop()


async def test_the_texts_are_in_french(browser: Any, served: Harness) -> None:
    page = await open_page(browser, served, locale="fr-FR")
    await expect(page.locator("h2").first).to_have_text("Choisissez un jeu")
    await expect(page.locator("section.war button.play")).to_have_text(
        "Jouer contre l’ordinateur")
    client = await socket_to(served)
    game_id = await war_against_the_computer(client)
    await page.goto(address(served) + f"#/join/{game_id}")
    await expect(page.locator("#reveal")).to_have_text("Retourner une carte")
    await expect(page.locator('.war-player[data-seat="0"] .deck-size')).to_contain_text(
        "26 cartes dans le paquet")
    await page.locator("#language").click()
    await expect(page.locator("#reveal")).to_have_text("Reveal a card")
    client.close()


async def test_a_refusal_is_said_in_french_never_in_the_servers_words(
        browser: Any, make_server: ServerFactory) -> None:
    """A server that holds as many tables as it may refuses the French lobby's new table
    (TOO_MANY_GAMES): the page says so in French."""
    served = await make_server(ws_port=0, max_games=1)
    client = await socket_to(served)
    await war_against_the_computer(client)
    page = await open_page(browser, served, locale="fr-FR")
    await page.locator("section.war button.play").click()
    await expect(page.locator("#banner")).to_have_text(
        "Le serveur a déjà autant de tables qu’il peut : réessayez plus tard.")
    assert page.errors == []
    client.close()


async def test_a_refusal_goes_with_the_next_move(browser: Any,
                                                make_server: ServerFactory) -> None:
    """Two reveals at once: the second is refused (the computer's turn) and said; the next
    move, answered, takes the line away."""
    served = await make_server(ws_port=0, bot_delay_ms=500)
    client = await socket_to(served)
    game_id = await war_against_the_computer(client, target=30)
    page = await open_page(browser, served, f"#/join/{game_id}")
    await page.locator("#reveal").wait_for()
    await page.evaluate("() => { const reveal = document.getElementById('reveal');"
                        " reveal.click(); reveal.click(); }")
    await expect(page.locator("#banner")).to_have_text("It is not your turn.")
    await expect(page.locator(".bataille-bubble")).to_have_count(2)  # the computer's reveal
    await page.locator("#reveal").click()
    await expect(page.locator("#banner")).to_be_hidden()
    assert page.errors == []
    client.close()


async def test_a_key_acts_once(browser: Any, make_server: ServerFactory) -> None:
    """Space held down (its repeats), Enter while the move is being sent, Space on a focused
    button: each sends one move, never two."""
    served = await make_server(ws_port=0)
    client = await socket_to(served)
    game_id = await war_against_the_computer(client, target=30)
    page = await browser.new_page(locale="en-GB")
    sent = submits_of(page)
    await page.goto(address(served) + f"#/join/{game_id}")
    await page.locator("#reveal").wait_for()
    assert served.running.ws is not None
    calls = served.running.ws.calls
    served_call = calls["submit_action"]
    reached, release = asyncio.Event(), asyncio.Event()

    async def held(request: Any, caller: Any) -> Any:
        reached.set()
        await release.wait()
        return await served_call.serve(request, caller)

    calls["submit_action"] = served_call._replace(serve=held)
    await page.keyboard.down(" ")
    await asyncio.wait_for(reached.wait(), 15)
    await page.keyboard.down(" ")  # a repeat
    await page.keyboard.up(" ")
    await page.keyboard.press("Enter")  # the move is being sent
    release.set()
    await expect(page.locator(".bataille-bubble")).to_have_count(2)
    calls["submit_action"] = served_call
    version = await page.locator("body").get_attribute("data-version")
    await page.locator("#reveal").focus()
    await page.keyboard.press(" ")  # on the focused button
    await expect(page.locator("body")).not_to_have_attribute("data-version", version or "")
    version = await page.locator("body").get_attribute("data-version")
    await page.locator("#reveal").click()  # a move sent after: the frames before it are counted
    await expect(page.locator("body")).not_to_have_attribute("data-version", version or "")
    assert list(sent.values()) == [1, 1, 1], sent
    await expect(page.locator("#banner")).to_be_hidden()
    client.close()


async def test_french_lines_to_the_reader_and_in_the_history(browser: Any,
                                                              served: Harness) -> None:
    """A Corse challenge against the reader is said to them ("Vous devez répondre"), and a
    history line naming the computer first begins with a capital."""
    client = await socket_to(served)
    first, second = cards("2S 3S 4S"), cards("JH 5H 6H")  # Zoé's jack challenges the page
    dealt = [c for pair in zip(first, second, strict=True) for c in pair]
    deck = cards_to_proto([*dealt, *(c for c in deck_with_jokers() if c not in dealt)])
    created = await client.call(create_game=pb.CreateGameRequest(
        kind=pb.GAME_KIND_BATAILLE_CORSE, seats=2, stacked_deck=deck,
        seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_PERSON)] * 2))
    game_id = created.create_game.game.game_id
    joined = await client.call(join_game=pb.JoinGameRequest(game_id=game_id, seat=1,
                                                            display_name="Zoé"))
    page = await open_page(browser, served, f"#/join/{game_id}", locale="fr-FR")
    await page.locator("#flip").click()  # 2♠
    await expect(page.locator("#pile .card")).to_have_count(1)
    await client.call(seat_token=joined.join_game.seat_token, submit_action=pb.SubmitActionRequest(
        game_id=game_id, action=pb.Action(bataille_corse=corse_pb2.BatailleCorseAction(
            flip=corse_pb2.BatailleCorseFlip()))))  # V♥
    await expect(page.locator(".challenge")).to_have_text("Vous devez répondre : encore 1 essai")
    await page.goto(address(served) + f"#/join/{await basra_against_the_computer(client)}")
    await page.locator('#hand .card[data-card="4♥"]').click()  # the computer takes it
    await expect(page.locator("#history li").first).to_have_text(
        re.compile(r"^L’ordinateur a ramassé .*4♥"))
    assert page.errors == []
    client.close()


async def test_the_turn_countdown_then_the_computer_then_the_seat_taken_back(
        browser: Any, make_server: ServerFactory) -> None:
    served = await make_server(ws_port=0, bot_delay_ms=400)  # bots at a person's pace
    client = await socket_to(served)
    game_id = await war_against_the_computer(client, turn_ms=2500, target=50)
    page = await open_page(browser, served, f"#/join/{game_id}")
    countdown = page.locator('.countdown[data-seat="0"]')
    await expect(countdown).to_contain_text("s left")  # then nobody reveals: the timer runs out
    await expect(page.locator("#reclaim")).to_be_visible(timeout=10_000)
    await expect(page.locator(".status")).to_contain_text("The computer plays for you")
    await expect(page.locator("#history")).to_contain_text(
        "Your time ran out: the computer plays for you until you take your seat back")
    await page.locator("#reclaim").click()
    await expect(page.locator("#reclaim")).to_have_count(0)
    await expect(page.locator(".status")).not_to_contain_text("The computer plays for you")
    await expect(page.locator("#history")).to_contain_text("You take your seat back")
    assert page.errors == []
    client.close()


async def test_with_api_keys_the_page_plays_a_ticket_handed_out_by_a_backend(
        browser: Any, make_server: ServerFactory, tmp_path: Path) -> None:
    keys = tmp_path / "api-keys"
    keys.write_text(f"{BACKEND_KEY} backend-a\n", encoding="utf-8")
    served = await make_server(ws_port=0, api_keys_file=keys)
    page = await open_page(browser, served, locale="fr-FR")  # the sentence, no create button
    await expect(page.locator("#tickets-only")).to_contain_text("ouvrez le lien")
    await expect(page.get_by_role("heading", name="Basra")).to_be_visible()
    await expect(page.locator("button.play")).to_have_count(0)
    created = await served.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, stacked_deck=war_deck(), stacked_first_seat=0,
        seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_PERSON, player_id="u-17",
                                    display_name="Ada"),
                      pb.SeatConfig(type=pb.SEAT_TYPE_BOT)]),
        metadata=(("x-api-key", BACKEND_KEY),))
    game_id, token = created.game.game_id, created.seat_tokens[0].seat_token
    await page.goto(address(served) + f"#/ticket/{game_id}/{quote(token, safe='')}")
    await expect(page.locator(".war-player")).to_have_count(2)
    assert await page.evaluate("location.hash") == f"#/table/{game_id}"  # the token left it
    version = await page.locator("body").get_attribute("data-version")
    await page.locator("#reveal").click()  # the ticket's seat plays
    await expect(page.locator(".bataille-bubble")).to_have_count(2)
    await expect(page.locator("body")).not_to_have_attribute("data-version", version or "")
    await served.stub.ReplaceSeat(pb.ReplaceSeatRequest(  # the backend gives the seat away
        game_id=game_id, seat=0, player_id="u-18", display_name="Bea"),
        metadata=(("x-api-key", BACKEND_KEY),))
    await expect(page.locator(".banner")).to_contain_text(  # its stream ends for good
        "Cette place a été donnée à quelqu’un d’autre")
    assert page.errors == []


async def test_the_history_says_what_the_backend_did_to_the_table_in_french(
        browser: Any, make_server: ServerFactory, tmp_path: Path) -> None:
    """The page plays seat 1 of a backend's table; the backend gives seat 0 to Bea, then to
    nobody, then ends the table: a line for each (the terminal client's)."""
    keys = tmp_path / "api-keys"
    keys.write_text(f"{BACKEND_KEY} backend-a\n", encoding="utf-8")
    served = await make_server(ws_port=0, api_keys_file=keys)
    backend = (("x-api-key", BACKEND_KEY),)
    created = await served.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, stacked_deck=war_deck(), stacked_first_seat=0,
        seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_PERSON, player_id="u-17",
                                    display_name="Ada"),
                      pb.SeatConfig(type=pb.SEAT_TYPE_PERSON, player_id="u-19",
                                    display_name="Cy")]), metadata=backend)
    game_id, token = created.game.game_id, created.seat_tokens[1].seat_token
    page = await open_page(browser, served, f"#/ticket/{game_id}/{quote(token, safe='')}",
                           locale="fr-FR")
    await expect(page.locator(".war-player")).to_have_count(2)
    history = page.locator("#history")
    await served.stub.ReplaceSeat(pb.ReplaceSeatRequest(
        game_id=game_id, seat=0, player_id="u-18", display_name="Bea"), metadata=backend)
    await expect(history).to_contain_text(
        "Bea reçoit la place 1 : l’ordinateur la joue jusqu’à ce qu’il la prenne")
    await served.stub.ReplaceSeat(pb.ReplaceSeatRequest(game_id=game_id, seat=0),
                                  metadata=backend)
    await expect(history).to_contain_text("L’ordinateur joue désormais la place 1")
    await served.stub.EndTable(pb.EndTableRequest(game_id=game_id), metadata=backend)
    await expect(history.locator("li").first).to_have_text(
        "La table a été fermée par le site d’où vous jouez")
    assert page.errors == []


VIEWPORTS = [pytest.param((1280, 800), id="desktop"), pytest.param((390, 844), id="phone")]
"""The screens every table is checked on: a desktop and a phone."""


async def play_war_to_its_end(page: Any) -> None:
    clicks = 0
    while not await page.locator("#series").count():
        version = await page.locator("body").get_attribute("data-version")
        await page.locator("#reveal, #series").first.wait_for()
        if await page.locator("#series").count():
            break
        await page.locator("#reveal").click()
        clicks += 1
        await expect(page.locator("body")).not_to_have_attribute("data-version", version or "")
        assert clicks < 60


@pytest.mark.parametrize("size", VIEWPORTS)
async def test_war_shows_the_series_the_keys_the_history_and_why_it_ended(
        browser: Any, served: Harness, size: tuple[int, int]) -> None:
    client = await socket_to(served)
    game_id = await war_against_the_computer(client)
    page = await open_page(browser, served, f"#/join/{game_id}", size=size)
    line = page.locator("#series-line")
    await expect(line).to_contain_text("Game 1")
    await expect(line).to_contain_text("Series: you 0 · computer 0 · draws 0")
    await expect(page.locator("#keys")).to_contain_text("Space or Enter: reveal a card")
    await page.locator("#reveal").click()
    await expect(page.locator("#history li")).not_to_have_count(0)
    await assert_suits_coloured(page)
    await play_war_to_its_end(page)
    await expect(page.locator("#end-reason")).to_contain_text("Why: reached 3 points")
    await expect(page.locator("#history li").first).to_have_text(
        re.compile(r"^Game 1 over: (you win|computer wins)$"))
    await page.locator("#next-game").click()
    await expect(page.locator("#series-line")).to_contain_text("Game 2")
    await expect(page.locator("#series-line")).to_contain_text(
        re.compile(r"Series: you (1 · computer 0|0 · computer 1)"))
    # game 1's lines are gone
    await expect(page.locator("#history li")).to_have_text(["Game 2 starts"])
    assert await page.evaluate("document.documentElement.scrollWidth") <= size[0]
    assert page.errors == []
    client.close()


@pytest.mark.parametrize("size", VIEWPORTS)
async def test_basra_flags_a_basra_and_marks_and_explains_the_dealer(
        browser: Any, served: Harness, size: tuple[int, int]) -> None:
    client = await socket_to(served)
    game_id = await basra_against_the_computer(client, basra_sweep_deck())
    page = await open_page(browser, served, f"#/join/{game_id}", size=size)
    await expect(page.locator("#hand .card")).to_have_count(4)
    await expect(page.locator('#hand .card[data-card="7♦"]')).to_have_class(
        re.compile(r"\bmakes-basra\b"))
    await expect(page.locator("#hand .makes-basra")).to_have_count(1)
    await expect(page.locator("#basra-flag")).to_contain_text("Basra!")
    await expect(page.locator('.basra-player[data-seat="1"] .dealer-mark')).to_have_count(1)
    await expect(page.locator(".legend").first).to_contain_text("D deals")
    await expect(page.locator("#keys")).to_contain_text("Click a card of your hand")
    await assert_suits_coloured(page)
    await page.locator('#hand .card[data-card="7♦"]').click()
    await expect(page.locator(".log")).to_contain_text("Basra! (you)")
    assert await page.evaluate("document.documentElement.scrollWidth") <= size[0]
    assert page.errors == []
    client.close()


@pytest.mark.parametrize("size", VIEWPORTS)
async def test_boutons_shows_each_score_a_shape_per_colour_and_the_rule(
        browser: Any, served: Harness, size: tuple[int, int]) -> None:
    client = await socket_to(served)
    game_id = await boutons_against_the_computer(client)
    page = await open_page(browser, served, f"#/join/{game_id}", size=size)
    scores = page.locator(".player-score")
    await expect(scores).to_have_count(2)
    await expect(scores.first).to_contain_text(re.compile(r"Score: .+ = \d+"))
    await expect(page.locator("#product-rule")).to_contain_text("multiplied")
    choices = await page.locator(".colour-choice").all_inner_texts()
    shapes = [choice.split()[0] for choice in choices]
    assert len(shapes) >= 2 and len(set(shapes)) == len(shapes), shapes  # one shape a colour
    piles = await page.locator(".boutons-player .button-pile").evaluate_all(
        "piles => piles.map(p => [p.className, p.dataset.shape])")
    by_colour = {cls: shape for cls, shape in piles}
    assert len(set(by_colour.values())) == len(by_colour) > 2, by_colour
    await expect(page.locator("#keys")).to_contain_text("Pick a colour")
    await assert_suits_coloured(page)
    assert await page.evaluate("document.documentElement.scrollWidth") <= size[0]
    assert page.errors == []
    client.close()


@pytest.mark.parametrize("size", VIEWPORTS)
async def test_a_corse_slap_is_captioned_with_its_combination_cards_who_and_how_fast(
        browser: Any, served: Harness, size: tuple[int, int]) -> None:
    client = await socket_to(served)
    game_id, other = await corse_for_two(client)
    page = await open_page(browser, served, f"#/join/{game_id}", size=size)
    await expect(page.locator("#keys")).to_contain_text("Enter: flip · Space: slap")
    await page.keyboard.press("Enter")  # 5♠
    await expect(page.locator("#pile .card")).to_have_count(1)
    flip = pb.Action(bataille_corse=corse_pb2.BatailleCorseAction(
        flip=corse_pb2.BatailleCorseFlip()))
    await client.call(seat_token=other, submit_action=pb.SubmitActionRequest(
        game_id=game_id, action=flip))  # 5♥: a double
    await expect(page.locator("#pile .card")).to_have_count(2)
    await assert_suits_coloured(page)
    await page.keyboard.press(" ")
    await expect(page.locator("#slap-caption")).to_have_text(re.compile(  # and how fast
        r"^You take the pile: double \(5♠ 5♥\), slapped in \d+\.\d\d s$"))
    assert page.errors == []
    client.close()


async def test_a_new_table_shows_nothing_of_the_last_one(browser: Any, served: Harness) -> None:
    """A slap's caption at one Corse table, then back to the lobby and a new Corse table: no
    caption there (what a game's screen kept belongs to its table)."""
    client = await socket_to(served)
    game_id, other = await corse_for_two(client)
    page = await open_page(browser, served, f"#/join/{game_id}")
    await page.locator("#flip").click()  # 5♠
    await expect(page.locator("#pile .card")).to_have_count(1)
    await client.call(seat_token=other, submit_action=pb.SubmitActionRequest(
        game_id=game_id, action=pb.Action(bataille_corse=corse_pb2.BatailleCorseAction(
            flip=corse_pb2.BatailleCorseFlip()))))  # 5♥: a double
    await expect(page.locator("#pile .card")).to_have_count(2)
    await page.keyboard.press(" ")
    await expect(page.locator("#slap-caption")).to_contain_text("You take the pile")
    await page.locator("a.back").click()
    await page.locator("section.corse button.play").click()
    await expect(page.locator(".corse-player")).to_have_count(2)
    assert page.url.split("#")[1] != f"/table/{game_id}"
    await expect(page.locator("#slap-caption")).to_have_text("")
    assert page.errors == []
    client.close()


LONG_NAME = "Wolfeschlegelsteinhausenbergerdorff" * 3 + "W" * 23
"""128 bytes without a space: the longest name the server takes."""


@pytest.mark.parametrize("kind", [pb.GAME_KIND_WAR, pb.GAME_KIND_BATAILLE_CORSE,
                                  pb.GAME_KIND_BOUTONS, pb.GAME_KIND_BASRA])
async def test_a_long_name_fits_a_small_screen(browser: Any, served: Harness,
                                                kind: int) -> None:
    """Every table at 360 px, the other seat's name the longest the server takes: nothing
    wider than the screen."""
    client = await socket_to(served)
    created = await client.call(create_game=pb.CreateGameRequest(
        kind=kind, seats=2, seed=3, seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_PERSON)] * 2))
    game_id = created.create_game.game.game_id
    await client.call(join_game=pb.JoinGameRequest(game_id=game_id, seat=1,
                                                   display_name=LONG_NAME))
    page = await open_page(browser, served, f"#/join/{game_id}", size=(360, 740))
    await expect(page.locator(".game .name", has_text=LONG_NAME[:20]).first).to_be_visible()
    assert await page.evaluate("document.documentElement.scrollWidth") <= 360
    assert page.errors == []
    client.close()


@pytest.mark.parametrize("size", VIEWPORTS)
async def test_war_to_its_end_in_french(browser: Any, served: Harness,
                                        size: tuple[int, int]) -> None:
    client = await socket_to(served)
    game_id = await war_against_the_computer(client)
    page = await open_page(browser, served, f"#/join/{game_id}", locale="fr-FR", size=size)
    await expect(page.locator("#series-line")).to_contain_text(
        "Partie 1 · Série : vous 0 · l’ordinateur 0 · nuls 0")
    await expect(page.locator("#keys")).to_contain_text("Touches : Espace ou Entrée")
    await page.locator("#reveal").click()  # K against K
    await expect(page.locator(".trick .card").first).to_have_text(re.compile("R[♠♥]"))
    await play_war_to_its_end(page)
    await expect(page.locator("#series")).to_contain_text("Partie terminée")
    await expect(page.locator("#end-reason")).to_contain_text("Pourquoi : 3 points atteints")
    text = await page.locator("body").inner_text()
    assert not re.search(r"[^\s\d][:;!?](\s|$)", text), text
    assert page.errors == []
    client.close()


@pytest.mark.parametrize("size", VIEWPORTS)
async def test_basra_shows_the_deal_sheet_when_a_deal_ends(
        browser: Any, served: Harness, size: tuple[int, int]) -> None:
    """A whole deal (24 cards each), played with the first card in hand: its score sheet then
    shows every side's line and its legend, in French."""
    client = await socket_to(served)
    game_id = await basra_against_the_computer(client)
    page = await open_page(browser, served, f"#/join/{game_id}", locale="fr-FR", size=size)
    moves = 0
    while not await page.locator("#deal-sheet").count():
        version = await page.locator("body").get_attribute("data-version")
        await page.locator("#hand .card, #deal-sheet").first.wait_for()
        if await page.locator("#deal-sheet").count():
            break
        await page.locator("#hand .card").first.click()
        if await page.locator("#capture-picker").count():
            await page.locator("#capture-picker button.capture").first.click()
        await expect(page.locator("body")).not_to_have_attribute("data-version", version or "")
        moves += 1
        assert moves < 40
    sheet = page.locator("#deal-sheet")
    await expect(sheet).to_contain_text("Donne 1 : le score")
    await expect(sheet.locator("tr[data-side]")).to_have_count(2)
    await expect(sheet).to_contain_text("le plus")
    await expect(sheet.locator(".legend")).to_contain_text("Cartes ramassées")
    assert "×" not in await sheet.inner_text()
    assert page.errors == []
    client.close()


async def test_boutons_to_its_end_in_french(browser: Any, served: Harness) -> None:
    """Bet the first colour on the first card, flip when it is time, until the end window:
    it says why the game ended, in French (who ran out of buttons, when one did)."""
    client = await socket_to(served)
    game_id = await boutons_against_the_computer(client)
    page = await open_page(browser, served, f"#/join/{game_id}", locale="fr-FR", size=(390, 844))
    await expect(page.locator("#product-rule")).to_contain_text("le produit")
    moves = 0
    while not await page.locator("#series").count():
        version = await page.locator("body").get_attribute("data-version")
        await page.locator("#flip, .card.playable, #series").first.wait_for()
        if await page.locator("#series").count():
            break
        moves += 1  # a move made, or looked for again
        assert moves < 300
        try:
            if await page.locator("#flip").count():
                await page.locator("#flip").click(timeout=MOVE_GONE_MS)
            else:
                await page.locator(".boutons-player .card.playable").first.click(
                    timeout=MOVE_GONE_MS)
        except playwright_api.TimeoutError:  # the move went as the page rendered: look again
            continue
        await expect(page.locator("body")).not_to_have_attribute("data-version", version or "")
    await expect(page.locator("#series")).to_contain_text("Partie terminée")
    await expect(page.locator("#end-reason")).to_contain_text(re.compile(
        r"Pourquoi : (la réserve est vide|vous n’aviez plus|l’ordinateur n’avait plus)"))
    text = await page.locator("body").inner_text()
    assert not re.search(r"[^\s\d][:;!?](\s|$)", text), text
    assert page.errors == []
    client.close()


FRENCH_TYPOGRAPHY = re.compile(r"[^\s\d][:;!?](\s|$)")
"""A colon, semicolon, exclamation or question mark glued to the word before it."""


async def play_to_the_end(page: Any, move: str, limit: int) -> None:
    """Make ``move`` (a click on the first match of its selector, then the capture offered
    first if a picker opens) each time the page offers it, until the end window shows."""
    looks = 0
    while not await page.locator("#series").count():
        looks += 1  # a move made, or looked for again
        assert looks < limit
        version = await page.locator("body").get_attribute("data-version")
        await page.locator(f"{move}, #series").first.wait_for()
        if await page.locator("#series").count():
            break
        try:
            await page.locator(move).first.click(timeout=MOVE_GONE_MS)
        except playwright_api.TimeoutError:  # the move went as the page rendered: look again
            continue
        if await page.locator("#capture-picker").count():
            await page.locator("#capture-picker button.capture").first.click()
        await expect(page.locator("body")).not_to_have_attribute("data-version", version or "")


async def test_bataille_corse_to_its_end_in_french(browser: Any, make_server: ServerFactory
                                                  ) -> None:
    """Flip whenever it is the page's turn, against the server's bot, until the end window:
    it says why the game ended, in French."""
    served = await make_server(ws_port=0, bot_delay_ms=20)
    client = await socket_to(served)
    game_id = await corse_against_the_computer(client, flip_cap=40)
    page = await open_page(browser, served, f"#/join/{game_id}", locale="fr-FR", size=(390, 844))
    await expect(page.locator("#keys")).to_contain_text("Entrée : retourner")
    await play_to_the_end(page, "#flip", limit=60)
    await expect(page.locator("#series")).to_contain_text("Partie terminée")
    await expect(page.locator("#end-reason")).to_contain_text(re.compile(
        r"Pourquoi : (dernier joueur en jeu|limite de cartes retournées atteinte)"))
    text = await page.locator("body").inner_text()
    assert not FRENCH_TYPOGRAPHY.search(text), text
    assert page.errors == []
    client.close()


async def test_basra_to_its_end_in_french(browser: Any, make_server: ServerFactory) -> None:
    """Play the first card in hand (and the first capture offered), against the server's bot,
    deal after deal until a side reaches 101: the end window gives the final score, in French."""
    served = await make_server(ws_port=0, bot_delay_ms=20)
    client = await socket_to(served)
    game_id = await basra_against_the_computer(client, seed=11)
    page = await open_page(browser, served, f"#/join/{game_id}", locale="fr-FR", size=(1280, 800))
    await expect(page.locator("#keys")).to_contain_text("Cliquez sur une carte de votre main")
    await play_to_the_end(page, "#hand .card", limit=400)
    await expect(page.locator("#series")).to_contain_text("Partie terminée")
    await expect(page.locator("#end-reason")).to_contain_text(re.compile(
        r"Pourquoi : score final \d+ – \d+"))
    text = await page.locator("body").inner_text()
    assert not FRENCH_TYPOGRAPHY.search(text), text
    assert page.errors == []
    client.close()


PRESENCE_DEBOUNCE_MS = 300
"""The server's presence debounce in the presence test: short, so the page hears soon."""


async def connected_seats(served: Harness, game_id: str) -> list[bool]:
    view = (await served.stub.GetGame(pb.GetGameRequest(game_id=game_id))).game
    return [seat.connected for seat in view.seats]


@pytest.mark.parametrize(("size", "locale", "away", "back"), [
    pytest.param((1280, 800), "en-GB", "Zoé went away", "Zoé is back", id="desktop"),
    pytest.param((390, 844), "fr-FR", "Zoé s’est déconnecté", "Zoé est de retour", id="phone"),
])
async def test_the_page_shows_who_went_away_and_who_came_back(
        browser: Any, make_server: ServerFactory, size: tuple[int, int], locale: str,
        away: str, back: str) -> None:
    """Zoé's app (a gRPC stream on seat 1) is there, then goes: the page marks her seat
    disconnected and says so in the history within the debounce; she comes back: connected."""
    served = await make_server(ws_port=0, presence_debounce_ms=PRESENCE_DEBOUNCE_MS)
    client = await socket_to(served)
    game_id, other = await corse_for_two(client)

    def zoe_streams() -> Any:
        return served.stub.StreamEvents(pb.StreamEventsRequest(game_id=game_id),
                                        metadata=auth(other))

    stream = zoe_streams()
    await stream.read()  # the table's first event: the stream is open on the server
    page = await open_page(browser, served, f"#/join/{game_id}", locale=locale, size=size)
    zoe = page.locator('.corse-player[data-seat="1"] .presence')
    await expect(zoe).to_have_attribute("data-connected", "true")
    await expect(page.locator('.corse-player[data-seat="0"] .presence')).to_have_attribute(
        "data-connected", "true")  # the page's own stream
    stream.cancel()
    margin_ms = 5000
    await expect(page.locator("#history")).to_contain_text(
        away, timeout=PRESENCE_DEBOUNCE_MS + margin_ms)
    await expect(zoe).to_have_attribute("data-connected", "false")
    assert await connected_seats(served, game_id) == [True, False]
    stream = zoe_streams()
    await stream.read()
    await expect(page.locator("#history")).to_contain_text(back)
    await expect(zoe).to_have_attribute("data-connected", "true")
    assert await page.evaluate("document.documentElement.scrollWidth") <= size[0]
    assert page.errors == []
    stream.cancel()
    client.close()
