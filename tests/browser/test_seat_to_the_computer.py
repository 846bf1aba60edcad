"""A seat the computer plays, as its player reads it in the web client, in English and French:
their turn timer ran out (the page open, then opened again), or the table's backend handed the
seat over (ReplaceSeat: the former holder's page, then the new holder's ticket). Each time the
page says why the computer plays the seat, and its button takes the seat back."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import war_pb2
from tests.browser.tables import war_against_the_computer, war_deck
from tests.support.browser import open_page, socket_to
from tests.support.server import ServerFactory

expect = pytest.importorskip(  # installed by `make test-browser`
    "playwright.async_api", reason="needs Playwright for Python (make test-browser)").expect

BACKEND_KEY = "backend-a-key-0123456789abcdef"
BACKEND = (("x-api-key", BACKEND_KEY),)

TEXTS = {
    "en-GB": {
        "time_ran_out": "Your time ran out: the computer plays for you until you take your "
                        "seat back",
        "yours_now": "This seat is yours now: the computer plays it until you take it back",
        "plays_for_you": "The computer plays for you",
        "taken_back": "You take your seat back",
        "given_away": "This seat was given to someone else.",
    },
    "fr-FR": {
        "time_ran_out": "Votre temps est écoulé : l’ordinateur joue pour vous jusqu’à ce que "
                        "vous repreniez votre place",
        "yours_now": "Cette place est à vous : l’ordinateur la joue jusqu’à ce que vous la "
                     "repreniez",
        "plays_for_you": "L’ordinateur joue pour vous",
        "taken_back": "Vous reprenez votre place",
        "given_away": "Cette place a été donnée à quelqu’un d’autre.",
    },
}
"""What the seat's player reads, in each language the page speaks."""

LOCALES = [pytest.param("en-GB", id="en"), pytest.param("fr-FR", id="fr")]


async def take_it_back(page: Any, said: dict[str, str]) -> None:
    """The page says the computer plays the seat; its button takes the seat back."""
    await expect(page.locator(".status")).to_contain_text(said["plays_for_you"])
    await page.locator("#reclaim").click()
    await expect(page.locator("#reclaim")).to_have_count(0)
    await expect(page.locator(".status")).not_to_contain_text(said["plays_for_you"])
    await expect(page.locator("#history")).to_contain_text(said["taken_back"])


@pytest.mark.parametrize("locale", LOCALES)
async def test_a_timer_run_out_is_said_on_the_page_and_on_the_page_opened_again(
        browser: Any, make_server: ServerFactory, locale: str) -> None:
    """The line comes live, and again when the page is opened afresh while the computer still
    plays the seat (the page reads the table's history, as the terminal client does)."""
    said = TEXTS[locale]
    served = await make_server(ws_port=0, bot_delay_ms=400)  # bots at a person's pace
    game_id = await war_against_the_computer(await socket_to(served), turn_ms=2500, target=50)
    page = await open_page(browser, served, f"#/join/{game_id}", locale=locale)
    await expect(page.locator("#reclaim")).to_be_visible(timeout=10_000)  # nobody revealed
    await expect(page.locator("#history")).to_contain_text(said["time_ran_out"])
    await page.reload()  # the seat's key is kept in the browser: the same seat, read afresh
    await expect(page.locator("#reclaim")).to_be_visible()
    await expect(page.locator("#history")).to_contain_text(said["time_ran_out"])
    await take_it_back(page, said)
    assert page.errors == []


@pytest.mark.parametrize(("locale", "player_id"), [
    pytest.param("en-GB", "u-17", id="en-the-same-player"),
    pytest.param("fr-FR", "u-18", id="fr-another-player"),
    pytest.param("en-GB", "", id="en-nobody")])
async def test_a_seat_its_backend_hands_over_is_explained_to_the_new_holder(
        browser: Any, make_server: ServerFactory, tmp_path: Path, locale: str,
        player_id: str) -> None:
    """ReplaceSeat: the former holder's page is told the seat is not theirs any more (its
    stream ends before the seat's SeatReplaced); the new holder's ticket opens a page whose
    history begins with that event's line (the seat's lines before it were its former
    holder's), and whose button takes the seat back."""
    said = TEXTS[locale]
    keys = tmp_path / "api-keys"
    keys.write_text(f"{BACKEND_KEY} backend-a\n", encoding="utf-8")
    served = await make_server(ws_port=0, api_keys_file=keys, bot_delay_ms=400)
    created = await served.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, stacked_deck=war_deck(), stacked_first_seat=0,
        war=war_pb2.WarOptions(target_points=50), seat_configs=[
            pb.SeatConfig(type=pb.SEAT_TYPE_PERSON, player_id="u-17", display_name="Ada"),
            pb.SeatConfig(type=pb.SEAT_TYPE_BOT)]), metadata=BACKEND)
    game_id, ticket = created.game.game_id, created.seat_tokens[0].seat_token
    former = await open_page(browser, served, f"#/ticket/{game_id}/{quote(ticket, safe='')}",
                             locale=locale)
    await expect(former.locator(".war-player")).to_have_count(2)
    await former.locator("#reveal").click()  # a line of the former holder's own
    await expect(former.locator("#history li")).not_to_have_count(0)
    replaced = await served.stub.ReplaceSeat(pb.ReplaceSeatRequest(
        game_id=game_id, seat=0, player_id=player_id,
        display_name="Bea" if player_id == "u-18" else ""), metadata=BACKEND)
    await expect(former.locator(".banner")).to_have_text(said["given_away"])
    assert former.errors == []
    ticket = replaced.seat_token.seat_token
    if not player_id:
        assert ticket == ""  # a bot keeps the seat for good: nobody to tell
        return
    page = await open_page(browser, served, f"#/ticket/{game_id}/{quote(ticket, safe='')}",
                           locale=locale)
    await expect(page.locator("#reclaim")).to_be_visible()
    await expect(page.locator("#history li").last).to_have_text(said["yours_now"])
    await take_it_back(page, said)
    seat = (await served.stub.GetGame(pb.GetGameRequest(game_id=game_id),
                                      metadata=BACKEND)).game.seats[0]
    assert not seat.bot_controlled
    assert page.errors == []
