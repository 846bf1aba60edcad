"""What an operator watches: grpc-prometheus' per-method metrics, the store's commit latency,
the build, tables by status, loop lag; request lines carry the peer, request id, trace id and
duration; a warning that repeats is written once per period."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import random
import sqlite3
import threading
from pathlib import Path

import grpc
import pytest
import structlog
import structlog.testing
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram, generate_latest

from tapis.v1 import game_service_pb2 as pb
from tapis_service.door import logcontext
from tapis_service.observe import logrepeat, metrics
from tapis_service.observe.clock import ManualClock
from tapis_service.observe.logrepeat import RepeatLimiter
from tapis_service.stores.sqlite_store import SqliteStore
from tests.support.calls import STREAM_DEADLINE_S, person_seats
from tests.support.server import ServerFactory


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_a_loop_histogram_is_exported_as_prometheus_own_histogram() -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    buckets = (0.001, 0.01, 0.1, 1.0)
    loop_histogram = metrics.LoopHistogram("t_seconds", "T", ["m"], buckets, registry=ours)
    plain = Histogram("t_seconds", "T", ["m"], buckets=buckets, registry=theirs)
    rng = random.Random(6)
    for _ in range(1000):
        value, method = rng.choice([0.0005, 0.001, 0.05, 0.1, 3.0, rng.random()]), \
            rng.choice("ab")
        loop_histogram.observe(value, method)
        plain.labels(method).observe(value)
    assert samples(ours) == samples(theirs)
    assert "# TYPE t_seconds histogram" in generate_latest(ours).decode()


def test_a_loop_counter_is_exported_as_prometheus_own_counter() -> None:
    """Added to by ``inc`` or through a cell a hot path keeps, it exports what a plain
    labelled Counter fed the same increments exports."""
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    loop_counter = metrics.LoopCounter("t_calls", "T", ["m", "code"], registry=ours)
    plain = Counter("t_calls", "T", ["m", "code"], registry=theirs)
    kept = loop_counter.cell("a", "OK")
    rng = random.Random(7)
    for _ in range(1000):
        method, code = rng.choice("ab"), rng.choice(["OK", "NOT_FOUND"])
        if (method, code) == ("a", "OK") and rng.random() < 0.5:
            kept[0] += 1
        else:
            loop_counter.inc(method, code)
        plain.labels(method, code).inc()
    assert samples(ours) == samples(theirs)
    assert loop_counter.value("a", "OK") == plain.labels("a", "OK")._value.get()
    exported = sorted(line for line in generate_latest(theirs).decode().splitlines()
                      if "_created" not in line)
    assert sorted(generate_latest(ours).decode().splitlines()) == exported


async def counted(name: str, expected: float, **labels: str) -> bool:
    """Whether the sample reaches ``expected`` once the call's handler has ended: a refusal's
    status reaches the client as the handler aborts, before the handler's last lines (which
    count it) run, so the count is awaited (bounded), not read at once."""
    for _ in range(500):
        if sample(name, **labels) == expected:
            return True
        await asyncio.sleep(0.01)  # the handler's end, on the server's side of the loop
    return sample(name, **labels) == expected


def samples(registry: CollectorRegistry) -> set[tuple[str, tuple[tuple[str, str], ...], float]]:
    """Every sample but the creation times (which ours has not), in no particular order."""
    return {(s.name, tuple(sorted(s.labels.items())), round(s.value, 9))
            for family in registry.collect() for s in family.samples
            if not s.name.endswith("_created")}


async def test_every_call_is_counted_and_timed_by_method_and_code(
        make_server: ServerFactory, tmp_path: Path) -> None:
    h = await make_server(clock=ManualClock(), store=SqliteStore(tmp_path))
    labels = {"grpc_type": "unary", "grpc_service": "tapis.v1.GameService", "transport": "grpc"}
    before_ok = sample("grpc_server_handled_total", **labels, grpc_method="CreateGame",
                       grpc_code="OK")
    before_missing = sample("grpc_server_handled_total", **labels, grpc_method="GetGame",
                            grpc_code="NOT_FOUND")
    before_timed = sample("grpc_server_handling_seconds_count", **labels,
                          grpc_method="CreateGame")
    commits = sample("tapis_store_commit_seconds_count", store="sqlite")
    await h.stub.CreateGame(pb.CreateGameRequest(kind=pb.GAME_KIND_WAR,
                                                 seat_configs=person_seats(2)))
    with contextlib.suppress(grpc.aio.AioRpcError):  # NOT_FOUND: what is counted
        await h.stub.GetGame(pb.GetGameRequest(game_id="nope"))
    assert sample("grpc_server_handled_total", **labels, grpc_method="CreateGame",
                  grpc_code="OK") == before_ok + 1
    assert await counted("grpc_server_handled_total", before_missing + 1, **labels,
                         grpc_method="GetGame", grpc_code="NOT_FOUND")
    assert sample("grpc_server_handling_seconds_count", **labels,
                  grpc_method="CreateGame") == before_timed + 1
    assert sample("tapis_store_commit_seconds_count", store="sqlite") > commits
    assert sample("tapis_tables", status="waiting") >= 1
    assert sample("tapis_build_info", version=metrics_version(), revision=metrics_revision()) \
        == 1
    assert sample("tapis_ready") == 1
    text = generate_latest(REGISTRY).decode()
    for name in ("grpc_server_handling_seconds_bucket", "tapis_store_commit_seconds_bucket",
                 "tapis_loop_lag_seconds_bucket", "tapis_gc_pause_seconds_bucket"):
        assert f"# TYPE {name.removesuffix('_bucket')} histogram" in text


async def test_server_streams_are_counted_and_timed_as_server_stream(
        make_server: ServerFactory) -> None:
    h = await make_server(clock=ManualClock())
    service = {"grpc_type": "server_stream", "grpc_service": "tapis.v1.GameService",
               "transport": "grpc"}
    events = {**service, "grpc_method": "StreamEvents"}
    watch = {**service, "grpc_method": "WatchResults"}
    before = {name: sample(name, **events) for name in (
        "grpc_server_started_total", "grpc_server_msg_sent_total",
        "grpc_server_handling_seconds_count")}
    cancelled = sample("grpc_server_handled_total", **events, grpc_code="CANCELLED")
    missing = sample("grpc_server_handled_total", **events, grpc_code="NOT_FOUND")
    keyless = sample("grpc_server_handled_total", **watch, grpc_code="UNAUTHENTICATED")
    created = await h.stub.CreateGame(pb.CreateGameRequest(kind=pb.GAME_KIND_WAR,
                                                           seat_configs=person_seats(2)))
    await h.stub.JoinGame(pb.JoinGameRequest(game_id=created.game.game_id, seat=0))
    stream = h.stub.StreamEvents(pb.StreamEventsRequest(game_id=created.game.game_id),
                                 timeout=STREAM_DEADLINE_S)
    assert (await asyncio.wait_for(stream.read(), 10)).events  # the backlog: one message
    stream.cancel()
    with contextlib.suppress(grpc.aio.AioRpcError):
        async for _ in h.stub.StreamEvents(pb.StreamEventsRequest(game_id="nope")):
            pass
    with contextlib.suppress(grpc.aio.AioRpcError):
        async for _ in h.stub.WatchResults(pb.WatchResultsRequest()):
            pass
    async with asyncio.timeout(10):  # the server sees the cancellation on its own time
        while sample("grpc_server_handled_total", **events, grpc_code="CANCELLED") == cancelled:
            await asyncio.sleep(0.001)
    assert sample("grpc_server_started_total", **events) == \
        before["grpc_server_started_total"] + 2
    assert sample("grpc_server_msg_sent_total", **events) == \
        before["grpc_server_msg_sent_total"] + 1
    assert sample("grpc_server_handling_seconds_count", **events) == \
        before["grpc_server_handling_seconds_count"] + 2
    assert sample("grpc_server_handled_total", **events, grpc_code="NOT_FOUND") == missing + 1
    assert sample("grpc_server_handled_total", **watch, grpc_code="UNAUTHENTICATED") == \
        keyless + 1
    assert sample("grpc_server_started_total", grpc_type="unary",
                  grpc_service="tapis.v1.GameService", grpc_method="CreateGame",
                  transport="grpc") >= 1


def metrics_version() -> str:
    from tapis_service.process.startup import version

    return version()


def metrics_revision() -> str:
    from tapis_service.process.startup import revision

    return revision()


async def test_request_lines_carry_peer_request_id_trace_id_and_duration(
        make_server: ServerFactory) -> None:
    out = io.BytesIO()
    structlog.configure(processors=[logcontext.merge, structlog.processors.JSONRenderer(
                        serializer=lambda value, **_: json.dumps(value).encode())],
                        logger_factory=structlog.BytesLoggerFactory(file=out),
                        cache_logger_on_first_use=False)
    try:
        h = await make_server(clock=ManualClock())
        trace = "4bf92f3577b34da6a3ce929d0e0e4736"
        created = await h.stub.CreateGame(
            pb.CreateGameRequest(kind=pb.GAME_KIND_WAR, seat_configs=person_seats(2),
                                 request_id="create-for-the-log"),
            metadata=(("traceparent", f"00-{trace}-00f067aa0ba902b7-01"),))
        assert created.game.game_id
    finally:
        structlog.reset_defaults()
    lines = [json.loads(line) for line in out.getvalue().decode().splitlines()]
    line = next(line for line in lines if line.get("event") == "game_created")
    assert line["peer"].startswith("ipv") and line["request_id"] == "create-for-the-log"
    assert line["trace_id"] == trace and line["ms"] >= 0


def test_a_repeated_warning_is_written_once_per_period() -> None:
    now = [0.0]
    written: list[dict[str, object]] = []
    limiter = RepeatLimiter(10.0, lambda: now[0])

    def write(event: str, **fields: object) -> None:
        written.append({"event": event, **fields})

    for second in range(25):
        now[0] = float(second)
        limiter.log("db", write, "store_probe_failed", error="down")
    assert [w.get("repeated") for w in written] == [None, 9, 9]


async def test_a_store_outage_logs_one_line_per_kind_per_period(
        make_server: ServerFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    now = [0.0]
    monkeypatch.setattr(logrepeat, "WARNINGS", RepeatLimiter(10.0, lambda: now[0]))
    failing = threading.Event()

    async def failpoint(where: str) -> None:
        if failing.is_set():
            raise sqlite3.OperationalError("database or disk is full")

    store = SqliteStore(tmp_path, synchronous="OFF", failpoint=failpoint)
    h = await make_server(clock=ManualClock(), store=store, store_retry_ms=5)
    games = [(await h.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seat_configs=person_seats(2)))).game.game_id for _ in range(6)]
    failing.set()
    with structlog.testing.capture_logs() as lines:
        for number, game_id in enumerate(games):
            if number == 3:
                now[0] = 10.0  # the next period: one line again, counting those left out
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await h.stub.JoinGame(pb.JoinGameRequest(game_id=game_id, seat=0))
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        written = list(lines)
    failing.clear()
    discarded = [line for line in written if line["event"] == "game_discarded"]
    assert [(line["game"], line.get("repeated")) for line in discarded] == [
        (games[0], None), (games[3], 2)]
    failed = [line for line in written if line["event"] == "store_write_failed"]
    assert len(failed) == 2 and failed[0].get("repeated") is None
    assert failed[1]["repeated"] >= 2  # the joins (and the healer's probes) left out
    assert all(line["log_level"] == "error" for line in discarded + failed)


def exported_names() -> set[str]:
    """Every series name the server's registry can export."""
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"),
                "info": ("_info",), "gauge": ("",), "summary": ("_sum", "_count")}
    return {family.name + suffix for family in REGISTRY.collect()
            for suffix in suffixes.get(family.type, ("",))}


def test_the_alert_rules_and_the_dashboard_use_metrics_the_server_exports() -> None:
    import re

    import yaml

    import tapis_service.cluster.metrics  # noqa: F401  (a cluster node's series, registered)

    deploy = Path(__file__).resolve().parents[2] / "deploy" / "observability"
    rules = yaml.safe_load((deploy / "alerts.yaml").read_text())["groups"][0]["rules"]
    dashboard = json.loads((deploy / "grafana-dashboard.json").read_text())
    expressions = [rule["expr"] for rule in rules] + [
        target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    assert all(rule["alert"].startswith("Tapis") and rule["annotations"]["summary"]
               for rule in rules)
    used = {name for expr in expressions
            for name in re.findall(r"\b((?:tapis|grpc_server)_[a-z_]+)", expr)}
    assert {"grpc_server_handled_total", "grpc_server_handling_seconds_bucket",
            "tapis_store_commit_seconds_bucket", "tapis_ready", "tapis_cluster_members",
            "tapis_cluster_lease_age_seconds"} <= used
    assert used <= exported_names(), used - exported_names()


class _HeadersRead:
    """What a call's grpc context gives a log line (counting the reads)."""

    def __init__(self) -> None:
        self.reads = 0

    def peer(self) -> str:
        self.reads += 1
        return "ipv4:127.0.0.1:4242"

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        self.reads += 1
        return (("traceparent", "00-" + "ab" * 16 + "-00f067aa0ba902b7-01"),)


def test_a_call_is_read_only_when_a_line_is_written_and_never_once_it_ended() -> None:
    context = _HeadersRead()
    call = logcontext.CallInfo(context, pb.SubmitActionRequest(request_id="r-1"), 0.0)
    assert context.reads == 0  # a call that writes no line reads no header
    fields = call.fields()
    assert (fields["peer"], fields["request_id"], fields["trace_id"]) == \
        ("ipv4:127.0.0.1:4242", "r-1", "ab" * 16)
    call.end()
    assert call.fields() == {} and call.context is None  # a late task's line is not the call's


def test_a_method_s_context_goes_into_its_call_s_own_or_into_one_of_its_own(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logcontext, "_PROCESS", {})  # no process-wide fields (a node's id) set
    # by an earlier test of the session

    def line() -> dict[str, object]:
        return dict(logcontext.merge(None, "info", {"event": "e"}))

    async def guarded_call() -> None:  # the call guard bound a context for this call alone
        call = logcontext.CallInfo(_HeadersRead(), pb.SubmitActionRequest(request_id="r-2"), 0.0)
        bound = logcontext.bind(call=call)
        entered = logcontext.enter(rpc="SubmitAction", game="g-1")
        logcontext.add(seat=1)
        assert entered is None  # no second context, no token to undo
        plain = {**call.fields(), "rpc": "SubmitAction", "game": "g-1", "seat": 1}
        assert {k: v for k, v in line().items() if k != "ms"} == \
            {k: v for k, v in {**plain, "event": "e"}.items() if k != "ms"}
        logcontext.leave(entered)
        logcontext.reset(bound)
        assert line() == {"event": "e"}

    async def unguarded_call() -> None:  # a relayed call, a WebSocket frame: bound and undone
        outer = logcontext.bind(conn="c")
        entered = logcontext.enter(rpc="GetGame", game="g-2")
        logcontext.add(seat=0)
        assert line() == {"conn": "c", "rpc": "GetGame", "game": "g-2", "seat": 0, "event": "e"}
        logcontext.leave(entered)
        assert line() == {"conn": "c", "event": "e"}  # the outer context is untouched
        logcontext.reset(outer)

    asyncio.run(guarded_call())
    asyncio.run(unguarded_call())


ROUTED = '''
import asyncio, logging, sys, threading, warnings
import structlog
from tapis.v1 import game_service_pb2 as pb
from tapis_service.door import logcontext
from tapis_service.process.main import configure_logging, route_other_loggers

class Context:
    def peer(self): return "ipv4:127.0.0.1:4242"
    def invocation_metadata(self): return ()

configure_logging("info", "node-7")
route_other_loggers(logging.INFO)
structlog.get_logger("tapis.test").info("ours")
try:
    raise ConnectionRefusedError("connection refused")
except OSError:
    logging.getLogger("asyncpg.pool").warning("Failed to restore the pool connection floor",
                                               exc_info=True)
token = logcontext.bind(call=logcontext.CallInfo(
    Context(), pb.SubmitActionRequest(request_id="r-42"), 0.0))
logging.getLogger("grpc._cython.cygrpc").error("during a call")
logcontext.reset(token)
logging.getLogger("picows").debug("below the level")
warnings.warn("a deprecated thing", DeprecationWarning, stacklevel=1)
thread = threading.Thread(target=lambda: 1 / 0, name="worker")
thread.start(); thread.join()
async def main():
    asyncio.get_running_loop().call_exception_handler(
        {"message": "Task exception was never retrieved", "exception": RuntimeError("lost")})
asyncio.run(main())
raise SystemExit(sys.excepthook(KeyError, KeyError("uncaught"), None))
'''


def test_every_logger_of_the_process_writes_json_lines_with_the_node_id() -> None:
    """asyncpg's, grpc's, asyncio's lines, warnings and uncaught exceptions: one JSON object
    each, with the node id; a traceback inside its line; the call's request id on a line
    written during a call."""
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-W", "always", "-c", ROUTED],
                            capture_output=True, timeout=60, check=True)
    lines = [json.loads(line) for line in result.stderr.decode().splitlines()]
    assert all(line["node"] == "node-7" and line["timestamp"] and line["level"]
               for line in lines), lines
    by_event = {line["event"]: line for line in lines}
    floor = by_event["Failed to restore the pool connection floor"]
    assert floor["logger"] == "asyncpg.pool" and floor["level"] == "warning"
    assert "ConnectionRefusedError: connection refused" in floor["exception"]
    assert by_event["during a call"]["request_id"] == "r-42"
    assert "below the level" not in by_event
    warned = next(line for line in lines if line.get("logger") == "py.warnings")
    assert "DeprecationWarning: a deprecated thing" in warned["event"]
    thread = by_event["uncaught_exception_in_thread worker"]
    assert "ZeroDivisionError" in thread["exception"]
    assert any(line.get("logger") == "asyncio" and "lost" in line.get("exception", "")
               for line in lines), lines
    assert "KeyError: 'uncaught'" in by_event["uncaught_exception"]["exception"]
    assert by_event["ours"]["node"] == "node-7"


def test_a_store_s_failures_are_exported_at_0_from_the_start(tmp_path: Path) -> None:
    """Before any failure (an alert on increase() sees the first one), in a fresh process."""
    import subprocess
    import sys

    probe = ("import asyncio, sys\n"
             "from pathlib import Path\n"
             "from prometheus_client import generate_latest\n"
             "from tapis_service.process.server import open_store\n"
             "from tapis_service.settings import Settings\n"
             "settings = Settings(store='sqlite', data_dir=Path(sys.argv[1]))\n"
             "asyncio.run(open_store(settings)).close()\n"
             "sys.stdout.write(generate_latest().decode())\n")
    result = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], capture_output=True,
                            timeout=60, check=True)
    lines = result.stdout.decode().splitlines()
    assert 'tapis_store_write_failures_total{store="sqlite"} 0.0' in lines
    assert 'tapis_store_commit_seconds_count{store="sqlite"} 0.0' in lines
    assert 'tapis_refusals_total{code="RESOURCE_EXHAUSTED",reason="OVERLOADED"} 0.0' in lines


def test_a_meters_end_observes_its_seconds_as_the_histogram_does() -> None:
    """``door.Meter.ended`` observes a call's seconds itself (compiled, every call): the same
    bucket counts and sum as ``RPC_SECONDS.observe_child``, on and between every bound."""
    from tapis_service.door.door import Meter, Transport

    meter = Meter("/tapis.v1.GameService/TestMeterSeconds", Transport.WEBSOCKET)
    plain = list(meter.timing)
    values = [0.0, 1e-9, 2.5, 1e9, *metrics.RPC_SECONDS.bounds,
              *(random.Random(7).uniform(0, 12) for _ in range(200))]
    for seconds in values:
        meter.ended("OK", seconds)
        metrics.RPC_SECONDS.observe_child(plain, seconds)
        assert meter.timing == plain
