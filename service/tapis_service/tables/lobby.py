"""The ListGames index: the tables this server lists (in memory and at rest), so that a page
costs the page, not the tables held.

Each table has one row, ``(created_ms, game_id)`` (tables created in the same millisecond list
by id: the order is the same on every node, so a page token names a position in a cluster's
list too, cluster/listing.py), in one sorted list per *place*: who may see
it (public: everyone; private: its backend only), its kind, and whether it is finished. A page
merges the lists the caller may see (public ones, and its own backend's private ones; one
kind or all; finished ones too or not) from just after the previous page's last row, and stops
after ``limit`` rows: O(places × log n + page). The host keeps it in step with the tables it
holds (``put`` when a table is served or rests, ``remove`` when it leaves, ``changed`` after
each committed change, which moves a table whose game ended or restarted).
"""

from __future__ import annotations

import base64
import bisect
import heapq
from collections.abc import Iterator
from typing import NamedTuple

Row = tuple[int, str]
"""(created_ms, game_id): the listing's order, on every node alike."""


class Place(NamedTuple):
    """Which list a table's row is in (besides its owner's)."""

    kind: str
    finished: bool


class Lobby:
    """The tables listed, by owner (None: public) and place, each list in row order."""

    def __init__(self) -> None:
        self._rows: dict[str | None, dict[Place, list[Row]]] = {}
        self._where: dict[str, tuple[str | None, Place, Row]] = {}
        self.examined = 0
        """Rows a page has looked at, in all (the tests count the work of a page)."""

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, game_id: object) -> bool:
        return game_id in self._where

    def put(self, game_id: str, created_ms: int, kind: str, owner: str | None,
            finished: bool) -> None:
        """List a table (again: it moves if its place changed). ``owner``:
        the backend of a private table (None: public)."""
        place = Place(kind, finished)
        known = self._where.get(game_id)
        if known is not None:
            if known[0] == owner and known[1] == place:
                return
            self.remove(game_id)
        row = (created_ms, game_id)
        bisect.insort(self._rows.setdefault(owner, {}).setdefault(place, []), row)
        self._where[game_id] = (owner, place, row)

    def remove(self, game_id: str) -> None:
        known = self._where.pop(game_id, None)
        if known is None:
            return
        owner, place, row = known
        places = self._rows[owner]
        rows = places[place]
        at = bisect.bisect_left(rows, row)
        if at < len(rows) and rows[at] == row:
            del rows[at]
        if not rows:
            del places[place]
            if not places:
                del self._rows[owner]

    def finished(self, game_id: str, finished: bool) -> None:
        """A listed table's game ended (or a next one started)."""
        known = self._where.get(game_id)
        if known is not None and known[1].finished != finished:
            owner, place, row = known
            self.put(game_id, row[0], place.kind, owner, finished)

    def page(self, backend: str | None, kind: str | None, include_finished: bool,
             after: Row | None) -> Iterator[Row]:
        """The rows ``backend`` (None: a caller without a key) may see, of ``kind`` (None:
        all), finished ones too if asked, after ``after``, in order; the caller stops
        iterating when its page is full."""
        lists = []
        for owner in (None, backend) if backend is not None else (None,):
            for place, rows in self._rows.get(owner, {}).items():
                if (kind is None or place.kind == kind) and (include_finished
                                                             or not place.finished):
                    lists.append(rows)
        starts = [bisect.bisect_right(rows, after) if after is not None else 0
                  for rows in lists]
        for row in heapq.merge(*(_from(rows, start) for rows, start in zip(lists, starts,
                                                                            strict=True))):
            self.examined += 1
            yield row


def _from(rows: list[Row], start: int) -> Iterator[Row]:
    """``rows[start:]`` without copying it."""
    for at in range(start, len(rows)):
        yield rows[at]


class Cursor(NamedTuple):
    """Where a page starts: after a listed row, or among the quarantined tables (listed after
    the others, by id) after a game id."""

    after: Row | None = None
    quarantined_after: str | None = None


def token_after(row: Row | None = None, quarantined: str | None = None) -> str:
    """The ``next_page_token`` of a page whose last line is ``row`` (or that quarantined
    table)."""
    if quarantined is not None:
        text = f"q{quarantined}"
    else:
        assert row is not None
        text = f"k{row[0]}.{row[1]}"
    return base64.urlsafe_b64encode(text.encode()).decode()


def cursor_of(token: str) -> Cursor:
    """The cursor a ``page_token`` names: ``k<created_ms>.<game_id>`` or ``q<game_id>``,
    base64 (``ValueError`` if it names none: the offsets a cluster once gave are refused)."""
    if not token:
        return Cursor()
    text = base64.urlsafe_b64decode(token.encode()).decode()
    if text.startswith("q"):
        return Cursor(quarantined_after=text[1:])
    created, dot, game_id = text[1:].partition(".")
    if not text.startswith("k") or not dot or not game_id:
        raise ValueError("not a page token")  # an offset or a (created, order, id) of old
    return Cursor(after=(int(created), game_id))
