"""A write the store did not commit, and what follows: nothing of it stays in memory.

The table's session is discarded at once (its streams wait on it), health goes NOT_SERVING,
and the store is probed until it commits again; then every discarded table is rebuilt from its
durable prefix (snapshot-checked journal replay) and its open streams carry on from where they
were. A table another writer appended to first (a cluster node took it over) is lost to this
server, not rebuilt; so is one the owner check (``host.confirm_owner``: a cluster node asks
the database) says this server no longer owns at its epoch, and one served meanwhile by a
newer session (never replaced by an older one). A table whose stored records cannot be
restored faithfully is quarantined: kept on disk untouched, listed (a private one to its
backend only; one whose owner cannot be read, to nobody), and refused with GAME_QUARANTINED.

What quarantines a table is declared here once, for every path that reads one back (the
start, an adoption, a wake, this healer): ``Healing.restore_or_quarantine``, then
``install_or_quarantine`` (and ``arm_or_quarantine`` for recovery's deferred arming). The
damage ``restore`` names (``RecoveryError``) and anything else it raises (a bug, or damage
nothing foresaw, logged with its traceback: ``rebuild_failed``) quarantine that table alone;
so does anything its install raises once restored (a hook it runs: timers, fan-out, results,
listeners), with nothing of that install left behind (``Tables.install_failed``). The store's
own failure (``StoreError``: an outage, not damage) and a cancellation are the caller's.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, NamedTuple

import grpc
import structlog

from tapis_service.door.api_keys import Backend
from tapis_service.observe import logrepeat
from tapis_service.observe.errors import ServiceError, failed_precondition
from tapis_service.stores.store import (
    CommitUnknown,
    CreateConflict,
    JournalConflict,
    StoredGame,
    StoreError,
)
from tapis_service.tables.lifecycle import TableState
from tapis_service.tables.ownership import Ownership
from tapis_service.tables.recovery import RecoveryError, Restored, restore
from tapis_service.tables.session import Session

if TYPE_CHECKING:
    from tapis_service.tables.host import GameHost

log = structlog.get_logger("tapis.host")


class Quarantined(NamedTuple):
    """A stored table that cannot be restored faithfully."""

    kind: str
    """Its game kind ("" when its creation record cannot be read)."""
    why: str
    owner: Ownership | None
    """Whose it is, from its creation record (None: that cannot be read)."""

    def listed_to(self, backend: Backend | None) -> bool:
        """ListGames shows it to this caller: as a table of its ownership; to nobody when
        that is unknown (it may be a backend's private table)."""
        return self.owner is not None and self.owner.listed_to(backend)


def stored_owner(record: Any) -> Ownership | None:
    """Whose a table is, as its creation record says (None: the record cannot tell). A store
    that cannot decode a table's rows hands a ``damaged`` marker instead, which carries the
    record's ``ownership`` when the record itself was read."""
    if not isinstance(record, dict) or ("damaged" in record and "ownership" not in record):
        return None
    data = record.get("ownership")
    if data is not None and not isinstance(data, dict):
        return None
    try:
        return Ownership.decode(data)
    except (TypeError, ValueError):
        return None


def rebuild_failed(game_id: str, error: Exception) -> str:
    """Reading ``game_id`` back raised ``error``, neither damage ``restore`` names nor the
    store's outage: logged with its traceback (``game_rebuild_failed``); why it is quarantined."""
    log.error("game_rebuild_failed", game=game_id, exc_info=error)
    return f"game {game_id}: rebuilding it failed ({type(error).__name__}: {str(error)[:200]})"


def quarantined_refusal(game_id: str) -> ServiceError:
    """What a call for a quarantined game is told."""
    return failed_precondition("GAME_QUARANTINED", f"game {game_id} is quarantined: its stored "
                               "records are damaged; an operator must look at it")


def moved_refusal(game_id: str) -> ServiceError:
    """What a call for a table this server no longer owns is told (another node serves it)."""
    return ServiceError(grpc.StatusCode.UNAVAILABLE, "TABLE_MOVED",
                        f"another server serves game {game_id} now; retry")


def store_unavailable() -> ServiceError:
    return ServiceError(grpc.StatusCode.UNAVAILABLE, "STORE_UNAVAILABLE",
                        "the store is not accepting writes; nothing of this request was kept: "
                        "retry it (with the same request_id)")


def rebuilding_in_doubt(discarded: Session, request_id: str, error: Any) -> Any:
    """What a retried write refused because its table awaits its rebuild is told: this attempt
    changed nothing, but an earlier attempt may have been applied — when the write that failed
    was in doubt, or when the table had committed that request id — which only the rebuilt
    table will tell. Otherwise (or without a request id) the refusal ``error`` stands: nothing
    of this request was kept."""
    if not isinstance(error, ServiceError) or error.reason != "STORE_UNAVAILABLE" \
            or not request_id or not (discarded.failed_in_doubt
                                      or discarded.knows_request(request_id)):
        return error
    return ServiceError(grpc.StatusCode.UNAVAILABLE, "COMMIT_UNKNOWN",
                        f"game {discarded.game_id} is being rebuilt after a failed write: an "
                        "earlier attempt of this request may have been applied; retry with the "
                        "same request_id")


def store_refusal(error: StoreError) -> ServiceError:
    """What a caller whose input was not committed is told."""
    if isinstance(error, CreateConflict):
        return ServiceError(grpc.StatusCode.UNAVAILABLE, "TABLE_MOVED",
                            "another server created the table of this request_id; retry with "
                            "the same request_id to get it")
    if isinstance(error, JournalConflict):
        return ServiceError(grpc.StatusCode.UNAVAILABLE, "TABLE_MOVED",
                            "another server took this table over; retry")
    if isinstance(error, CommitUnknown):
        return ServiceError(grpc.StatusCode.UNAVAILABLE, "COMMIT_UNKNOWN",
                            "the store cannot tell whether this request was committed: it "
                            "may have been applied; retry with the same request_id")
    return store_unavailable()


def stored_text(record: Any, key: str) -> str:
    """What a creation record says of ``key`` (its game ``kind``, its CreateGame
    ``request_id``): "" when it cannot be read."""
    value = record.get(key) if isinstance(record, dict) else None
    return value if isinstance(value, str) else ""


class Healing:
    """Discards the tables whose writes failed and rebuilds them once the store commits."""

    def __init__(self, host: GameHost) -> None:
        self.host = host
        self.store_healthy = True
        self._task: asyncio.Task[None] | None = None

    def store_failed(self, session: Session | None, error: StoreError) -> None:
        """A write of ``session`` (None: a creation) was not committed."""
        host = self.host
        if session is not None and host.tables.session(session.game_id) is session:
            game_id = session.game_id
            if isinstance(error, JournalConflict):
                log.warning("table_lost", game=game_id, error=str(error)[:200])
                host.tables.discard(game_id)  # its streams end
                for lost in host.lost_listeners:
                    lost(game_id)
                return
            logrepeat.limited(log.error, "game_discarded", game=game_id, error=str(error)[:200])
            session.failed_in_doubt = isinstance(error, CommitUnknown)
            host.tables.failed(session)
        if isinstance(error, JournalConflict):
            return
        if self.store_healthy:
            self.store_healthy = False
            log.error("store_unavailable", error=str(error)[:200])
            for listener in host.health_listeners:
                listener(False)
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._heal())

    async def _heal(self) -> None:
        """Probe the store until it commits again, then rebuild every discarded game from its
        durable prefix (its open streams carry on from where they were)."""
        host = self.host
        delay = host.settings.store_retry_ms / 1000
        while True:
            await asyncio.sleep(delay)
            try:
                await host.store.probe()
                for game_id in host.tables.ids(TableState.UNAVAILABLE):
                    await self._rebuild_or_quarantine(game_id)
            except StoreError as error:
                logrepeat.limited(log.info, "store_still_unavailable", error=str(error)[:200])
                continue
            if not host.tables.count(TableState.UNAVAILABLE):
                break
        self.store_healthy = True
        log.info("store_available")
        for listener in host.health_listeners:
            listener(True)

    async def _rebuild_or_quarantine(self, game_id: str) -> None:
        """``_rebuild``, where anything but the store's own failure (raised: the store is
        still down, the healer tries again) is this one table's: it is quarantined as it
        stands (kept on disk, refused with GAME_QUARANTINED) and the healer goes on with the
        other tables, never left dead with every later table UNAVAILABLE for good."""
        try:
            await self._rebuild(game_id)
        except StoreError:
            raise
        except Exception as error:  # a bug, or a record nothing foresaw
            why = rebuild_failed(game_id, error)
            old = self.host.tables.unavailable(game_id)
            if old is not None:  # still awaiting this rebuild (not served or given up since)
                self._quarantined(game_id, Quarantined(old.rules.kind, why, old.ownership),
                                  old.create_request_id)

    async def _rebuild(self, game_id: str) -> None:
        """Rebuild one discarded table from its durable prefix and serve it again, once the
        owner check (``host.confirm_owner``) says this server still owns it at its epoch and
        no newer session of it is served meanwhile; else its streams end (another server
        serves it now: they resume there)."""
        host = self.host
        old = host.tables.unavailable(game_id)
        if old is None:  # given up meanwhile (another node owns it)
            return
        await asyncio.gather(*old.writes, return_exceptions=True)
        stored = await host.store.load_game(game_id)
        if host.tables.unavailable(game_id) is not old:
            return
        if stored is None:
            host.tables.give_up(old)  # its streams end
            return
        restored = self.restore_or_quarantine(game_id, stored)
        if restored is None:  # quarantined: its streams end
            return
        owned = await host.confirm_owner(game_id, old.epoch)
        if host.tables.unavailable(game_id) is not old:  # a newer session serves it (or none)
            return
        if not owned:
            self.lost(old)
            return
        # its streams and presence carry on (they end if it is quarantined)
        fresh = self.install_or_quarantine(restored, confirmed=owned, epoch=old.epoch, kept=old)
        if fresh is not None:
            log.info("game_rebuilt", game=game_id, inputs=fresh.journal_length)

    def lost(self, session: Session) -> None:
        """A discarded table this server does not own any more (another node serves it):
        not rebuilt; its streams end (to resume where it is served now)."""
        log.warning("table_lost", game=session.game_id, epoch=session.epoch)
        self.host.tables.give_up(session)  # its streams end
        for lost in self.host.lost_listeners:
            lost(session.game_id)

    def restore_or_quarantine(self, game_id: str, stored: StoredGame) -> Restored | None:
        """``restore`` a table from its stored records, or quarantine it alone (None): for the
        damage ``restore`` names (``RecoveryError``) and for anything else it raises (a bug,
        or damage nothing foresaw: ``rebuild_failed``). Every path that reads a table back
        restores through here, so that one table never stops the others being served."""
        try:
            return restore(game_id, *stored)
        except RecoveryError as error:
            self.quarantine(game_id, str(error), stored[0])
        except Exception as error:  # a bug, or a record nothing foresaw
            self.quarantine(game_id, rebuild_failed(game_id, error), stored[0])
        return None

    def install_or_quarantine(self, restored: Restored, *, confirmed: bool,
                              epoch: int | None = None, at_rest: bool = False,
                              kept: Session | None = None, arm: bool = True) -> Session | None:
        """``Tables.install`` a restored table (the same arguments), or quarantine it alone
        (None) when the install raises part way (a bug in a hook it runs: ``rebuild_failed``),
        nothing of it left installed: no timer, listing, token nor stream."""
        try:
            return self.host.tables.install(restored, confirmed=confirmed, epoch=epoch,
                                            at_rest=at_rest, kept=kept, arm=arm)
        except Exception as error:  # a bug met on this table
            self._install_failed(restored.session, error, kept)
            return None

    def arm_or_quarantine(self, session: Session) -> bool:
        """``Tables.arm_deferred`` (recovery arms its tables once all are loaded), or
        quarantine the table alone when arming it raises (False, as for one not LIVE)."""
        try:
            return self.host.tables.arm_deferred(session)
        except Exception as error:  # a bug met on this table
            self._install_failed(session, error, None)
            return False

    def _install_failed(self, session: Session, error: Exception, kept: Session | None) -> None:
        game_id = session.game_id
        damaged = Quarantined(session.rules.kind, rebuild_failed(game_id, error),
                              session.ownership)
        self.host.tables.install_failed(session, damaged, kept)
        log.error("game_quarantined", game=game_id, error=damaged.why[:300])

    def quarantine(self, game_id: str, why: str, record: Any) -> None:
        """Keep ``game_id`` apart: ``record`` is its stored creation record (what of it can be
        read names its kind and its owner)."""
        self._quarantined(game_id, Quarantined(stored_text(record, "kind"), why,
                                               stored_owner(record)),
                          stored_text(record, "request_id"))

    def _quarantined(self, game_id: str, damaged: Quarantined, request_id: str = "") -> None:
        self.host.tables.quarantine(game_id, damaged, request_id)
        log.error("game_quarantined", game=game_id, error=damaged.why[:300])

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
