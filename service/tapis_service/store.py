"""Where tables are persisted. The in-memory store keeps nothing beyond the process."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Protocol

JSON = dict[str, Any]


class Store(Protocol):
    """Persistence hooks, called in the order things happen.

    ``created`` and ``appended`` are called synchronously, in order; when they return an
    awaitable, the answer to the client waits for it (the write is durable once it completes).
    """

    def created(self, game_id: str, record: JSON) -> Awaitable[None] | None: ...

    def appended(self, game_id: str, index: int, entry: JSON) -> Awaitable[None] | None: ...

    def snapshot(self, game_id: str, index: int, data: JSON) -> Awaitable[None] | None: ...

    def dropped(self, game_id: str) -> Awaitable[None] | None: ...

    def load(self) -> list[tuple[str, JSON, JSON | None, list[JSON]]]:
        """Every stored table: (game_id, creation record, last snapshot or None, the whole
        journal); recovery replays the journal and checks it against the snapshot."""
        ...

    def close(self) -> None: ...


class MemoryStore:
    """Keeps nothing: ``--store memory``."""

    def created(self, game_id: str, record: JSON) -> None:
        return None

    def appended(self, game_id: str, index: int, entry: JSON) -> None:
        return None

    def snapshot(self, game_id: str, index: int, data: JSON) -> None:
        return None

    def dropped(self, game_id: str) -> None:
        return None

    def load(self) -> list[tuple[str, JSON, JSON | None, list[JSON]]]:
        return []

    def close(self) -> None:
        return None
