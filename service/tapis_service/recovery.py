"""Recovery and checkpoints for the durable store.

On start, every stored table is rebuilt before the server reports SERVING: ``new_table`` is
called exactly as ``GameHost.create`` called it (from the creation record), then the journal is
replayed input by input with the time each was applied at. The engine is deterministic, so this
regenerates the table, the event log (``StreamEvents`` from sequence 0 keeps working), the seat
tokens (their hashes), the names and the request ids already answered. The last snapshot is the
checkpoint: the replayed table must equal it at its index, else the game is refused.

A snapshot with an unknown format version, a bad checksum, or one the replay does not reproduce
makes the server refuse to start (``RecoveryError``, a clear message naming the game): a game is
never half-loaded and nothing acknowledged is silently skipped.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import structlog

from tapis_engine import table as tbl
from tapis_engine.errors import RuleError
from tapis_engine.registry import rules_for
from tapis_service.adapters import ADAPTERS
from tapis_service.session import Session

if TYPE_CHECKING:
    from tapis_service.host import GameHost

JSON = dict[str, Any]
SNAPSHOT_FORMAT = 1
"""The snapshot format this server writes and reads."""

log = structlog.get_logger("tapis.recovery")


class RecoveryError(Exception):
    """A stored game cannot be restored faithfully; the server refuses to start."""


# --- while serving: checkpoints and retention ----------------------------------------------


def snapshot_data(session: Session) -> JSON:
    """A versioned, JSON-safe snapshot of a session's table."""
    return {"format": SNAPSHOT_FORMAT, "index": session.journal_length,
            "table": tbl.encode_table(session.rules, session.table),
            "names": list(session.names),
            "finished": session.table.game_over(session.rules)}


def after_append(host: GameHost, session: Session) -> None:
    """Called once an input is queued for the journal: snapshot every N inputs and at game end;
    at game end, drop the oldest finished tables beyond the retention limit."""
    every = host.settings.snapshot_every
    finished = session.table.game_over(session.rules)
    if finished or (every > 0 and session.journal_length % every == 0):
        host.store.snapshot(session.game_id, session.journal_length, snapshot_data(session))
    if finished:
        enforce_retention(host, keep=session.game_id)


def enforce_retention(host: GameHost, keep: str | None = None) -> None:
    """Drop (from memory and from the store) the oldest finished tables beyond the limit."""
    limit = host.settings.finished_retention
    if len(host.sessions) <= limit:
        return
    finished = [gid for gid, s in host.sessions.items()
                if gid != keep and s.table.game_over(s.rules)]
    excess = len(finished) - limit + (1 if keep is not None else 0)
    for game_id in finished[:max(excess, 0)]:
        host.drop(game_id)


# --- on start: recovery ---------------------------------------------------------------------


async def recover(host: GameHost) -> None:
    """Restore every stored table, then start their timers and bots."""
    started = time.perf_counter()
    stored = host.store.load()
    for game_id, record, snapshot, journal in stored:
        session = restore(host, game_id, record, snapshot, journal)
        session.durable_sequence = session.last_sequence  # all of it came from the store
        host.sessions[game_id] = session
        if record.get("request_id"):
            host.create_requests[record["request_id"]] = game_id
    enforce_retention(host)
    for session in host.sessions.values():
        host._after_change(session)  # publish nothing yet, arm the timers and the bots
    if stored:
        log.info("recovered", games=len(host.sessions), dropped=len(stored) - len(host.sessions),
                 inputs=sum(len(j) for _, _, _, j in stored),
                 seconds=round(time.perf_counter() - started, 3))


def restore(host: GameHost, game_id: str, record: JSON, snapshot: JSON | None,
            journal: list[JSON]) -> Session:
    """Rebuild one session from its creation record and journal, checked by its snapshot."""
    kind = record.get("kind")
    rules = rules_for(str(kind))
    if rules is None or kind not in ADAPTERS:
        raise RecoveryError(f"game {game_id}: kind {kind!r} is not built in this server")
    checkpoint = _checked_snapshot(game_id, snapshot, len(journal))
    initial = tbl.decode_table(rules, record["initial"])
    table, events = tbl.new_table(rules, initial.setup, [s.bot for s in initial.seats],
                                  initial.turn_time_ms, record["created_ms"])
    if _normal(tbl.encode_table(rules, table)) != _normal(record["table"]):
        raise RecoveryError(f"game {game_id}: creating the table again does not give the "
                            "stored table (was the game's code changed?)")
    session = Session(game_id=game_id, rules=rules, adapter=ADAPTERS[str(kind)], table=table,
                      created_ms=record["created_ms"], names=["" for _ in initial.seats])
    session.record(events)
    for position, entry in enumerate(journal, start=1):
        move = tbl.decode_input(rules, entry["input"])
        try:
            applied = session.apply(move, entry["now_ms"])
        except RuleError as error:
            raise RecoveryError(f"game {game_id}: journal input {position} is refused on "
                                f"replay ({error}); the journal or the code changed") from error
        if isinstance(move, tbl.Claim):
            session.names[move.seat] = entry.get("name", "")
            host.tokens[entry["token_hash"]] = (game_id, move.seat)
            if entry.get("join_request_id"):
                session.join_requests[entry["join_request_id"]] = move.seat
        if entry.get("request_id"):
            session.remember(move.seat, entry["request_id"], applied)
        if checkpoint is not None and position == checkpoint[0]:
            _verify(game_id, rules, session, checkpoint[1])
    return session


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
        stored = tbl.decode_table(rules, data["table"])
    except (KeyError, TypeError, ValueError) as error:
        raise RecoveryError(f"game {game_id}: snapshot is corrupt (cannot decode: "
                            f"{error!r})") from error
    if _normal(tbl.encode_table(rules, stored)) != _normal(
            tbl.encode_table(rules, session.table)):
        raise RecoveryError(f"game {game_id}: snapshot at input {data['index']} differs from "
                            "the replayed journal; refusing to load the game")
    session.table = stored


def _normal(data: Any) -> Any:
    return json.loads(json.dumps(data, sort_keys=True))
