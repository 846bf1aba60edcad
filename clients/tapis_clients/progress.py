"""`tapis-bot selfplay`'s progress lines on stderr, while its games are played."""

from __future__ import annotations

import asyncio
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tapis_clients.bot import Stats

PROGRESS_EVERY_S = 5.0
"""Seconds between two progress lines on stderr while no game finishes."""


class Progress:
    """Progress lines on stderr (stdout keeps the one JSON summary): one every ``every`` games
    finished, and one every ``PROGRESS_EVERY_S`` seconds with no game finished."""

    def __init__(self, total: int, every: int, stats: Stats) -> None:
        self.total = total
        self.every = max(1, every)
        self.stats = stats
        self.done = 0
        self.started = time.perf_counter()

    def line(self) -> None:
        seconds = time.perf_counter() - self.started
        print(f"selfplay: {self.done}/{self.total} games done, {self.stats.actions} actions, "
              f"{len(self.stats.errors)} errors, {seconds:.1f} s", file=sys.stderr, flush=True)

    def game_done(self) -> None:
        self.done += 1
        if self.done % self.every == 0 or self.done == self.total:
            self.line()

    async def tick(self) -> None:
        """A line every few seconds (until cancelled), for long games."""
        while True:
            await asyncio.sleep(PROGRESS_EVERY_S)
            self.line()
