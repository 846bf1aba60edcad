"""A move sent from the table screen (TableApp, driven by Textual's pilot at 80x24) to a
scripted server: refused, the menu comes back and the refusal stays said; in doubt, it is
resent with its request_id, then said to be in doubt, not refused; it carries the version it
was chosen on."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import grpc
import pytest
from textual import events
from textual.pilot import Pilot

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import war_pb2
from tapis_clients import i18n
from tapis_clients.app import TableApp
from tapis_clients.connection import IN_DOUBT_ATTEMPTS
from tests.support.calls import REVEAL
from tests.support.calls import refusal_error as refusal
from tests.support.screens import ScriptedServer, scripted, until


def war_view(version: int) -> pb.GameView:
    """Seat 0's view of a War table for two where seat 0 is to reveal."""
    return pb.GameView(
        game_id="g", kind=pb.GAME_KIND_WAR, status=pb.GAME_STATUS_IN_PROGRESS, your_seat=0,
        version=version, awaiting_seats=[0], legal_actions=[REVEAL],
        seats=[pb.Seat(seat=seat, type=pb.SEAT_TYPE_PERSON, taken=True, display_name=name)
               for seat, name in ((0, "ana"), (1, "bo"))],
        war=war_pb2.WarView(deck_sizes=[26, 26], points=[0, 0], target_points=50, to_move=0))


@contextlib.asynccontextmanager
async def table_screen(server: ScriptedServer) -> AsyncIterator[tuple[TableApp, Pilot[int]]]:
    """Seat 0's table screen on ``server``, at 80x24, once its menu is drawn."""
    async with scripted(server) as conn:
        app = TableApp(conn, server.view, 0, "token")
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: bool(app.actions))
            yield app, pilot


def keys_row(app: TableApp) -> str:
    return str(app.query_one("#keys").render())


async def test_a_refused_move_on_a_table_that_did_not_move_brings_the_menu_back() -> None:
    """The menu is spent by the move sent (one move per table version); refused, and the
    table still at the version it was drawn on, it comes back: Enter plays again."""
    server = ScriptedServer(war_view(2), [
        refusal(grpc.StatusCode.FAILED_PRECONDITION, "NOT_ALLOWED_NOW"),
        pb.SubmitActionResponse()])
    async with table_screen(server) as (app, pilot):
        await pilot.press("enter")
        await until(pilot, lambda: bool(app.status) and bool(app.actions))
        assert "that move is not allowed now" in app.status
        assert "keys or numbers play" in keys_row(app), keys_row(app)
        await pilot.press("enter")
        await until(pilot, lambda: len(server.sent) == 2)
    assert [sent.action for sent in server.sent] == [REVEAL, REVEAL]


async def test_a_move_the_table_moved_past_is_said_after_the_table_is_read_again() -> None:
    """STALE_VERSION is said in yellow (look again); the refresh that follows it clears only
    the "reconnecting" line, not this one."""
    server = ScriptedServer(war_view(2), [refusal(grpc.StatusCode.ABORTED, "STALE_VERSION")])
    async with table_screen(server) as (app, pilot):
        server.view = war_view(3)  # the table moved; the screen has not read it yet
        await pilot.press("enter")
        await until(pilot, lambda: app.drawn_version == 3)
        assert "the table moved on before your move" in app.status, app.status


def lost_answer() -> grpc.aio.AioRpcError:
    """The server's answer to a fault of its own, which may come after the move applied."""
    return refusal(grpc.StatusCode.INTERNAL, "INTERNAL", retry_delay_ms="0")


async def test_a_move_whose_answer_was_lost_is_resent_with_its_request_id() -> None:
    server = ScriptedServer(war_view(2), [lost_answer(), pb.SubmitActionResponse()])
    async with table_screen(server) as (app, pilot):
        await pilot.press("enter")
        await until(pilot, lambda: len(server.sent) == 2)
        await pilot.pause()
        assert app.status == ""
    assert server.sent[0] == server.sent[1]  # the same request_id: never applied twice


@pytest.mark.parametrize(("lang", "said"), [
    ("en", "the server may not have taken your move: look at the table"),
    ("fr", "le serveur n'a peut-être pas pris votre coup : regardez la table")])
async def test_a_move_still_in_doubt_is_said_so_not_refused(lang: str, said: str) -> None:
    """Resent as it was a few times, in doubt each time: the status line says the move may
    not have been taken (never "refused"), and the menu comes back."""
    i18n.use(lang)  # the clients' conftest speaks English again afterwards
    server = ScriptedServer(war_view(2), [lost_answer() for _ in range(IN_DOUBT_ATTEMPTS)])
    async with table_screen(server) as (app, pilot):
        await pilot.press("enter")
        await until(pilot, lambda: bool(app.status) and bool(app.actions))
        assert said in app.status and "refus" not in app.status, app.status
    assert len(server.sent) == IN_DOUBT_ATTEMPTS
    assert len({sent.request_id for sent in server.sent}) == 1


async def test_a_move_carries_the_version_its_menu_was_drawn_on() -> None:
    """The screen read the table again (version 3) between the key that chose a move on
    version 2's menu and the move's sending: the move says version 2, so that the server
    refuses it (STALE_VERSION) instead of applying it to a table its player has not seen."""
    server = ScriptedServer(war_view(2), [pb.SubmitActionResponse()])
    async with table_screen(server) as (app, pilot):
        server.view = war_view(3)
        app.changed.set()  # the refresh reads version 3 first...
        app.on_key(events.Key("enter", "\r"))  # ...then the move chosen on 2 is sent
        await until(pilot, lambda: bool(server.sent))
        assert app.view.version == 3
    assert server.sent[0].expected_version == 2
