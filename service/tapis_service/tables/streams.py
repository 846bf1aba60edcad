"""Open event streams: caps per table, per connection, per peer and server-wide (spectators'
and seated players' apart), and the slow-stream watchdog.

A grpc.aio server-streaming handler that yields a message is suspended until the transport has
taken it; when the client stops reading, HTTP/2 flow control fills up and that write never
completes. Each stream records when its current write began (on the injected clock); a
watchdog, running while any stream is open, cuts a stream whose write has been pending for
``stall_ms``: the client gets ``RESOURCE_EXHAUSTED`` / ``STREAM_TOO_SLOW`` (with the sequence to
resume after) once it reads again, and the handler task is cancelled at once, so its queue
and subscription are freed whether or not the client ever reads. The watchdog knows no
transport: each stream is opened with the function that ends it (``GameApi.stream_events``'s
``end``).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import grpc

from tapis_service.door.limits import peer_host
from tapis_service.observe.clock import Clock, TimerHandle
from tapis_service.observe.errors import ServiceError

EndStream = Callable[[ServiceError], None]
"""How a transport ends an open stream from outside its own task (the slow-stream watchdog):
with this refusal, sent behind what the transport already holds."""


def too_many_streams(message: str) -> ServiceError:
    return ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_MANY_STREAMS", message)


def too_slow(last: int) -> ServiceError:
    """The refusal of a stream cut off for falling behind; it may resume after ``last``."""
    return ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED, "STREAM_TOO_SLOW",
                        f"this stream fell too far behind; resume with after_sequence={last}",
                        resume_at(last))


def revoked(spectator: bool = False) -> ServiceError:
    """The refusal of a token its backend revoked, and the end of its streams: a seat token
    (ReplaceSeat) or, with ``spectator``, the table's former spectator token
    (RotateSpectatorToken)."""
    return ServiceError(grpc.StatusCode.UNAUTHENTICATED, "TOKEN_REVOKED",
                        f"this {'spectator' if spectator else 'seat'} token was revoked by the "
                        "table's backend")


def stopping(last: int) -> ServiceError:
    """The end of a stream the server closes because it is stopping; it may resume after
    ``last`` once the server (or another node) serves again."""
    return ServiceError(grpc.StatusCode.UNAVAILABLE, "SERVER_STOPPING",
                        f"the server is stopping; resume with after_sequence={last}",
                        resume_at(last))


def resume_at(last: int) -> dict[str, str]:
    """The ErrorInfo metadata of a stream's end: where the client resumes."""
    return {"resume_after_sequence": str(last)}


@dataclass(eq=False)
class OpenStream:
    """One open StreamEvents call, as the watchdog sees it."""

    peer: str
    end: Callable[[ServiceError], None]
    """Ends the stream with a refusal, from outside its task (its transport's doing)."""
    task: asyncio.Task[object] | None
    writing_since: int | None = None
    """Clock time at which the message being written was handed to grpc (None: not writing)."""
    last: int = 0
    """The sequence of the last event written."""
    cut: bool = False
    seated: bool = False
    """A seated player's (or its backend's) stream: counted apart from spectators'."""


class StreamGuard:
    """Counts open streams and cuts the ones whose client does not read."""

    def __init__(self, clock: Clock, per_table: int, per_connection: int, per_peer: int,
                 stall_ms: int, spectators: int = 0, seated: int = 0) -> None:
        self.clock = clock
        self.max_spectators = spectators
        """Spectators' streams open at once, server-wide (0: no cap)."""
        self.max_seated = seated
        """Seated players' and backends' streams open at once, server-wide (0: no cap)."""
        self.spectator_streams = 0
        self.seat_streams = 0
        self.per_table = per_table
        self.per_connection = per_connection
        self.per_peer = per_peer
        self.stall_ms = stall_ms
        self.open: set[OpenStream] = set()
        self.connections: Counter[str] = Counter()
        self.peers: Counter[str] = Counter()
        self._timer: TimerHandle | None = None
        self.cut_count = 0

    def open_stream(self, peer: str, table_streams: int,
                    end: Callable[[ServiceError], None], seated: bool = False) -> OpenStream:
        """Register a new stream, or refuse it (TOO_MANY_STREAMS) beyond a cap.
        ``table_streams``: the table's streams it counts against (a seated one: none)."""
        if seated and self.max_seated and self.seat_streams >= self.max_seated:
            raise too_many_streams(f"the server holds {self.max_seated} players' streams, "
                                   "as many as it may; try again later")
        if not seated and self.max_spectators and self.spectator_streams >= self.max_spectators:
            raise too_many_streams(f"the server holds {self.max_spectators} spectators' "
                                   "streams, as many as it may; try again later")
        if table_streams >= self.per_table:
            raise too_many_streams(f"this table has {self.per_table} open streams already")
        if self.connections[peer] >= self.per_connection:
            raise too_many_streams(
                f"this connection has {self.per_connection} open streams already")
        host = peer_host(peer)
        if self.peers[host] >= self.per_peer:
            raise too_many_streams(f"your address has {self.per_peer} open streams already")
        self.connections[peer] += 1
        self.peers[host] += 1
        try:
            task: asyncio.Task[object] | None = asyncio.current_task()
        except RuntimeError:
            task = None
        stream = OpenStream(peer, end, task, seated=seated)
        self.open.add(stream)
        if seated:
            self.seat_streams += 1
        else:
            self.spectator_streams += 1
        if self._timer is None and self.stall_ms > 0:
            self._arm()
        return stream

    def close_stream(self, stream: OpenStream) -> None:
        if stream not in self.open:
            return
        self.open.discard(stream)
        if stream.seated:
            self.seat_streams -= 1
        else:
            self.spectator_streams -= 1
        for counts, key in ((self.connections, stream.peer),
                            (self.peers, peer_host(stream.peer))):
            counts[key] -= 1
            if counts[key] <= 0:
                del counts[key]
        if not self.open and self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _arm(self) -> None:
        period = max(self.stall_ms // 2, 1)
        self._timer = self.clock.call_at(self.clock.now_ms() + period, self._sweep)

    def _sweep(self) -> None:
        self._timer = None
        now = self.clock.now_ms()
        for stream in list(self.open):
            since = stream.writing_since
            if since is not None and now - since >= self.stall_ms:
                self.cut(stream)
        if self.open:
            self._arm()

    def cut(self, stream: OpenStream) -> None:
        """End a stream that does not read: its status goes out behind what grpc holds."""
        if stream.cut:
            return
        stream.cut = True
        self.cut_count += 1
        stream.end(too_slow(stream.last))
        if stream.task is not None:
            stream.task.cancel()
        self.close_stream(stream)

