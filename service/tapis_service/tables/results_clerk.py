"""Files the results of backends' tables in their ledger (``results``), and says which tables
the ledger holds (never evicted until their backend acknowledges them).

A game end is filed once it is durable: ``note(session)`` runs after every commit of a
backend's table (before its finished game's events are compacted) and files each ``GameEnded``
and ``GameAbandoned`` up to the table's durable sequence (it reads the log only when the
table's count of game ends moved since it last read it to its end: not at every action);
``restored(session)`` files again, harmlessly, everything a restored table has finished (a
crash between a commit and its filing loses nothing). Each filing is keyed
(``GAME_ID/game/N``, ``GAME_ID/series``), so it is filed once whatever the repeats. Tables
without a backend cost one attribute test. Besides results, a seat its table awaits that has
been away too long is filed (``presence``: ``seat_idle``, keyed ``GAME_ID/idle/SEAT/SINCE_MS``:
once per absence).

The housekeeping sweep calls ``keep_ages``: records older than ``--results-max-age`` are
dropped (their tables are no longer held), records past ``NEAR_FRACTION`` of it are warned of
(one line per backend per ``NEAR_EVERY_S``), and the age metrics are set.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable

import structlog
from google.protobuf.timestamp_pb2 import Timestamp

from tapis.v1 import game_service_pb2 as pb
from tapis_engine import fairness
from tapis_engine import table as tbl
from tapis_service.observe import metrics
from tapis_service.observe.logrepeat import RepeatLimiter
from tapis_service.stores.results import Pending, ResultsFeed
from tapis_service.tables.session import Session

log = structlog.get_logger("tapis.results")

NEAR_FRACTION = 0.8
"""A record this far into its time limit is warned of."""
NEAR_EVERY_S = 3600.0
"""At most one near-expiry line per backend this often."""
NEAR_LISTED = 100
"""Near-expiry records looked at per sweep (the oldest)."""


def _summary(setup: object, record: tbl.GameRecord) -> pb.GameSummary:
    return pb.GameSummary(game_number=record.number, winners=record.winners,
                          scores=record.scores, summary=record.summary, seed=record.seed,
                          seed_salt=fairness.seed_salt(setup, record.number),  # type: ignore[arg-type]
                          seed_commitment=fairness.seed_commitment(setup,  # type: ignore[arg-type]
                                                              record.number))


def _record(session: Session, time_ms: int) -> pb.ResultRecord:
    stamp = Timestamp()
    stamp.FromMilliseconds(time_ms)
    owned = session.ownership
    seats = len(session.table.seats)
    players = list(owned.player_ids) or [""] * seats
    return pb.ResultRecord(game_id=session.game_id, kind=session.adapter.proto_kind,  # type: ignore[arg-type]
                           player_ids=players, time=stamp, labels=dict(owned.labels))


def game_ended(session: Session, record: tbl.GameRecord, time_ms: int) -> pb.ResultRecord:
    result = _record(session, time_ms)
    result.game_ended.CopyFrom(pb.GameResult(game_number=record.number,
                                             summary=_summary(session.table.setup, record)))
    return result


def series_ended(session: Session, records: tuple[tbl.GameRecord, ...], reason: int,
                 time_ms: int) -> pb.ResultRecord:
    result = _record(session, time_ms)
    board = tbl.scoreboard(len(session.table.seats), records)
    result.series_ended.CopyFrom(pb.SeriesResult(
        reason=reason,  # type: ignore[arg-type]
        series=[_summary(session.table.setup, r) for r in records],
        scoreboard=pb.Scoreboard(wins=board.wins, draws=board.draws,
                                 games_played=board.games)))
    return result


def _abandoned(session: Session) -> int:
    return (pb.SERIES_END_REASON_ENDED_BY_BACKEND if session.ended_by_backend
            else pb.SERIES_END_REASON_ABANDONED)


def _ends(table: tbl.Table) -> int:
    """How many game ends a table's log holds: a ``GameEnded`` per record, a
    ``GameAbandoned`` once abandoned (the events the clerk files; the engine emits them so)."""
    return len(table.records) + table.abandoned


class ResultsClerk:
    """Files results as tables commit them; knows the tables held for their backends."""

    def __init__(self, feed: ResultsFeed, now_ms: Callable[[], int],
                 near_log: RepeatLimiter | None = None) -> None:
        self.feed = feed
        self.near_log = near_log or RepeatLimiter(NEAR_EVERY_S, lambda: now_ms() / 1000)
        self._now_ms = now_ms
        self.held: set[str] = set()
        """Tables with records their backend has not acknowledged (or being filed): never
        evicted."""
        self._in_flight: Counter[str] = Counter()
        self._scanned: dict[str, tuple[int, int]] = {}
        """Game id -> the durable sequence looked at last, and how many game ends (``_ends``)
        its table had when the whole log was last looked at (-1: not yet)."""
        self._filing: set[asyncio.Future[None]] = set()

    async def start(self) -> None:
        self.held = await self.feed.store.held_games()

    def note(self, session: Session) -> None:
        """File the game ends a backend's table committed since the last look."""
        backend = session.ownership.backend
        if backend is None:
            return
        durable = session.durable_sequence
        scanned, ends_seen = self._scanned.get(session.game_id, (0, -1))
        if durable <= scanned:
            return
        table = session.table
        ends = _ends(table)
        if ends == ends_seen:  # no game ended since the whole log was looked at
            self._scanned[session.game_id] = (durable, ends)
            return
        # looked at up to its end: its game ends are all filed from here on
        whole = durable >= table.next_sequence - 1
        self._scanned[session.game_id] = (durable, ends if whole else -1)
        filings: list[tuple[str, pb.ResultRecord]] = []
        for logged in session.events_after(scanned):
            if logged.sequence > durable:
                break
            body = logged.event.body
            if isinstance(body, tbl.GameEnded):
                filings.extend(self._game_end(session, body.records, logged.time_ms))
            elif isinstance(body, tbl.GameAbandoned):
                filings.append(self._series_end(session, session.table.records,
                                                _abandoned(session), logged.time_ms))
        if filings:
            self._file(backend, session.game_id, filings)

    def restored(self, session: Session) -> None:
        """File again (harmlessly) what a restored table of a backend has finished."""
        backend = session.ownership.backend
        if backend is None:
            return
        self._scanned[session.game_id] = (session.durable_sequence, -1)
        records = session.table.records
        now = session.created_ms
        filings = [(f"{session.game_id}/game/{r.number}", game_ended(session, r, now))
                   for r in records]
        if session.table.abandoned:
            filings.append(self._series_end(session, records, _abandoned(session), now))
        elif records and session.ownership.series_over(records[-1].number):
            filings.append(self._series_end(session, records, pb.SERIES_END_REASON_COMPLETED,
                                            now))
        if filings:
            self._file(backend, session.game_id, filings)

    def _game_end(self, session: Session, records: tuple[tbl.GameRecord, ...],
                  time_ms: int) -> list[tuple[str, pb.ResultRecord]]:
        record = records[-1]
        filings = [(f"{session.game_id}/game/{record.number}",
                    game_ended(session, record, time_ms))]
        if session.ownership.series_over(record.number):
            filings.append(self._series_end(session, records, pb.SERIES_END_REASON_COMPLETED,
                                            time_ms))
        return filings

    def _series_end(self, session: Session, records: tuple[tbl.GameRecord, ...], reason: int,
                    time_ms: int) -> tuple[str, pb.ResultRecord]:
        return (f"{session.game_id}/series", series_ended(session, records, reason, time_ms))

    def _file(self, backend: str, game_id: str,
              filings: list[tuple[str, pb.ResultRecord]]) -> None:
        self.held.add(game_id)
        self._in_flight[game_id] += 1
        task = asyncio.ensure_future(self._file_all(backend, game_id, filings))
        self._filing.add(task)
        task.add_done_callback(self._filing.discard)

    async def _file_all(self, backend: str, game_id: str,
                        filings: list[tuple[str, pb.ResultRecord]]) -> None:
        try:
            for key, record in filings:
                await self.feed.file(backend, key, game_id, record.SerializeToString(),
                                     self._now_ms())
        except Exception as error:  # the table stays held; a restore files it again
            log.error("result_not_filed", game=game_id, error=repr(error)[:200])
        finally:
            self._in_flight[game_id] -= 1
            if self._in_flight[game_id] <= 0:
                del self._in_flight[game_id]

    def seat_idle(self, session: Session, seat: int, since_ms: int, now_ms: int) -> None:
        """File that an awaited person seat of a backend's table has had no stream since
        ``since_ms`` (``presence``): keyed by the absence, so once per absence."""
        backend = session.ownership.backend
        if backend is None:
            return
        record = _record(session, now_ms)
        since = Timestamp()
        since.FromMilliseconds(since_ms)
        owned = session.ownership
        record.seat_idle.CopyFrom(pb.SeatIdle(
            seat=seat, player_id=owned.player_ids[seat] if owned.reserved(seat) else "",
            since=since, game_number=session.table.game_number))
        self._file(backend, session.game_id,
                   [(f"{session.game_id}/idle/{seat}/{since_ms}", record)])

    async def acknowledge(self, backend: str, cursor: int) -> int:
        """The backend stored its records up to ``cursor``: its tables no longer held for
        them may be evicted."""
        acknowledged = await self.feed.acknowledge(backend, cursor)
        self.held = await self.feed.store.held_games() | set(self._in_flight)
        return acknowledged

    async def keep_ages(self, now_ms: int, max_age_ms: int) -> int:
        """Drop the records unacknowledged for more than ``max_age_ms`` (a line each), warn of
        those past ``NEAR_FRACTION`` of it, set the age metrics; how many were dropped.
        ``now_ms`` is the server's clock, the one records are stamped with when filed."""
        dropped = await self.feed.expire(now_ms, max_age_ms)
        if dropped:
            metrics.RESULTS_EXPIRED.inc(len(dropped))
            self.held = await self.feed.store.held_games() | set(self._in_flight)
        pending = await self.feed.store.unacknowledged(
            now_ms - int(max_age_ms * NEAR_FRACTION), NEAR_LISTED)
        metrics.RESULTS_UNACKNOWLEDGED.set(pending.count)
        metrics.RESULTS_OLDEST_AGE.set(
            0 if pending.oldest_ms is None else max(now_ms - pending.oldest_ms, 0) / 1000)
        near: dict[str, list[Pending]] = {}
        for record in pending.near:
            near.setdefault(record.backend, []).append(record)
        for backend, records in near.items():
            oldest = records[0]
            self.near_log.log(backend, log.warning, "results_near_expiry", backend=backend,
                              records=len(records), oldest_game=oldest.game_id,
                              oldest_cursor=oldest.cursor,
                              age_s=(now_ms - oldest.filed_ms) // 1000,
                              expires_in_s=max(oldest.filed_ms + max_age_ms - now_ms, 0)
                              // 1000)
        return len(dropped)

    async def settle(self) -> None:
        """Wait for the filings in progress (stopping)."""
        while self._filing:
            await asyncio.gather(*list(self._filing), return_exceptions=True)
