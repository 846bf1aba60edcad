"""`tapis list` piped into another program: plain lines (bots and nameless people told apart),
and a reader that leaves early; `tapis replace-seat` piped: the new holder's token alone; a
refused table's settings said precisely."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from pathlib import Path
from types import SimpleNamespace

from tapis.v1 import game_service_pb2 as pb
from tapis_clients import listing
from tests.support.calls import auth, person_seats, refusal
from tests.support.server import ServerFactory

KEY = "backend-a-key-0123456789abcdef"


async def tapis(*args: str, stdout: int) -> tuple[int, bytes]:
    """Run the `tapis` CLI with ``stdout`` (a pipe's end), giving its exit code and stderr."""
    env = dict(os.environ)
    env.pop("TAPIS_TARGET", None)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tapis_clients.cli", *args, stdout=stdout,
        stderr=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL, env=env)
    _, err = await process.communicate()
    return process.returncode or 0, err


class _GetGameCounted:
    """A connection whose only call is GetGame, each answered with a person and a bot seat."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.stub = SimpleNamespace(GetGame="GetGame")

    async def call(self, method: object, request: pb.GetGameRequest) -> pb.GetGameResponse:
        self.asked.append(request.game_id)
        return pb.GetGameResponse(game=pb.GameView(seats=[
            pb.Seat(seat=0, type=pb.SEAT_TYPE_PERSON, taken=True),
            pb.Seat(seat=1, type=pb.SEAT_TYPE_BOT, taken=True)]))


async def test_list_asks_get_game_only_for_a_listing_that_does_not_type_its_seats() -> None:
    """A nameless seat is a bot's or a person's who gave no name: `tapis list` reads which from
    the listing's ``seat_types``, and asks GetGame only for a listing without them (an older
    server's, a table at rest since before the field)."""
    typed = pb.GameListing(game_id="typed", seats=2, display_names=["", ""],
                           seat_types=[pb.SEAT_TYPE_PERSON, pb.SEAT_TYPE_BOT])
    untyped = pb.GameListing(game_id="untyped", seats=2, display_names=["", ""])
    conn = _GetGameCounted()
    seats = await listing._seats_of(conn, [typed, untyped])  # type: ignore[arg-type]
    assert conn.asked == ["untyped"]
    assert [listing._sitter(typed, seat, "", []) for seat in (0, 1)] == ["(no name)", "bot"]
    assert [listing._sitter(untyped, seat, "", seats["untyped"]) for seat in (0, 1)] \
        == ["(no name)", "bot"]


async def test_list_names_bot_seats_and_leaves_a_closed_pipe_quietly(
        make_server: ServerFactory) -> None:
    h = await make_server()
    seats = [*person_seats(1), pb.SeatConfig(type=pb.SEAT_TYPE_BOT)]  # a person, a bot
    tables = [(await h.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, seat_configs=seats, request_id=uuid.uuid4().hex)))
        .game.game_id for _ in range(3)]
    await h.stub.JoinGame(pb.JoinGameRequest(game_id=tables[0], display_name="ana"))
    await h.stub.JoinGame(pb.JoinGameRequest(game_id=tables[1], display_name=""))
    target = f"127.0.0.1:{h.running.port}"
    listed = (await h.stub.ListGames(pb.ListGamesRequest())).games
    assert [list(g.seat_types) for g in listed] == [[pb.SEAT_TYPE_PERSON, pb.SEAT_TYPE_BOT]] * 3

    read_end, write_end = os.pipe()
    code, err = await tapis("list", "--target", target, stdout=write_end)
    os.close(write_end)
    with os.fdopen(read_end) as out:
        lines = out.read().splitlines()
    assert code == 0, err
    rows = [line.split("\t") for line in lines[1:]]
    assert len(rows) == 3
    assert sorted(row[-1] for row in rows) == ["(no name), bot", "-, bot", "ana, bot"]

    # `tapis list | head -0`: the reader is gone before the first line is written.
    read_end, write_end = os.pipe()
    os.close(read_end)
    code, err = await tapis("list", "--target", target, stdout=write_end)
    os.close(write_end)
    assert code == 0
    assert err == b""


async def test_replace_seat_prints_the_new_holder_s_token(make_server: ServerFactory,
                                                          tmp_path: Path) -> None:
    keys = tmp_path / "api-keys"
    keys.write_text(f"{KEY} backend-a\n", encoding="utf-8")
    h = await make_server(api_keys_file=keys)
    created = await h.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, seat_configs=[
            pb.SeatConfig(type=pb.SEAT_TYPE_PERSON, player_id=f"u-{seat}") for seat in (0, 1)]),
        metadata=(("x-api-key", KEY),))
    game_id, old = created.game.game_id, created.seat_tokens[1].seat_token
    target = f"127.0.0.1:{h.running.port}"
    read_end, write_end = os.pipe()
    code, err = await tapis("replace-seat", game_id, "1", "--player-id", "u-9", "--name", "Linus",
                            "--api-key", KEY, "--target", target, stdout=write_end)
    os.close(write_end)
    with os.fdopen(read_end) as out:
        token = out.read().strip()
    assert code == 0, err
    view = (await h.stub.GetGame(pb.GetGameRequest(game_id=game_id),
                                 metadata=auth(token))).game
    assert view.your_seat == 1 and view.seats[1].display_name == "Linus"
    assert await refusal(h.stub.GetGame(pb.GetGameRequest(game_id=game_id),
                                        metadata=auth(old))) == (
        "UNAUTHENTICATED", "TOKEN_REVOKED", "this seat token was revoked by the table's backend")
    code, err = await tapis("replace-seat", game_id, "1", "--target", target,
                            stdout=asyncio.subprocess.DEVNULL)
    assert code == 1 and b"API key" in err


async def test_a_refused_bot_strategy_is_named(make_server: ServerFactory) -> None:
    """The server's precise words for a table's settings it refuses (they name no card)."""
    h = await make_server()
    code, err = await tapis("play", "war", "--bot", "bogus", "--target",
                            f"127.0.0.1:{h.running.port}", stdout=asyncio.subprocess.DEVNULL)
    assert code == 1
    (line,) = err.decode().splitlines()
    assert line.startswith("tapis: these options do not fit the game: unknown bot 'bogus'"), line
    listed = await h.stub.ListGames(pb.ListGamesRequest(include_finished=True))
    assert not listed.games
