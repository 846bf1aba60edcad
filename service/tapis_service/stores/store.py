"""Where tables are persisted. The in-memory store keeps nothing beyond the process."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Generator, Iterable
from typing import Any, Final, Protocol, TypeVar, runtime_checkable

JSON = dict[str, Any]
StoredGame = tuple[JSON, JSON | None, list[JSON]]
"""One stored table: (creation record, last snapshot or None, the whole journal)."""
YIELD_EVERY = 32
"""Tables read or restored at start between two turns of the event loop: recovery yields so
the port keeps answering health (``liveness``) however many tables there are."""
T = TypeVar("T")


async def paced(items: Iterable[T]) -> AsyncIterator[T]:
    """Each of ``items``, with a turn of the event loop every ``YIELD_EVERY``."""
    for number, item in enumerate(items, 1):
        if number % YIELD_EVERY == 0:
            await asyncio.sleep(0)
        yield item


class RecoveryError(Exception):
    """A stored game cannot be restored faithfully: the host quarantines it (raised by
    ``recovery`` and by a store that cannot read what it holds)."""


class StoreError(Exception):
    """A write the store did not commit, or (``CommitUnknown``) cannot say it did: the host
    discards the game's in-memory session and rebuilds it from what is durable."""


class StoreUnavailable(StoreError):
    """The store refuses writes for now (disk full, I/O error, database unreachable): a retry
    may succeed once it accepts writes again."""


class CommitUnknown(StoreError):
    """The store cannot know whether the write was committed (the connection to the database
    was lost while it ran or committed): it may have been applied, or not. Reading the store
    again says which; a client retries with the same request id."""


class StoreCorrupt(Exception):
    """The store's file (or database) cannot be read as a Tapis store at all: the server
    refuses to start (exit 2) rather than serve without it."""


class SchemaTooNew(StoreCorrupt):
    """The store's schema is newer than this server knows (a newer server wrote it): the
    server refuses to start (exit 2) rather than misread it; upgrade the server."""


class StoreInUse(Exception):
    """Another server holds the store's directory: this one refuses to start (exit 2)."""


class JournalConflict(StoreError):
    """The journal already holds an input at this (game_id, index): another writer appended
    first (in a cluster, another node owns the table now)."""


class CreateConflict(JournalConflict):
    """Another server already created the table of this CreateGame request id (a cluster)."""


class Store(Protocol):
    """Persistence, called in the order things happen.

    A write (``created``, ``appended``, ``snapshot``, ``dropped``, ``probe``) is queued when it
    is called, in call order, and returns an awaitable that completes once the write is
    committed (durable); a write that is not committed completes with a ``StoreError``:
    ``StoreUnavailable`` when the store refuses writes for now, ``JournalConflict`` when the
    journal already holds that index or the table's fencing ``epoch`` moved on (a store that
    is not fenced ignores epochs), ``CommitUnknown`` when the store cannot know whether it
    committed. ``appended`` never overwrites an existing (game_id, index). A snapshot or a
    drop that fails costs nothing: nobody waits for it.
    """

    keeps_journal: bool
    """False for a store that keeps nothing: the host then builds no journal entry nor
    snapshot for it."""

    def created(self, game_id: str, record: JSON) -> Awaitable[None]: ...

    def appended(self, game_id: str, index: int, entry: JSON, epoch: int) -> Awaitable[None]: ...

    def snapshot(self, game_id: str, index: int, data: JSON, epoch: int) -> Awaitable[None]: ...

    def dropped(self, game_id: str, epoch: int) -> Awaitable[None]: ...

    async def load(self) -> list[tuple[str, JSON, JSON | None, list[JSON]]]:
        """Every stored table: (game_id, creation record, last snapshot or None, the whole
        journal); recovery replays the journal and checks it against the snapshot."""
        ...

    async def load_game(self, game_id: str) -> StoredGame | None:
        """One stored table as ``load`` gives it (None: not stored), read after every write
        queued before the call: the durable prefix a discarded session is rebuilt from."""
        ...

    def probe(self) -> Awaitable[None]:
        """A small write of the store's own: completes once the store commits writes again
        (the host probes with it after a failed write before rebuilding its games)."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class RestingStore(Store, Protocol):
    """A store that keeps, beside a table, its listing while the table rests (out of memory):
    the host then lets finished tables leave memory and loads them back on demand (see
    resting.py). ``load`` gives only the tables not at rest."""

    def rested(self, game_id: str, listing: JSON, epoch: int) -> Awaitable[None]:
        """The table leaves memory: keep its listing (a failure costs nothing: it is then
        loaded at the next start)."""
        ...

    def woken(self, game_id: str, epoch: int) -> Awaitable[None]:
        """The table changes again (its first input since it was loaded back): forget its
        listing, so a restart loads it."""
        ...

    async def resting(self) -> list[tuple[str, JSON | None]]:
        """The tables at rest, oldest first: (game_id, listing; None when it cannot be read)."""
        ...


class _Committed:
    """An awaitable that is complete already: a write of a store that keeps nothing."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        return
        yield  # a generator that ends at once


COMMITTED: Final[Awaitable[None]] = _Committed()


class MemoryStore:
    """Keeps nothing: ``--store memory``."""

    keeps_journal = False

    def created(self, game_id: str, record: JSON) -> Awaitable[None]:
        return COMMITTED

    def appended(self, game_id: str, index: int, entry: JSON, epoch: int) -> Awaitable[None]:
        return COMMITTED

    def snapshot(self, game_id: str, index: int, data: JSON, epoch: int) -> Awaitable[None]:
        return COMMITTED

    def dropped(self, game_id: str, epoch: int) -> Awaitable[None]:
        return COMMITTED

    async def load(self) -> list[tuple[str, JSON, JSON | None, list[JSON]]]:
        return []

    async def load_game(self, game_id: str) -> StoredGame | None:
        return None

    def probe(self) -> Awaitable[None]:
        return COMMITTED

    def close(self) -> None:
        return None
