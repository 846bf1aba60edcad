"""`tapis list`: the tables on the server, as JSON, as plain lines for a pipe, or as a table on a
terminal; a seat is named by who sits there (a bot, a person, or nobody yet)."""

from __future__ import annotations

import argparse
import asyncio
import json

import grpc
from google.protobuf import json_format
from rich.console import Console
from rich.table import Table

from tapis.v1 import game_service_pb2 as pb
from tapis_clients import games
from tapis_clients.connection import Connection
from tapis_clients.i18n import N_, _

console = Console()

STATUS_WORDS = {pb.GAME_STATUS_WAITING_FOR_PLAYERS: N_("waiting for players"),
                pb.GAME_STATUS_IN_PROGRESS: N_("playing"),
                pb.GAME_STATUS_GAME_OVER: N_("between games"),
                pb.GAME_STATUS_QUARANTINED: N_("closed (damaged)"),
                pb.GAME_STATUS_ABANDONED: N_("abandoned")}
"""A table's status as people say it (a finished game is a series waiting for its next)."""
UNKNOWN_STATUS = N_("unknown")

NO_NAME = N_("(no name)")
"""A seat taken by someone who gave no name (or whose kind the listing could not learn)."""
SEATS_LOOKED_UP_AT_ONCE = 8


def _nameless(listing: pb.GameListing) -> bool:
    """Some taken seat of the table has no name: a server bot's, or a person who gave none."""
    return any(not name and seat not in listing.open_seats
               for seat, name in enumerate(listing.display_names))


def _typed(listing: pb.GameListing) -> bool:
    """The listing says which seats are bots (``seat_types``: not from a table at rest since
    before the field, nor from an older server)."""
    return len(listing.seat_types) == listing.seats


async def _seats_of(conn: Connection, listings: list[pb.GameListing]
                    ) -> dict[str, list[pb.Seat]]:
    """The seats of each table with a nameless taken seat whose listing does not say which
    seats are bots, as GetGame shows them; a table that cannot be looked at (gone since) has
    none."""
    unsure = [g.game_id for g in listings if _nameless(g) and not _typed(g)]
    limit = asyncio.Semaphore(SEATS_LOOKED_UP_AT_ONCE)

    async def seats(game_id: str) -> list[pb.Seat]:
        async with limit:
            try:
                view = (await conn.call(conn.stub.GetGame,
                                        pb.GetGameRequest(game_id=game_id))).game
            except grpc.aio.AioRpcError:
                return []
            return list(view.seats)

    return dict(zip(unsure, await asyncio.gather(*map(seats, unsure)), strict=True))


def _sitter(listing: pb.GameListing, seat: int, name: str, seats: list[pb.Seat]) -> str:
    """Who sits at ``seat`` in ``tapis list``: a name, "-" for an open seat, "bot" for a
    server bot's (they have no name), and "(no name)" for a person who gave none."""
    if name:
        return name
    if seat in listing.open_seats:
        return "-"
    if _typed(listing):
        bot = listing.seat_types[seat] == pb.SEAT_TYPE_BOT
    else:
        bot = seat < len(seats) and seats[seat].type == pb.SEAT_TYPE_BOT
    if bot:
        return _("bot")
    return _(NO_NAME)


async def list_games(conn: Connection, args: argparse.Namespace) -> None:
    """Every table (page after page), as JSON, plain tab-separated lines when piped, or a
    table on a terminal; ids are never cut. Tables between two games of a series are listed
    too (a finished game is a series waiting for its next)."""
    listings: list[pb.GameListing] = []
    token = ""
    while True:
        page = await conn.call(conn.stub.ListGames, pb.ListGamesRequest(
            include_finished=True, page_size=args.page_size, page_token=token))
        listings.extend(page.games)
        token = page.next_page_token
        if not token or (args.limit and len(listings) >= args.limit):
            break
    if not args.all:
        listings = [g for g in listings
                    if g.status in (pb.GAME_STATUS_WAITING_FOR_PLAYERS,
                                    pb.GAME_STATUS_IN_PROGRESS)
                    or (g.status == pb.GAME_STATUS_GAME_OVER and not g.open_seats)]
    if args.limit:
        listings = listings[:args.limit]
    if args.json:
        print(json.dumps([json_format.MessageToDict(g, preserving_proto_field_name=True,
                                                    always_print_fields_with_no_presence=True)
                          for g in listings], indent=1))
        return
    seats = await _seats_of(conn, listings)
    rows = [(g.game_id, games.command_name(g.kind),
             _(STATUS_WORDS.get(g.status, UNKNOWN_STATUS)), str(g.seats),
             ", ".join(map(str, g.open_seats)) or "-", str(g.game_number),
             ", ".join(_sitter(g, seat, name, seats.get(g.game_id, []))
                       for seat, name in enumerate(g.display_names)))
            for g in listings]
    header = (_("table"), _("game"), _("status"), _("seats"), _("open seats"), _("game #"),
              _("players"))
    if not console.is_terminal:
        for row in (header, *rows):
            print("\t".join(row))
        return
    grid = Table()
    grid.add_column(header[0], no_wrap=True,
                    min_width=max((len(r[0]) for r in rows), default=4))
    for column in header[1:]:
        grid.add_column(column)
    for row in rows:
        grid.add_row(*row)
    if len(rows) + 4 > console.height:  # longer than the screen: page it (less, $PAGER)
        with console.pager(styles=True):
            console.print(grid)
    else:
        console.print(grid)
    if not rows:
        console.print(_("no tables yet: `tapis create` or `tapis play` makes one"), markup=False)
