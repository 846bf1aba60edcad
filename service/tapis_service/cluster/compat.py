"""Stand-ins for the host API the commit path brings (``GameHost.adopt``, ``discard``,
``lost_listeners``; issue 10): used only while the host lacks them. To be deleted once they
are on main."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tapis_service import recovery
from tapis_service.host import GameHost
from tapis_service.session import Session


def lost_listeners(host: GameHost) -> list[Callable[[str], None]]:
    found: list[Callable[[str], None]] | None = getattr(host, "lost_listeners", None)
    if found is None:
        found = []
        host.lost_listeners = found  # type: ignore[attr-defined]
    return found


def discard(host: GameHost, game_id: str) -> None:
    own: Callable[[str], None] | None = getattr(host, "discard", None)
    if own is not None:
        own(game_id)
        return
    session = host.sessions.pop(game_id, None)
    if session is None:
        return
    session.cancel_timers()
    for subscriber in session.subscribers:
        subscriber.close()
    for digest, (gid, _) in list(host.tokens.items()):
        if gid == game_id:
            del host.tokens[digest]


async def adopt(host: GameHost, game_id: str) -> Session | None:
    own: Any = getattr(host, "adopt", None)
    if own is not None:
        adopted: Session | None = await own(game_id)
        return adopted
    if game_id in host.sessions:
        return host.sessions[game_id]
    stored = await host.store.load_game(game_id)  # type: ignore[misc]
    if stored is None:
        return None
    if game_id in host.sessions:
        return host.sessions[game_id]
    record, snapshot, journal = stored
    session = recovery.restore(host, game_id, record, snapshot, journal)
    session.durable_sequence = session.last_sequence
    session.published_sequence = session.last_sequence
    host.sessions[game_id] = session
    if record.get("request_id"):
        host.create_requests[record["request_id"]] = game_id
    host._after_change(session)
    return session
