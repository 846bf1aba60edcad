"""A keyboard player's focus survives the table's redraws: the page draws the table anew for
every change (the other seat's move, a presence mark, a refresh), and the control the player
had tabbed to is focused again, not dropped to the page's body."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tapis.v1 import bataille_corse_pb2 as corse_pb2
from tapis.v1 import game_service_pb2 as pb
from tests.browser.tables import boutons_against_the_computer, corse_for_two
from tests.support.browser import open_page, socket_to
from tests.support.server import Harness

expect = pytest.importorskip(  # installed by `make test-browser`
    "playwright.async_api", reason="needs Playwright for Python (make test-browser)").expect


async def test_the_focused_control_is_focused_again_after_the_other_seat_moves(
        browser: Any, served: Harness) -> None:
    client = await socket_to(served)
    game_id, other = await corse_for_two(client)
    page = await open_page(browser, served, f"#/join/{game_id}")
    await page.locator("#flip").click()  # 5♠: the other seat to flip
    await expect(page.locator("#pile .card")).to_have_count(1)
    slap = page.locator("#slap")
    await slap.focus()
    await expect(slap).to_be_focused()
    flip = pb.Action(bataille_corse=corse_pb2.BatailleCorseAction(
        flip=corse_pb2.BatailleCorseFlip()))
    answer = await client.call(seat_token=other, submit_action=pb.SubmitActionRequest(
        game_id=game_id, action=flip))  # 5♥: the page draws the table again
    assert answer.HasField("submit_action")
    await expect(page.locator("#pile .card")).to_have_count(2)
    await expect(slap).to_be_focused()
    await page.keyboard.press("Enter")  # the double, slapped from where the focus stayed
    await expect(page.locator("#pile .card")).to_have_count(0)
    assert page.errors == []
    client.close()


async def test_a_colour_chosen_from_the_keyboard_keeps_the_focus(
        browser: Any, served: Harness) -> None:
    """Boutons' colour choice redraws the game's part of the page at once (no server call)."""
    client = await socket_to(served)
    page = await open_page(browser, served,
                           f"#/join/{await boutons_against_the_computer(client)}")
    choices = page.locator("button.colour-choice")
    await expect(choices.nth(1)).to_be_visible()
    second = page.locator(f'button.colour-choice[data-colour="'
                          f'{await choices.nth(1).get_attribute("data-colour")}"]')
    await second.focus()
    await page.keyboard.press("Enter")
    await expect(second).to_have_class(re.compile(r"\bchosen\b"))
    await expect(second).to_be_focused()
    assert page.errors == []
    client.close()
