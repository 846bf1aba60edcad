"""Pictures of the client for the README: each game's screen at 80x24, as SVG, in docs/screens/.

``python tools/screens.py`` (``make screens``) starts a server in this process (stacked decks
allowed, bots without delay), sets up a table per scene through the public API, opens the
client's Textual app on it headless at 80x24, plays the scene's keys and saves what the screen
shows. The scenes are deterministic (stacked decks and seeds), so the pictures change only when
the screens do.
"""

from __future__ import annotations

import argparse
import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from textual.pilot import Pilot

from tapis.v1 import bataille_corse_pb2 as corse_pb2
from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import war_pb2
from tapis.v1.cards_pb2 import Card
from tapis_clients import i18n
from tapis_clients.app import TableApp
from tapis_clients.connection import Connection
from tapis_service.process.server import create_server
from tapis_service.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "screens"
SIZE = (80, 24)
PATIENCE_S = 20.0


def card(rank: int, suit: int = 0) -> Card:
    return Card(rank=rank, suit=suit)  # type: ignore[arg-type]


def deck(first: list[Card], jokers: int = 0) -> list[Card]:
    """A whole deck with ``first`` on top."""
    top = {(c.rank, c.suit) for c in first}
    return [*first, *(card(r, s) for s in (1, 2, 3, 4) for r in range(2, 15)
                      if (r, s) not in top),
            *(card(15) for _ in range(jokers))]


@dataclass
class Table:
    conn: Connection
    game_id: str
    tokens: list[str]
    """Seat tokens of the people seated (seat 0 is the screen's)."""

    async def act(self, seat: int, action: pb.Action) -> None:
        await self.conn.call(self.conn.stub.SubmitAction, pb.SubmitActionRequest(
            game_id=self.game_id, action=action, request_id=uuid.uuid4().hex),
            self.tokens[seat])


async def table(conn: Connection, request: pb.CreateGameRequest, people: list[str]) -> Table:
    request.request_id = uuid.uuid4().hex
    created = (await conn.call(conn.stub.CreateGame, request)).game
    tokens = []
    for seat, name in enumerate(people):
        joined = await conn.call(conn.stub.JoinGame, pb.JoinGameRequest(
            game_id=created.game_id, seat=seat, display_name=name, request_id=uuid.uuid4().hex))
        tokens.append(joined.seat_token)
    return Table(conn, created.game_id, tokens)


async def until(pilot: Pilot[int], app: TableApp, shown: Callable[[TableApp], bool]) -> None:
    """Let the app run until ``shown`` holds (or fail after PATIENCE_S)."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + PATIENCE_S
    while not shown(app):
        if loop.time() > give_up:
            raise TimeoutError("the scene never reached its picture")
        await pilot.pause(0.05)


def my_move(app: TableApp) -> bool:
    return bool(app.actions) and app.drawn_version == app.view.version


Scene = Callable[[Connection], Awaitable[tuple[Table, Callable[[Pilot[int], TableApp],
                                                                Awaitable[None]]]]]


async def war_tie(conn: Connection) -> tuple[Table, Callable[[Pilot[int], TableApp],
                                                            Awaitable[None]]]:
    tie = [card(10, 1), card(10, 3), card(4, 1),
           card(6, 2), card(9, 4), card(3, 3)]
    request = pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, turn_time_limit_ms=15_000, stacked_deck=deck(tie),
        stacked_first_seat=0, seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_PERSON),
                                            pb.SeatConfig(type=pb.SEAT_TYPE_BOT)])
    played = await table(conn, request, ["ana"])

    async def play(pilot: Pilot[int], app: TableApp) -> None:
        await until(pilot, app, my_move)
        await pilot.press("r")
        await until(pilot, app, lambda app: app.view.war.batailles > 0 and my_move(app))
        await pilot.pause(1.2)  # the countdown under way
    return played, play


async def war_end(conn: Connection) -> tuple[Table, Callable[[Pilot[int], TableApp],
                                                            Awaitable[None]]]:
    request = pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, stacked_deck=deck([card(14, 4),
                                                           card(2, 1)]),
        stacked_first_seat=0, war=war_pb2.WarOptions(target_points=1),
        seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_PERSON),
                      pb.SeatConfig(type=pb.SEAT_TYPE_BOT)])
    played = await table(conn, request, ["ana"])

    async def play(pilot: Pilot[int], app: TableApp) -> None:
        for _game in range(2):
            await until(pilot, app, my_move)
            await pilot.press("r")
            await until(pilot, app, lambda app: app.modal_open)
            if _game == 0:
                await pilot.press("enter")
                await until(pilot, app, lambda app: app.view.game_number == 2)
    return played, play


async def corse_slap(conn: Connection) -> tuple[Table, Callable[[Pilot[int], TableApp],
                                                               Awaitable[None]]]:
    request = pb.CreateGameRequest(
        kind=pb.GAME_KIND_BATAILLE_CORSE, seats=3,
        stacked_deck=deck([card(5, 1), card(5, 2), card(8, 3),
                           card(12, 4), card(3, 2)], jokers=2),
        seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_PERSON)] * 3)
    played = await table(conn, request, ["ana", "bo", "cy"])
    flip = pb.Action(bataille_corse=corse_pb2.BatailleCorseAction(
        flip=corse_pb2.BatailleCorseFlip()))

    async def play(pilot: Pilot[int], app: TableApp) -> None:
        await until(pilot, app, my_move)
        await pilot.press("f")
        await until(pilot, app, lambda app: app.view.bataille_corse.pile_size == 1)
        await played.act(1, flip)
        await until(pilot, app, lambda app: app.view.bataille_corse.pile_size == 2
                    and my_move(app))
        await pilot.pause(0.4)
        await pilot.press("s")
        await until(pilot, app, lambda app: bool(app.memory.caption(app.table)) and my_move(app))
    return played, play


async def basra_four(conn: Connection) -> tuple[Table, Callable[[Pilot[int], TableApp],
                                                               Awaitable[None]]]:
    request = pb.CreateGameRequest(
        kind=pb.GAME_KIND_BASRA, seats=4, seed=11,
        seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_PERSON)] + [
            pb.SeatConfig(type=pb.SEAT_TYPE_BOT)] * 3)
    played = await table(conn, request, ["ana"])

    async def play(pilot: Pilot[int], app: TableApp) -> None:
        for _turn in range(2):
            await until(pilot, app, my_move)
            await pilot.press("1")
        await until(pilot, app, my_move)
    return played, play


async def boutons_three(conn: Connection) -> tuple[Table, Callable[[Pilot[int], TableApp],
                                                                  Awaitable[None]]]:
    request = pb.CreateGameRequest(
        kind=pb.GAME_KIND_BOUTONS, seats=3, seed=5,
        seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_PERSON)] + [
            pb.SeatConfig(type=pb.SEAT_TYPE_BOT)] * 2)
    played = await table(conn, request, ["ana"])

    async def play(pilot: Pilot[int], app: TableApp) -> None:
        await until(pilot, app, my_move)
        await pilot.press("r", "h")
        await until(pilot, app, my_move)
    return played, play


SCENES: dict[str, tuple[str, Scene]] = {
    "war": ("en", war_tie),
    "war-end": ("en", war_end),
    "war-fr": ("fr", war_tie),
    "corse": ("en", corse_slap),
    "basra": ("en", basra_four),
    "boutons": ("en", boutons_three),
}
"""File name (docs/screens/NAME.svg) -> the language and the scene."""


async def shoot(name: str, lang: str, scene: Scene, target: str, out: Path = OUT) -> Path:
    i18n.use(lang)
    conn = Connection(target)
    try:
        played, play = await scene(conn)
        view = (await conn.call(conn.stub.GetGame, pb.GetGameRequest(game_id=played.game_id),
                                played.tokens[0])).game
        app = TableApp(conn, view, 0, played.tokens[0])
        async with app.run_test(size=SIZE) as pilot:
            await play(pilot, app)
            await pilot.pause(0.2)
            path = out / f"{name}.svg"
            path.write_text(app.export_screenshot(title=f"tapis play — {name}"))
            app.exit()
        return path
    finally:
        await conn.close()
        i18n.use("en")


async def main(names: list[str]) -> None:
    settings = Settings(port=0, allow_stacked_decks=True, bot_delay_ms=0)
    running = await create_server(settings)
    OUT.mkdir(parents=True, exist_ok=True)
    try:
        for name in names or list(SCENES):
            lang, scene = SCENES[name]
            print(await shoot(name, lang, scene, f"127.0.0.1:{running.port}"))
    finally:
        await running.stop(0)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", choices=[*SCENES, []], help="scenes (default: all)")
    asyncio.run(main(parser.parse_args().names))
