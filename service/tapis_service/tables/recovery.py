"""Rebuilding a table from the durable store, and the snapshots that check it.

Pure with respect to the host: ``restore`` turns stored records into a ``Session`` (the host
decides what to do with it). On start every stored table is rebuilt this way before the server
reports SERVING, and a table whose write failed is rebuilt the same way from its durable prefix.
``new_table`` is called exactly as ``GameHost.create`` called it (from the creation record),
then the journal is replayed input by input with the time each was applied at. The engine is
deterministic, so this regenerates the table, the event log (``StreamEvents`` from sequence 0
keeps working), the seat tokens (their hashes, and those ReplaceSeat revoked), the spectator
token's generation (and the hashes RotateSpectatorToken revoked), the names, the
players the seats are bound to and the request ids already answered.
The last snapshot is the checkpoint: the replayed table must equal it at its index, else the
game is refused.

A snapshot with an unknown format version, a bad checksum, one the replay does not reproduce, or
a record that cannot be decoded raises ``RecoveryError`` naming the game: the host quarantines
that game (kept on disk untouched, refused with GAME_QUARANTINED) and serves every other; so it
does for anything else ``restore`` raises (a bug, or damage nothing foresaw: its traceback is
logged), and for anything its install raises once restored. Every path restores through
``Healing.restore_or_quarantine`` and installs through ``install_or_quarantine``, which say so
once. A game is never half-loaded and nothing acknowledged is silently skipped.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import structlog

from tapis_engine import table as tbl
from tapis_engine import table_codec
from tapis_engine.errors import RuleError
from tapis_engine.registry import rules_for
from tapis_service.codec.adapters import ADAPTERS
from tapis_service.stores.store import RecoveryError, paced
from tapis_service.tables import replacing
from tapis_service.tables.lifecycle import TableState
from tapis_service.tables.ownership import Ownership
from tapis_service.tables.resting import RestingTable
from tapis_service.tables.session import Applied, Session

if TYPE_CHECKING:
    from tapis_service.tables.host import GameHost

JSON = dict[str, Any]
log = structlog.get_logger("tapis.recovery")
SNAPSHOT_FORMAT = 1
"""The snapshot format this server writes and reads."""


# --- checkpoints ---------------------------------------------------------------------------


def snapshot_data(session: Session) -> JSON:
    """A versioned, JSON-safe snapshot of a session's table."""
    return {"format": SNAPSHOT_FORMAT, "index": session.journal_length,
            "table": table_codec.encode_table(session.rules, session.table),
            "names": list(session.names),
            "finished": session.table.game_over(session.rules)}


# --- rebuilding a table from what is stored -------------------------------------------------


@dataclass
class Restored:
    """A session rebuilt from the store, with what the host indexes beside it."""

    session: Session
    tokens: dict[str, int] = field(default_factory=dict)
    """Seat-token hash -> seat, for every seat claimed (or given by ReplaceSeat) in the
    journal and not revoked since."""
    revoked: dict[str, bool] = field(default_factory=dict)
    """The hashes of the tokens revoked -> whether it was a spectator token
    (RotateSpectatorToken) rather than a seat's (ReplaceSeat)."""
    create_request_id: str = ""


def restore(game_id: str, record: JSON, snapshot: JSON | None,
            journal: list[JSON]) -> Restored:
    """Rebuild one session from its creation record and journal, checked by its snapshot.

    Anything that does not reproduce faithfully raises ``RecoveryError`` naming the game."""
    try:
        return _restore(game_id, record, snapshot, journal)
    except RecoveryError:
        raise
    except RuleError as error:  # the engine refuses the stored table itself (not an input)
        raise RecoveryError(f"game {game_id}: the stored table is refused by the engine "
                            f"({str(error)[:120]})") from error
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as error:
        raise RecoveryError(f"game {game_id}: a stored record is malformed "
                            f"({type(error).__name__}: {str(error)[:120]})") from error


def _restore(game_id: str, record: JSON, snapshot: JSON | None,
             journal: list[JSON]) -> Restored:
    if "damaged" in record:
        raise RecoveryError(f"game {game_id}: {record['damaged']}")
    kind = record.get("kind")
    rules = rules_for(str(kind))
    if rules is None or kind not in ADAPTERS:
        raise RecoveryError(f"game {game_id}: kind {kind!r} is not built in this server")
    checkpoint = _checked_snapshot(game_id, snapshot, len(journal))
    initial = table_codec.decode_table(rules, record["initial"])
    table, events = tbl.new_table(rules, initial.setup, [s.bot for s in initial.seats],
                                  initial.turn_time_ms, record["created_ms"])
    if _normal(table_codec.encode_table(rules, table)) != _normal(record["table"]):
        raise RecoveryError(f"game {game_id}: creating the table again does not give the "
                            "stored table (was the game's code changed?)")
    session = Session(game_id=game_id, rules=rules, adapter=ADAPTERS[str(kind)], table=table,
                      created_ms=record["created_ms"], names=["" for _ in initial.seats],
                      ownership=Ownership.decode(record.get("ownership")))
    session.record(events)
    restored = Restored(session, create_request_id=str(record.get("request_id") or ""))
    for position, entry in enumerate(journal, start=1):
        if "input" not in entry:  # RotateSpectatorToken: no engine input
            _rotated(restored, entry)
            if checkpoint is not None and position == checkpoint[0]:
                _verify(game_id, rules, session, checkpoint[1])
            continue
        move = table_codec.decode_input(rules, entry["input"])
        try:
            applied = session.apply(move, entry["now_ms"])
        except RuleError as error:
            raise RecoveryError(f"game {game_id}: journal input {position} is refused on "
                                f"replay ({error}); the journal or the code changed") from error
        if isinstance(move, tbl.Abandon) and entry.get("ended_by") == "backend":
            session.ended_by_backend = True
        if isinstance(move, tbl.Claim):
            session.name_holder(move.seat, str(entry.get("name", "")), applied)
            restored.tokens[entry["token_hash"]] = move.seat
            if entry.get("join_request_id"):
                scope = str(entry.get("join_scope") or "")
                session.join_requests[scope, entry["join_request_id"]] = move.seat
        if isinstance(move, tbl.Replace):
            _replaced(restored, move.seat, entry, applied)
        if entry.get("request_id"):
            session.remember(move.seat, entry["request_id"], applied)
        if checkpoint is not None and position == checkpoint[0]:
            _verify(game_id, rules, session, checkpoint[1])
    session.durable_sequence = session.last_sequence  # all of it came from the store
    return restored


def _rotated(restored: Restored, entry: JSON) -> None:
    """A RotateSpectatorToken in the journal: the former spectator token revoked."""
    session = restored.session
    session.spectator_generation = int(entry["spectator_generation"])
    session.journal_length += 1
    restored.revoked[str(entry["revoked"])] = True
    if entry.get("rotate_request_id"):
        session.rotate_requests[str(entry["rotate_request_id"])] = session.spectator_generation


def _replaced(restored: Restored, seat: int, entry: JSON, applied: Applied) -> None:
    """A ReplaceSeat in the journal: the seat's tokens revoked, its new holder's known."""
    replacing.hand_over(restored.session, replacing.Replacement.of_entry(seat, entry),
                        str(entry.get("replace_request_id") or ""), applied)
    for digest, holder in list(restored.tokens.items()):
        if holder == seat:
            del restored.tokens[digest]
            restored.revoked[digest] = False
    if entry.get("token_hash"):
        restored.tokens[entry["token_hash"]] = seat


def _checked_snapshot(game_id: str, snapshot: JSON | None,
                      journal_length: int) -> tuple[int, JSON] | None:
    """(index, decoded snapshot), or RecoveryError for an unknown version or a corrupt one."""
    if snapshot is None:
        return None
    version = snapshot.get("format")
    if version != SNAPSHOT_FORMAT:
        raise RecoveryError(f"game {game_id}: snapshot format version {version!r} is unknown "
                            f"to this server (it reads version {SNAPSHOT_FORMAT}); "
                            "refusing to load it")
    if not snapshot.get("checksum_ok", True):
        raise RecoveryError(f"game {game_id}: snapshot is corrupt (checksum mismatch)")
    try:
        data = json.loads(snapshot["text"]) if "text" in snapshot else snapshot
    except ValueError as error:
        raise RecoveryError(f"game {game_id}: snapshot is corrupt (not JSON)") from error
    index = snapshot.get("index")
    if not isinstance(data, dict) or data.get("format") != SNAPSHOT_FORMAT \
            or data.get("index") != index or not isinstance(data.get("table"), dict):
        raise RecoveryError(f"game {game_id}: snapshot is corrupt (bad header)")
    if not isinstance(index, int) or not 0 < index <= journal_length:
        raise RecoveryError(f"game {game_id}: snapshot is at input {index} but the journal "
                            f"holds {journal_length} inputs")
    return index, data


def _verify(game_id: str, rules: Any, session: Session, data: JSON) -> None:
    """The replayed table must be the snapshot's, field for field."""
    try:
        stored = table_codec.decode_table(rules, data["table"])
    except (KeyError, TypeError, ValueError) as error:
        raise RecoveryError(f"game {game_id}: snapshot is corrupt (cannot decode: "
                            f"{error!r})") from error
    if "resumes" not in data["table"]:  # written before the count: the replay's is kept
        stored = replace(stored, resumes=session.table.resumes)
    if _normal(table_codec.encode_table(rules, stored)) != _normal(
            table_codec.encode_table(rules, session.table)):
        raise RecoveryError(f"game {game_id}: snapshot at input {data['index']} differs from "
                            "the replayed journal; refusing to load the game")
    session.table = stored


def _normal(data: Any) -> Any:
    return json.loads(json.dumps(data, sort_keys=True))


async def recover_all(host: GameHost) -> None:
    """Restore every stored table of ``host`` not at rest before serving (those at rest are
    only listed, from their stored listing); one that cannot be restored or installed,
    whatever ``restore`` or the install raises, is quarantined alone
    (``Healing.restore_or_quarantine``, ``install_or_quarantine``). The store's tables are
    read and restored in paced steps: the starting server's health service answers
    throughout."""
    started = time.perf_counter()
    resting = await host.rest_store.resting() if host.rest_store is not None else []
    unreadable = []
    for game_id, listing in resting:
        try:
            table = RestingTable.of(game_id, listing or {})
        except (KeyError, TypeError, ValueError):
            unreadable.append(game_id)  # loaded below instead
            continue
        host.tables.listed_at_rest(game_id, table, answers_request=True)
    stored = await host.store.load()
    for game_id in unreadable:
        one = await host.store.load_game(game_id)
        if one is not None:
            stored.append((game_id, *one))
    inputs = 0
    async for game_id, record, snapshot, journal in paced(stored):  # liveness answers
        inputs += len(journal)
        restored = host.healing.restore_or_quarantine(game_id, (record, snapshot, journal))
        if restored is None:  # quarantined alone: the others are served
            continue
        # armed below (``start_recovered``); an unreadable listing is still stored; owned:
        # the store holds this server's tables (a cluster node's under its lease); one whose
        # install fails is quarantined alone
        host.healing.install_or_quarantine(restored, confirmed=True,
                                           at_rest=game_id in unreadable, arm=False)
    tables, kept = host.tables, (TableState.LIVE, TableState.RESTING)
    held = tables.count(*kept)
    host.shelf.enforce_retention()
    rested = await host.shelf.start_recovered()
    if stored or resting:
        log.info("recovered", games=tables.count(TableState.LIVE),
                 resting=tables.count(TableState.RESTING), rested=rested,
                 quarantined=tables.count(TableState.QUARANTINED),
                 dropped=held - tables.count(*kept),
                 inputs=inputs, seconds=round(time.perf_counter() - started, 3))
