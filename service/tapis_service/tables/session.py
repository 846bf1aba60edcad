"""One live table: its pure ``Table``, its event log, its subscribers and its timers.

Inputs are applied one at a time, synchronously (the asyncio loop never interleaves inside
``apply``), so each game's actions are serialised without a lock.
"""

from __future__ import annotations

import asyncio
import enum
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from tapis_engine import table as tbl
from tapis_engine.frozen import fast_init
from tapis_engine.protocol import Rules
from tapis_service.codec.adapters import GameAdapter
from tapis_service.observe.clock import TimerHandle
from tapis_service.tables.ownership import Ownership

if TYPE_CHECKING:
    from tapis_service.door.api_keys import Backend
    from tapis_service.tables.replacing import Replacement

HANDED_OVER: Final = -1
"""In ``Session.join_requests``: the seat this join claimed was since replaced by its
backend."""
_AWAITED: Final[dict[frozenset[int], tuple[int, ...]]] = {}
"""``to_act`` sets -> the awaited seats in order (shared tuples: few distinct sets)."""


@dataclass(frozen=True, slots=True)
class LoggedEvent:
    """A table event with the table version and awaited seats once its input was applied, and
    the server time (ms) at which that input was applied (kept in the journal, so a replay
    gives the same time)."""

    event: tbl.TableEvent
    version: int
    awaiting: tuple[int, ...]
    time_ms: int

    # written out for mypyc to compile it (tapis_engine/frozen.py)
    def __init__(
        self, event: tbl.TableEvent, version: int, awaiting: tuple[int, ...], time_ms: int
    ) -> None:
        object.__setattr__(self, "event", event)
        object.__setattr__(self, "version", version)
        object.__setattr__(self, "awaiting", awaiting)
        object.__setattr__(self, "time_ms", time_ms)

    @property
    def sequence(self) -> int:
        return self.event.sequence


fast_init(LoggedEvent)


@dataclass(frozen=True, slots=True)
class CompactedEvents:
    """The events of finished games (``first``..``last``, no gap) kept as bytes, not as live
    objects: for each distinct recipient view, the serialized ``StreamEventsResponse`` frames
    one after the other (zlib) and where each event's frame starts (``array`` of offsets, one
    more than the events). ``views[recipient]`` indexes ``blobs`` (seats and spectators that see
    the same bytes share one blob)."""

    first: int
    last: int
    blobs: tuple[tuple[bytes, Any], ...]
    views: dict[int | None, int]


@dataclass(frozen=True, slots=True)
class Applied:
    """The answer to an accepted input (kept for idempotent retries)."""

    version: int
    events: tuple[LoggedEvent, ...]
    compacted: tuple[int, int] | None = None
    """A retried answer whose first events (these sequences) have been compacted out of the
    live log: its bytes come from ``Session.compacted``, before ``events``."""

    # written out for mypyc to compile it (tapis_engine/frozen.py)
    def __init__(
        self, version: int, events: tuple[LoggedEvent, ...],
        compacted: tuple[int, int] | None = None
    ) -> None:
        object.__setattr__(self, "version", version)
        object.__setattr__(self, "events", events)
        object.__setattr__(self, "compacted", compacted)


fast_init(Applied)


class RequestKind(enum.Enum):
    """What an input being committed is (``PendingRequest.kind``)."""

    SEAT_ACTION = "seat_action"
    """A seat's SubmitAction."""
    JOIN = "join"
    """A JoinGame (the joiner has no seat yet)."""
    REPLACE = "replace"
    """A backend's ReplaceSeat."""
    ROTATE = "rotate"
    """A backend's RotateSpectatorToken."""


RequestKind.__hash__ = object.__hash__  # type: ignore[method-assign]
"""A kind hashed by identity, as a member equals only itself: ``Enum.__hash__`` is a Python
function, run twice per durable input (``session.pending``'s key), where this is C's (set
after the class: mypyc drops a ``__hash__`` in an enum's body)."""


class PendingRequest(NamedTuple):
    """An input applied but not yet committed, by its request id: a retry meanwhile waits
    for the task that commits it (a tuple: hashed as fast as the plain key it replaces)."""

    kind: RequestKind
    request_id: str
    seat: int | None = None
    """The acting seat (``SEAT_ACTION`` only)."""
    scope: str = ""
    """The scope of a join's request id (``ownership.scope_of``; ``JOIN`` only)."""


Queued = tuple[tuple[LoggedEvent, ...], bytes]
"""What a stream's mailbox holds for one change: its events, and their serialized
``StreamEventsResponse`` as the stream's seat sees them (built once, by the fan-out); no
events: a presence change (``presence.py``)."""


@dataclass(slots=True)
class SeatsPresence:
    """Who is connected at a table (``presence.py``): its open streams per seat, and the
    timers and announcements of the seats without one."""

    streams: dict[int, int] = field(default_factory=dict)
    """Person seat -> its open event streams (absent: none)."""
    absent_since: dict[int, int] = field(default_factory=dict)
    """Seat -> when its last stream ended (ms)."""
    announced_gone: set[int] = field(default_factory=set)
    """Seats whose departure the streams were told of (their return is told too)."""
    debounce: dict[int, TimerHandle] = field(default_factory=dict)
    """Seat -> the timer that announces its departure unless a stream opens first."""
    idle: dict[int, TimerHandle] = field(default_factory=dict)
    """Awaited seat -> the timer that files its ``seat_idle`` record."""
    reported: set[int] = field(default_factory=set)
    """Seats whose current absence was filed as ``seat_idle`` already."""
    loaded_ms: int = 0
    """When the table was first looked at here (absence of a seat never streamed counts from
    then)."""


class Subscriber:
    """One open event stream: a bounded mailbox fed by the session (lighter than an
    ``asyncio.Queue``: one deque and at most one waiting future)."""

    __slots__ = ("capacity", "closed", "direct", "loop", "overflowed", "pending", "presence",
                 "revoked", "seat", "spectator_token", "waiter")

    def __init__(self, seat: int | None, capacity: int) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        """The stream's loop, looked up once: on Python 3.11 every ``get_running_loop`` makes
        a ``getpid`` system call (a measurable share of a message's cost)."""
        self.seat = seat
        self.capacity = capacity
        self.pending: deque[Queued | None] = deque()
        self.waiter: asyncio.Future[None] | None = None
        self.overflowed = False
        self.closed = False
        self.revoked = False
        """Ended because its seat's token was revoked (ReplaceSeat), or the spectator token
        it was opened with (RotateSpectatorToken)."""
        self.spectator_token = False
        """Opened with the table's spectator token (a rotation ends it)."""
        self.presence = False
        """Asked for the table's presence changes (``presence.py``)."""
        self.direct: Callable[[tuple[LoggedEvent, ...], bytes], bool] | None = None
        """Writes a change at once through the stream's transport, when it can (True), instead
        of queueing it (``fanout.LiveFeed.at_commit``); tried only while the stream is idle."""

    def _put(self, item: Queued | None) -> None:
        self.pending.append(item)
        waiter = self.waiter
        if waiter is not None:
            self.waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def offer(self, logged: tuple[LoggedEvent, ...], wire: bytes) -> None:
        """Queue the events of one change, with their serialized ``StreamEventsResponse`` as
        this stream's seat sees them; past capacity the stream is cut off (it may resume by
        sequence). An idle stream (its task waiting for a change, nothing queued) whose
        transport can write at once gets it written now (``direct``): the same bytes, in the
        same order, without the queue and a step of its task."""
        if self.overflowed or self.closed:
            return
        pending = self.pending
        direct = self.direct
        if direct is not None and not pending:
            waiter = self.waiter
            if waiter is not None and not waiter.done() and direct(logged, wire):
                return
        if pending and len(pending) >= self.capacity:  # (a capacity is at least 1)
            self.overflowed = True
            self._put(None)
            return
        pending.append((logged, wire))  # _put, inlined (every event of every stream)
        waiter = self.waiter
        if waiter is not None:
            self.waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def close(self) -> None:
        """End the stream (server shutdown, game dropped)."""
        if not self.closed:
            self.closed = True
            self._put(None)

    def revoke(self) -> None:
        """End the stream: its seat's token was revoked (what is queued is still sent)."""
        self.revoked = True
        self.close()

    def arrival(self) -> asyncio.Future[None]:
        """A future set once something is queued: awaited while ``pending`` is empty (a bare
        future, not a coroutine: one less object per message)."""
        loop = self.loop
        if loop is None:
            loop = self.loop = asyncio.get_running_loop()
        waiter = self.waiter = loop.create_future()
        return waiter


@dataclass
class Session:
    """A table hosted by this server."""

    game_id: str
    rules: Rules[Any, Any, Any]
    adapter: GameAdapter
    table: tbl.Table
    created_ms: int
    names: list[str]
    """Seat -> its holder's name now ("" for none): what views and listings show."""
    ownership: Ownership = field(default_factory=Ownership)
    """Whose the table is (its backend, visibility, reserved seats, series length)."""
    ended_by_backend: bool = False
    """Abandoned because its backend ended it (EndTable), not for want of players."""
    events: list[LoggedEvent] = field(default_factory=list)
    """The live event log: the current game's events (and any not yet published); those of
    finished games move to ``compacted`` once published (see compaction.py)."""
    compacted: list[CompactedEvents] = field(default_factory=list)
    wire: dict[int, bytes] = field(default_factory=dict)
    """(sequence, view) -> the live log's events as serialized stream frames, built once per
    recipient view and shared by the streams, the SubmitAction answer and the compaction
    (keyed by ``wire.wire_key``: one integer, not a tuple, per lookup)."""
    request_ids: dict[int, dict[str, tuple[int, int, int]]] = field(default_factory=dict)
    """Seat -> request id -> (version, first and last event sequence) of its committed answer,
    for the life of the table (rebuilt from the journal after a restart)."""
    pending: dict[PendingRequest, Awaitable[Any]] = field(default_factory=dict)
    """Inputs applied but not yet committed, by request -> the input that commits them and
    answers (``shielding.Input``: a retry meanwhile awaits its answer)."""
    writes: set[Awaitable[None]] = field(default_factory=set)
    """Commits in flight (a rebuild waits for every one of them to settle first)."""
    subscribers: set[Subscriber] = field(default_factory=set)
    bot_timers: dict[int, TimerHandle] = field(default_factory=dict)
    deadline_timers: dict[tuple[int, int], TimerHandle] = field(default_factory=dict)
    published_sequence: int = 0
    """Events up to this sequence have been handed to the streams."""
    durable_sequence: int = 0
    """Events up to this sequence come from inputs the store has committed: only those are
    published, so no stream ever sees an event that a crash could take back."""
    join_requests: dict[tuple[str, str], int] = field(default_factory=dict)
    """(scope, JoinGame request id) -> the seat it claimed (retries from the same scope,
    ``ownership.scope_of``, get the same seat and token; another scope's is another join), or
    ``HANDED_OVER`` once its backend replaced that seat (a retry is refused TOKEN_REVOKED: the
    seat, its token and its hand are another holder's now)."""
    holder_names: dict[int, str] = field(default_factory=dict)
    """Sequence of a SeatClaimed or SeatReplaced event -> the name it gives the seat's holder:
    the holder's at that event, which ``names`` no longer holds once the seat changes hands
    again. One entry per claim and per replacement (as ``replace_requests``), for the table's
    life: a finished game's events are framed again after their compaction when a stream's
    queued change overlaps its backlog (``fanout.LiveFeed.outgoing``)."""
    generations: dict[int, int] = field(default_factory=dict)
    """Seat -> its holder's generation: how many times its backend replaced it (0: never)."""
    replace_requests: dict[str, Replacement] = field(default_factory=dict)
    """ReplaceSeat request id -> the replacement it made (retries get the same token)."""
    presence: SeatsPresence | None = None
    """Who is connected (``presence.py``; made at the first stream of a person seat, or the
    first look for idle seats: a table nobody streams costs nothing)."""
    spectator_generation: int = 0
    """How many times its backend rotated the spectator token (``ownership.spectator_token``)."""
    rotate_requests: dict[str, int] = field(default_factory=dict)
    """RotateSpectatorToken request id -> the generation it made (retries get its token)."""
    probes: dict[int, float] = field(default_factory=dict)
    """Event sequence -> perf_counter at the arrival of the slap that caused it (metrics)."""
    journal_length: int = 0
    """Inputs applied since creation (the journal's length)."""
    epoch: int = 1
    """The fencing epoch this server holds the table under: 1 from its creation, bumped by
    each takeover in a cluster (a store that is not fenced ignores it)."""
    failed_in_doubt: bool = False
    """Discarded because a write's commit could not be told (``CommitUnknown``): until its
    rebuild, a retried write of any request id may have been applied."""
    create_request_id: str = ""
    """The CreateGame request id that created the table ("" for none)."""
    hides_events: bool = field(init=False)
    """``rules.hides_events``, read once: every event's bytes ask it (a native field, where
    the rules' protocol is a lookup by name)."""

    def __post_init__(self) -> None:
        self.hides_events = self.rules.hides_events
    at_rest: bool = False
    """Loaded back from rest (resting.py): its next input first clears its stored listing."""
    seats_without_bots: tuple[tbl.SeatSlot, ...] | None = None
    """The table's seats when last seen with no bot-controlled seat (the host then skips the
    bot scheduling while they are the same object: seats are immutable)."""
    listed_over: bool | None = None
    """Whether its game was over when the lobby was last told (``GameHost.publishing``: the
    lobby is told again only when that changes; None: not yet, told at the next look)."""
    over_of: tbl.Table | None = field(default=None, repr=False, compare=False)
    """The table whose ``game_over`` is ``over`` (``game_over``: worked out once per table)."""
    over: bool = False

    @property
    def last_sequence(self) -> int:
        return self.table.next_sequence - 1

    def game_over(self) -> bool:
        """``table.game_over(rules)`` of the current table, worked out once per table (a table
        is immutable: each input makes a new one; ``awaiting`` works it out on the way)."""
        table = self.table
        if table is not self.over_of:
            self.over = table.game_over(self.rules)
            self.over_of = table
        return self.over

    def awaiting(self) -> tuple[int, ...]:
        """The seats the current table awaits, in order (none once its game is over)."""
        table = self.table
        state = table.state
        if state is None or table.abandoned:  # ``game_over``'s answer, on the way (every action)
            self.over, self.over_of = table.abandoned, table
            return ()
        rules = self.rules
        if rules.outcome(state) is not None:  # table.game_over, inlined
            self.over, self.over_of = True, table
            return ()
        self.over, self.over_of = False, table
        to_act = rules.to_act(state)
        awaited = _AWAITED.get(to_act)
        if awaited is None:
            awaited = tuple(sorted(to_act))
            if len(_AWAITED) < 4096:
                _AWAITED[to_act] = awaited
        return awaited

    def record(self, events: list[tbl.TableEvent],
               now_ms: int | None = None) -> tuple[LoggedEvent, ...]:
        """Append freshly produced events to the log (with the current version), as of
        ``now_ms`` (by default the table's creation, whose events these are)."""
        awaiting = self.awaiting()
        time_ms = self.created_ms if now_ms is None else now_ms
        version = self.table.version
        logged = tuple([LoggedEvent(e, version, awaiting, time_ms) for e in events])
        self.events.extend(logged)
        return logged

    def apply(self, move: tbl.Input, now_ms: int) -> Applied:
        """Apply one input (raises RuleError, changing nothing, when refused)."""
        table, events = tbl.step(self.rules, self.table, move, now_ms)
        self.table = table
        self.journal_length += 1
        version = table.version
        awaiting = self.awaiting()  # ``record``, inlined (every action)
        logged = tuple([LoggedEvent(e, version, awaiting, now_ms) for e in events])
        self.events.extend(logged)
        return Applied(version, logged)

    def name_holder(self, seat: int, name: str, applied: Applied) -> None:
        """``seat``'s holder is ``name`` from ``applied`` on (its Claim or Replace): the seat's
        name now, and the name its SeatClaimed or SeatReplaced event gives for good."""
        self.names[seat] = name
        for logged in applied.events:
            body = logged.event.body
            if isinstance(body, (tbl.SeatClaimed, tbl.SeatReplaced)) and body.seat == seat:
                self.holder_names[logged.event.sequence] = name

    def events_after(self, sequence: int) -> list[LoggedEvent]:
        """The logged events with a sequence greater than ``sequence``."""
        if not self.events:
            return []
        first = self.events[0].event.sequence
        start = max(0, sequence + 1 - first)
        return self.events[start:]

    def listed_to(self, backend: Backend | None) -> bool:
        """ListGames shows the table to this caller (its ``ownership`` decides)."""
        return self.ownership.listed_to(backend)

    def remembered(self, seat: int, request_id: str) -> Applied | None:
        """The committed answer to ``request_id`` of ``seat``, if there is one."""
        seen = self.request_ids.get(seat)
        answer = None if seen is None else seen.get(request_id)
        if answer is None:
            return None
        version, first, last = answer
        if last < first:
            return Applied(version, ())
        live = self.events[0].sequence if self.events else last + 1
        if first < live:  # a finished game's answer: its events are bytes now
            rest = tuple(self.events_after(live - 1)[:max(0, last - live + 1)])
            return Applied(version, rest, compacted=(first, min(last, live - 1)))
        return Applied(version, tuple(self.events_after(first - 1)[:last - first + 1]))

    def knows_request(self, request_id: str) -> bool:
        """This table committed a request of that id (a seat's action, a join, a
        replacement or a rotation, whoever sent it)."""
        return (any(request_id in seen for seen in self.request_ids.values())
                or any(known == request_id for _, known in self.join_requests)
                or request_id in self.replace_requests or request_id in self.rotate_requests)

    def remember(self, seat: int, request_id: str, applied: Applied) -> None:
        """Keep the answer to a committed input (three integers, for the table's life)."""
        events = applied.events
        if events:
            answer = (applied.version, events[0].event.sequence, events[-1].event.sequence)
        else:
            answer = (applied.version, 1, 0)
        seen = self.request_ids.get(seat)
        if seen is None:
            seen = self.request_ids[seat] = {}
        seen[request_id] = answer

    def cancel_timers(self) -> None:
        for handle in list(self.bot_timers.values()) + list(self.deadline_timers.values()):
            handle.cancel()
        self.bot_timers.clear()
        self.deadline_timers.clear()
