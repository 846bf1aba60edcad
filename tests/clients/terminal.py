"""A client process on a real pseudo-terminal, its screen emulated by pyte: tests type keys and
wait until the screen shows what they expect (no sleeps; a generous overall timeout)."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import signal
import struct
import sys
import termios
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import pyte

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import war_pb2
from tapis.v1.cards_pb2 import Card
from tests.support.calls import REVEAL, auth, person_seats
from tests.support.server import Harness, ServerFactory

ROWS, COLUMNS = 24, 80
PATIENCE_S = 30.0
"""How long a test waits for a screen before failing (never a condition of correctness)."""


CHILD = ("import os, runpy, sys; "
         # A new session's leader opening its tty makes it the controlling terminal, so that
         # Ctrl-C on the pty sends SIGINT to the client as in a real terminal.
         "os.close(os.open(os.ttyname(0), os.O_RDWR)); "
         "sys.argv = ['tapis', *sys.argv[1:]]; "
         "runpy.run_module('tapis_clients.cli', run_name='__main__')")


class Terminal:
    """``python -m tapis_clients.cli ARGS`` on a pty of 24×80 (``resize`` changes it)."""

    def __init__(self, process: asyncio.subprocess.Process, master: int, slave: int,
                 state_dir: Path) -> None:
        self.process = process
        self.state_dir = state_dir
        self.master = master
        self.slave = slave
        self.screen = pyte.Screen(COLUMNS, ROWS)
        self.stream = pyte.ByteStream(self.screen)
        self.updated = asyncio.Event()
        self.closed = False
        asyncio.get_running_loop().add_reader(master, self._read)

    @classmethod
    async def start(cls, *args: str, state_dir: Path, size: tuple[int, int] = (COLUMNS, ROWS),
                    environ: dict[str, str] | None = None) -> Terminal:
        columns, rows = size
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        env = dict(os.environ, TAPIS_STATE_DIR=str(state_dir), TERM="xterm-256color",
                   LANG="C.UTF-8")
        env["TAPIS_NAME"] = "cli"  # a person's name, never asked (unless a test unsets it)
        env.update(environ or {})
        for name in ("TAPIS_TARGET", "LC_ALL", "LC_MESSAGES", "COLUMNS", "LINES"):
            if name not in (environ or {}):
                env.pop(name, None)
        if not env["TAPIS_NAME"]:
            del env["TAPIS_NAME"]
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", CHILD, *args, stdin=slave, stdout=slave, stderr=slave,
            env=env, start_new_session=True)
        term = cls(process, master, slave, state_dir)
        term.screen.resize(rows, columns)
        return term

    def _read(self) -> None:
        try:
            data = os.read(self.master, 65536)
        except OSError:
            data = b""
        if not data:
            asyncio.get_running_loop().remove_reader(self.master)
            self.closed = True
        else:
            self.stream.feed(data)
        self.updated.set()

    @property
    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.screen.display)

    def resize(self, columns: int, rows: int) -> None:
        """Change the terminal's size, as a window resized (the client gets SIGWINCH)."""
        self.screen.resize(rows, columns)
        fcntl.ioctl(self.slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        os.killpg(self.process.pid, signal.SIGWINCH)

    def rows(self) -> list[str]:
        return [line.rstrip() for line in self.screen.display]

    async def wait_for(self, check: Callable[[str], bool] | str,
                       what: str | None = None) -> str:
        """Wait until the screen passes ``check`` (or shows a text); the screen text."""
        test = (lambda text: check in text) if isinstance(check, str) else check
        loop = asyncio.get_running_loop()
        give_up = loop.time() + PATIENCE_S
        while not test(self.text):
            if self.closed and self.process.returncode is not None:
                break
            self.updated.clear()
            left = give_up - loop.time()
            if left <= 0:
                break
            try:
                await asyncio.wait_for(self.updated.wait(), min(left, 1.0))
            except TimeoutError:
                continue
        text = self.text
        assert test(text), f"the screen never showed {what or check!r}:\n{text}"
        return text

    async def next_update(self, timeout_s: float = 1.0) -> None:
        """Wait for the screen to change (or ``timeout_s``)."""
        self.updated.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.updated.wait(), timeout_s)

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    async def exit_status(self) -> int:
        return await asyncio.wait_for(self.process.wait(), PATIENCE_S)

    async def quit(self) -> int:
        """Press ``q`` until the client exits; its exit status.

        The client throws away keys typed for an older screen (``tcflush`` when the table moves
        on), so a ``q`` that reaches the terminal just before a redraw can be dropped, as it
        would be for a person, who presses it again: so does this, once a second.
        """
        loop = asyncio.get_running_loop()
        give_up = loop.time() + PATIENCE_S
        while True:
            self.type("q")
            try:
                return await asyncio.wait_for(asyncio.shield(self.process.wait()), 1.0)
            except TimeoutError:
                if loop.time() > give_up:
                    raise

    def slave_modes(self) -> list[int]:
        """The pty's line modes now (lflag): ICANON and ECHO are back after the client."""
        return termios.tcgetattr(self.slave)

    async def close(self) -> None:
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        loop = asyncio.get_running_loop()
        loop.remove_reader(self.master)
        os.close(self.master)
        os.close(self.slave)


StartTerminal = Callable[..., Awaitable[Terminal]]
"""The ``terminal`` fixture: starts ``tapis ARGS`` on a pty (closed at the test's end)."""


def target(h: Harness) -> str:
    return f"127.0.0.1:{h.running.port}"


async def war_for_two(h: Harness, turn_ms: int = 0, deck: list[Card] | None = None,
                      points: int = 20) -> tuple[str, str]:
    """A War table for two people; the test sits at seat 0 (its token), the CLI gets seat 1."""
    request = pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, seat_configs=person_seats(2),
        turn_time_limit_ms=turn_ms, request_id=uuid.uuid4().hex,
        war=war_pb2.WarOptions(target_points=points))
    if deck:
        request.stacked_deck.extend(deck)
        request.stacked_first_seat = 0
    else:
        request.seed = 4
    created = await h.stub.CreateGame(request)
    joined = await h.stub.JoinGame(pb.JoinGameRequest(
        game_id=created.game.game_id, seat=0, display_name="tester"))
    return created.game.game_id, joined.seat_token


BACKEND_KEY = "backend-a-key-0123456789abcdef"
BACKEND = (("x-api-key", BACKEND_KEY),)
"""The metadata of ``backend_war``'s backend."""


async def backend_war(make_server: ServerFactory, folder: Path
                      ) -> tuple[Harness, pb.CreateGameResponse]:
    """A server that knows one backend's key (``BACKEND``), and that backend's War table to 20
    points: seat 0 its player "tester" (u-1, the test plays it), seat 1 open (the CLI)."""
    keys = folder / "api-keys"
    keys.write_text(f"{BACKEND_KEY} backend-a\n", encoding="utf-8")
    h = await make_server(api_keys_file=keys)
    created = await h.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, seed=4, visibility=pb.VISIBILITY_PUBLIC,
        war=war_pb2.WarOptions(target_points=20), seat_configs=[
            pb.SeatConfig(type=pb.SEAT_TYPE_PERSON, player_id="u-1", display_name="tester"),
            pb.SeatConfig(type=pb.SEAT_TYPE_PERSON)]), metadata=BACKEND)
    return h, created


async def view(h: Harness, game_id: str, token: str = "") -> pb.GameView:
    return (await h.stub.GetGame(pb.GetGameRequest(game_id=game_id),
                                 metadata=auth(token) if token else None)).game


WAR_SCREEN = {"en": ("(you)", "deck 26", "reveal your top card"),
              "fr": ("(vous)", "paquet 26", "retourner votre carte du dessus")}
"""A War table's first screen in each language: the CLI's seat, its deck, its move."""


async def cli_to_move(h: Harness, game_id: str, token: str, term: Terminal,
                      language: str = "en") -> pb.GameView:
    """Play the test's seat until the CLI's seat (1) is awaited and its menu is on screen (in
    ``language``)."""
    you, deck, reveal = WAR_SCREEN[language]
    await term.wait_for(lambda text: you in text and deck in text,
                        "the CLI seated and the game started")
    table = await view(h, game_id)
    if table.awaiting_seats[0] == 0:
        await h.stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=REVEAL),
                                  metadata=auth(token))
        table = await view(h, game_id)
    assert table.awaiting_seats[0] == 1
    await term.wait_for(reveal)
    return table
