"""Prometheus metrics (served on ``--metrics-port``): what an operator watches."""

from __future__ import annotations

import asyncio
import bisect
import gc
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, Info
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from tapis_service.observe.errors import CannotListen


class CachedCounter(Counter):
    """A labelled counter whose children are looked up once per label values (``labels`` takes
    a lock and builds a key on every call otherwise: this is on every action's path)."""

    def labels(self, *values: Any, **keyed: Any) -> Any:
        if keyed:
            return super().labels(*values, **keyed)
        children: dict[tuple[Any, ...], Any] = self.__dict__.setdefault("_tapis_children", {})
        child = children.get(values)
        if child is None:
            child = children[values] = super().labels(*values)
        return child


class LoopCounter:
    """A labelled counter incremented only from the event loop's thread: a one-item list per
    label values (no lock, no child lookup: a hot path looks its ``cell`` up once and adds to
    it), exported like a ``Counter`` (``<name>_total``) by the registry's collection, which
    reads a copy (``dict.copy`` is atomic under the GIL, so the exporter's thread never sees
    the dict change under it, and reading a cell's integer is atomic too)."""

    def __init__(self, name: str, documentation: str, labelnames: list[str],
                 registry: CollectorRegistry = REGISTRY) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = labelnames
        self.counts: dict[tuple[str, ...], list[int]] = {}
        registry.register(self)

    def cell(self, *values: str) -> list[int]:
        """The count of these label values, as a one-item list a caller adds to
        (``cell[0] += 1``): looked up once by a caller on a hot path."""
        cell = self.counts.get(values)
        if cell is None:
            cell = self.counts[values] = [0]
        return cell

    def inc(self, *values: str) -> None:
        cell = self.counts.get(values)  # ``cell``, its lookup inlined (every action)
        if cell is None:
            cell = self.cell(*values)
        cell[0] += 1

    def value(self, *values: str) -> int:
        cell = self.counts.get(values)
        return 0 if cell is None else cell[0]

    def collect(self) -> list[CounterMetricFamily]:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for values, cell in sorted(self.counts.copy().items()):
            family.add_metric(values, cell[0])
        return [family]


class LoopHistogram:
    """A labelled histogram observed only from the event loop's thread: per label values, a
    list of bucket counts and a sum (no lock: once per call), exported like a ``Histogram``
    (``_bucket`` cumulative with ``le``, ``_sum``, ``_count``) by the registry's collection,
    which reads copies. ``tests/service/test_observability.py`` checks its exposition equals
    prometheus_client's own Histogram fed the same values."""

    def __init__(self, name: str, documentation: str, labelnames: list[str],
                 buckets: Sequence[float], registry: CollectorRegistry = REGISTRY) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = labelnames
        self.bounds = sorted(buckets)
        self.children: dict[tuple[str, ...], list[float]] = {}
        """label values -> [count per bucket..., count above the last bound, sum]."""
        registry.register(self)

    def observe(self, value: float, *values: str) -> None:
        self.observe_child(self.child(*values), value)

    def child(self, *values: str) -> list[float]:
        """The counts of these label values (looked up once by a caller on a hot path)."""
        child = self.children.get(values)
        if child is None:
            child = self.children[values] = [0.0] * (len(self.bounds) + 2)
        return child

    def observe_child(self, child: list[float], value: float) -> None:
        child[bisect.bisect_left(self.bounds, value)] += 1
        child[-1] += value

    def collect(self) -> list[HistogramMetricFamily]:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        bounds = [*(_float_text(b) for b in self.bounds), "+Inf"]
        for values, child in sorted(self.children.copy().items()):
            counts = child.copy()
            cumulative, buckets = 0.0, []
            for bound, count in zip(bounds, counts[:-1], strict=True):
                cumulative += count
                buckets.append((bound, cumulative))
            family.add_metric(list(values), buckets, counts[-1])
        return [family]


def _float_text(bound: float) -> str:
    """A bucket bound as prometheus_client writes it (``le="0.005"``)."""
    from prometheus_client.utils import floatToGoString

    return str(floatToGoString(bound))


ACTIONS = LoopCounter("tapis_actions", "Inputs applied to tables", ["kind", "source"])
REFUSALS = CachedCounter("tapis_refusals_total", "Requests refused, by gRPC code and reason",
                         ["code", "reason"])
REFUSALS.labels("RESOURCE_EXHAUSTED", "OVERLOADED")  # at 0 from the start: an alert's series
GAMES = Gauge("tapis_games", "Tables held in memory (resting ones not included: see tapis_tables)")
RPC_STARTED = LoopCounter("grpc_server_started",
                          "RPCs started on the server, by method (unary and server streams) and "
                          "transport (grpc, websocket, relay: relayed from another node)",
                          ["grpc_type", "grpc_service", "grpc_method", "transport"])
RPC_HANDLED = LoopCounter("grpc_server_handled",
                          "RPCs completed on the server, by method, gRPC status code and "
                          "transport",
                          ["grpc_type", "grpc_service", "grpc_method", "grpc_code", "transport"])
RPC_SENT = LoopCounter("grpc_server_msg_sent",
                       "Messages sent by the server's streaming RPCs, by method and transport",
                       ["grpc_type", "grpc_service", "grpc_method", "transport"])
RPC_SECONDS = LoopHistogram(
    "grpc_server_handling_seconds",
    "Latency of RPCs handled by the server: a unary call until its answer or refusal, a "
    "server stream until it ends; by method and transport",
    ["grpc_type", "grpc_service", "grpc_method", "transport"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
             10.0, 60.0, 600.0, 3600.0))
STORE_COMMIT_SECONDS = Histogram(
    "tapis_store_commit_seconds",
    "Store transactions (each a group of writes), begin to commit or failure",
    ["store"], buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0,
                        2.5, 5.0))
STORE_WRITE_FAILURES = Counter("tapis_store_write_failures_total",
                               "Store transactions that failed (not committed, or in doubt)",
                               ["store"])
BUILD_INFO = Info("tapis_build", "The server's version and source revision")
LOOP_LAG = Histogram(
    "tapis_loop_lag_seconds", "How late the event loop woke a 50 ms timer (a stall of the "
    "whole server: collector, a long callback, or the machine)",
    buckets=(0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5))
READY = Gauge("tapis_ready", "1 while readiness is SERVING (the store takes writes), else 0")
STORE_PROBE_FAILURES = Counter("tapis_store_probe_failures_total",
                               "Readiness probes of the store that failed or timed out")
STREAMS = Gauge("tapis_streams", "Open event streams (StreamEvents, over gRPC or the WebSocket)")
RESULTS_UNACKNOWLEDGED = Gauge("tapis_results_unacknowledged",
                               "Result records their backends have not acknowledged (in a "
                               "cluster: every node's, the ledger is shared)")
RESULTS_OLDEST_AGE = Gauge("tapis_results_oldest_unacknowledged_seconds",
                           "Age of the oldest unacknowledged result record (0: none); it is "
                           "dropped at --results-max-age")
RESULTS_EXPIRED = Counter("tapis_results_expired_total",
                          "Result records dropped unacknowledged at --results-max-age")
SLAP_TO_PILE_WON = Histogram(
    "tapis_slap_to_pile_won_seconds",
    "From a winning real-time action's arrival (a slap) to the event it won (a pile) being "
    "sent (first stream)",
    buckets=(0.0001, 0.0002, 0.0003, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.003, 0.005,
             0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.1, 0.25, 0.5, 1.0))
GC_PAUSES = Histogram(
    "tapis_gc_pause_seconds", "Garbage collector pauses (the whole process stops), by generation",
    ["generation"],
    buckets=(0.0001, 0.0003, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5))
GC_PAUSE_MAX = Gauge("tapis_gc_pause_max_seconds", "The longest collector pause so far")
GC_COLLECTED = Counter("tapis_gc_collected_total",
                       "Objects the collector found unreachable (reference cycles)")


class _PauseWatch:
    """A ``gc.callbacks`` entry timing every collection into ``GC_PAUSES``."""

    def __init__(self) -> None:
        self.started = 0.0
        self.longest = 0.0
        self.children = [GC_PAUSES.labels(str(generation)) for generation in range(3)]

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self.started = time.perf_counter()
            return
        pause = time.perf_counter() - self.started
        self.children[info["generation"]].observe(pause)
        if info["collected"]:
            GC_COLLECTED.inc(info["collected"])
        if pause > self.longest:
            self.longest = pause
            GC_PAUSE_MAX.set(pause)


def watch_gc_pauses() -> None:
    """Time every collection from now on (once per process; idempotent)."""
    if not any(isinstance(callback, _PauseWatch) for callback in gc.callbacks):
        gc.callbacks.append(_PauseWatch())
LOOP_LAG_MAX = Gauge("tapis_loop_lag_max_seconds",
                     "The longest the event loop was late to a timer so far (a stall of the "
                     "whole server: collector, a long callback, or the machine)")


async def watch_loop_lag(every_s: float = 0.05) -> None:
    """Measure how late the event loop wakes a timer, every ``every_s`` (until cancelled)."""
    longest = 0.0
    while True:
        ticked = time.perf_counter()
        await asyncio.sleep(every_s)
        late = max(time.perf_counter() - ticked - every_s, 0.0)
        LOOP_LAG.observe(late)
        if late > longest:
            longest = late
            LOOP_LAG_MAX.set(late)


def serve_metrics(port: int, host: str) -> None:
    """Prometheus' exposition on ``host:port`` (a thread); ``CannotListen`` if taken."""
    from prometheus_client import start_http_server

    try:
        start_http_server(port, addr=host)
    except OSError as error:
        raise CannotListen(f"cannot serve metrics on {host}:{port} ({error.strerror})") \
            from error


def store_opened(store: str) -> None:
    """The store's series exported from the start: its failures at 0 until the first one
    (an alert on ``increase`` sees that first one), its commits with no sample yet."""
    STORE_WRITE_FAILURES.labels(store)
    STORE_COMMIT_SECONDS.labels(store)


def observe_commit(store: str, seconds: float, committed: bool) -> None:
    """One store transaction (from the store's writer, any thread)."""
    STORE_COMMIT_SECONDS.labels(store).observe(seconds)
    if not committed:
        STORE_WRITE_FAILURES.labels(store).inc()


class TablesByStatus:
    """``tapis_tables{status}``: waiting (not started), live, finished (in memory), resting
    (finished, out of memory: the store keeps it), from a source the server sets (read at each
    scrape, from the exporter's thread: a copy of the statuses)."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.source: Callable[[], Iterable[str]] | None = None
        registry.register(self)

    def collect(self) -> list[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "tapis_tables", "Tables this server answers for, by status: waiting, live and "
            "finished are in memory; resting ones are kept by the store and loaded back on "
            "the next call", labels=["status"])
        found = {"waiting": 0, "live": 0, "finished": 0, "resting": 0}
        if self.source is not None:
            for status in self.source():
                found[status] = found.get(status, 0) + 1
        for status, count in found.items():
            family.add_metric([status], count)
        return [family]


TABLES = TablesByStatus()


def set_build_info(version: str, revision: str) -> None:
    BUILD_INFO.info({"version": version, "revision": revision})
