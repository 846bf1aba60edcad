"""Client options, where the server is, an unreachable server, retries, and a target of
several addresses where one node is down."""

from __future__ import annotations

import asyncio
import json
import os
import re
import stat
import sys
import uuid
from pathlib import Path
from typing import Any

import grpc
import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import war_pb2
from tapis_clients import bot, cli, connection, seats_file
from tapis_clients.connection import (
    Connection,
    Credentials,
    Unreachable,
    first_address,
    resolve_target,
)
from tests.support.calls import refusal_error as refusal
from tests.support.certificates import issue
from tests.support.server import ServerFactory


@pytest.mark.parametrize("argv", [
    ["--target", "h:1", "list"], ["list", "--target", "h:1"]])
def test_tapis_takes_its_global_options_before_or_after_the_subcommand(argv: list[str]) -> None:
    assert cli.parse_args(argv).target == "h:1"


@pytest.mark.parametrize("argv", [
    ["--target", "h:2", "--reaction-ms", "150", "--mistake-rate", "0.5",
     "selfplay", "--kind", "war"],
    ["selfplay", "--kind", "war", "--target", "h:2", "--reaction-ms", "150",
     "--mistake-rate", "0.5"]])
def test_tapis_bot_takes_its_global_options_before_or_after(argv: list[str]) -> None:
    args = bot.parse_args(argv)
    assert (args.target, args.reaction_ms, args.mistake_rate) == ("h:2", 150, 0.5)


def test_defaults_survive_a_subcommand_without_options() -> None:
    args = bot.parse_args(["--reaction-ms", "20", "play", "--game", "g"])
    assert args.reaction_ms == 20 and args.target is None and args.strategy == ""


def test_the_target_comes_from_the_flag_then_the_environment() -> None:
    assert resolve_target("a:1", {"TAPIS_TARGET": "b:2"}) == "a:1"
    assert resolve_target(None, {"TAPIS_TARGET": "b:2", "TAPIS_PORT": "3"}) == "b:2"
    assert resolve_target(None, {"TAPIS_PORT": "6000"}) == "127.0.0.1:6000"
    assert resolve_target(None, {}) == "127.0.0.1:50051"
    assert resolve_target("127.0.0.1:1,127.0.0.1:2", {}) == "ipv4:127.0.0.1:1,127.0.0.1:2"
    assert resolve_target("dns:///tapis:50051", {}) == "dns:///tapis:50051"


def closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("port", ["closed", "70000"])
@pytest.mark.parametrize("argv", [("tapis_clients.cli", "list"),
                                  ("tapis_clients.bot", "selfplay")])
async def test_an_unreachable_server_is_one_line_and_a_failure(argv: tuple[str, str],
                                                                port: str) -> None:
    """Each client in a process of its own (as people run them): one line, exit status 2; a
    port no TCP address can have (beyond 65535) too."""
    address = f"127.0.0.1:{closed_port() if port == 'closed' else port}"
    env = {k: v for k, v in os.environ.items() if k != "TAPIS_TARGET"}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", argv[0], argv[1], "--target", address,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=env)
    _out, raw = await asyncio.wait_for(process.communicate(), 60)  # patience, not a condition
    assert process.returncode == 2
    err = raw.decode().strip().splitlines()
    assert len(err) == 1, err
    assert address in err[0] and "--target" in err[0] and "TAPIS_TARGET" in err[0]


def test_the_first_address_of_a_target() -> None:
    assert first_address("localhost:50051") == ("localhost", 50051)
    assert first_address("ipv4:127.0.0.1:1,127.0.0.1:2") == ("127.0.0.1", 1)
    assert first_address("dns:///tapis:50051") == ("tapis", 50051)
    assert first_address("dns://8.8.8.8/tapis:7") == ("tapis", 7)
    assert first_address("ipv6:[::1]:7") == ("::1", 7)
    assert first_address("[::1]:8") == ("::1", 8)
    assert first_address("unix:/tmp/tapis.sock") is None
    assert first_address("tapis") is None
    assert first_address("127.0.0.1:65535") == ("127.0.0.1", 65535)
    assert first_address("127.0.0.1:70000") is None  # no TCP port


async def test_a_plaintext_client_at_a_tls_port_is_told_of_the_tls_options(
        make_server: ServerFactory, tmp_path: Path) -> None:
    issued = issue(tmp_path, "server")
    h = await make_server(tls_cert=issued.cert, tls_key=issued.key)
    target = f"localhost:{h.running.port}"
    plain = Connection(target, credentials=Credentials())
    with pytest.raises(Unreachable) as refused:
        await plain.reach(0.3)  # a plaintext channel is never ready there, however long
    await plain.close()
    said = str(refused.value)
    assert refused.value.accepts and target in said, said
    assert "--tls-ca FILE" in said and "--tls (" in said and "make serve" not in said, said
    secure = Connection(target, credentials=Credentials(tls=True, ca=issued.ca_bytes()))
    await secure.reach()  # the options named do reach it
    await secure.close()
    closed = Connection(f"127.0.0.1:{closed_port()}", credentials=Credentials())
    with pytest.raises(Unreachable) as nobody:
        await closed.reach(0.3)
    await closed.close()
    assert not nobody.value.accepts and "--tls" not in str(nobody.value)
    assert "make serve" in str(nobody.value)


async def test_a_tls_client_at_a_plaintext_port_is_told_to_leave_tls_out(
        make_server: ServerFactory) -> None:
    h = await make_server()  # as `make serve` runs: no TLS
    target = f"127.0.0.1:{h.running.port}"
    secure = Connection(target, credentials=Credentials(tls=True))
    with pytest.raises(Unreachable) as refused:
        await secure.reach(0.3)  # a TLS channel is never ready there, however long
    await secure.close()
    said = str(refused.value)
    assert refused.value.accepts and target in said, said
    assert "over TLS" in said and "leave out --tls and --tls-ca" in said, said


@pytest.mark.parametrize(("code", "reason"), [
    (grpc.StatusCode.RESOURCE_EXHAUSTED, "RATE_LIMITED"),
    (grpc.StatusCode.RESOURCE_EXHAUSTED, "OVERLOADED"),
    (grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_MANY_STREAMS"),
    (grpc.StatusCode.UNAVAILABLE, "STORE_UNAVAILABLE"),
    (grpc.StatusCode.UNAVAILABLE, ""),
    (grpc.StatusCode.CANCELLED, "")])  # grpc's core dropped it (a stop): the server never saw it
async def test_slow_down_and_unavailable_are_retried_with_the_same_request(
        code: grpc.StatusCode, reason: str) -> None:
    conn = Connection("127.0.0.1:1")
    seen: list[Any] = []

    async def method(request: Any, **_: Any) -> str:
        seen.append(request)
        if len(seen) < 3:
            raise refusal(code, reason, retry_delay_ms="1")
        return "ok"

    request = pb.SubmitActionRequest(request_id=uuid.uuid4().hex)
    assert await conn.call(method, request) == "ok"
    assert seen == [request] * 3
    await conn.close()


async def test_other_refusals_are_not_retried() -> None:
    conn = Connection("127.0.0.1:1")
    calls = 0

    async def method(request: Any, **_: Any) -> str:
        nonlocal calls
        calls += 1
        raise refusal(grpc.StatusCode.RESOURCE_EXHAUSTED, "MAX_GAMES")

    with pytest.raises(grpc.aio.AioRpcError):
        await conn.call(method, pb.CreateGameRequest())
    assert calls == 1
    await conn.close()


@pytest.mark.parametrize(("code", "reason"), [
    (grpc.StatusCode.INTERNAL, "INTERNAL"),  # a fault of the server's own
    (grpc.StatusCode.DEADLINE_EXCEEDED, "")])  # no answer in time
async def test_a_write_in_doubt_is_resent_as_it_was_a_few_times(
        code: grpc.StatusCode, reason: str) -> None:
    """Applied or not, no one knows: the same request again (the server never applies its
    request_id twice), IN_DOUBT_ATTEMPTS times at most; a read is not resent."""
    conn = Connection("127.0.0.1:1")
    seen: list[Any] = []

    async def method(request: Any, **_: Any) -> str:
        seen.append(request)
        raise refusal(code, reason, retry_delay_ms="0")

    write = pb.SubmitActionRequest(request_id=uuid.uuid4().hex)
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await conn.call(method, write)
    assert raised.value.code() == code and connection.in_doubt(raised.value)
    assert seen == [write] * connection.IN_DOUBT_ATTEMPTS
    seen.clear()
    with pytest.raises(grpc.aio.AioRpcError):
        await conn.call(method, pb.GetGameRequest(game_id="g"))
    assert len(seen) == 1
    await conn.close()


def test_the_server_may_name_the_pause() -> None:
    assert connection.retry_delay_s(refusal(
        grpc.StatusCode.RESOURCE_EXHAUSTED, "RATE_LIMITED", retry_delay_ms="250")) == 0.25
    assert connection.retry_delay_s(refusal(
        grpc.StatusCode.RESOURCE_EXHAUSTED, "RATE_LIMITED")) is None


async def test_round_robin_skips_a_stopped_node(make_server: ServerFactory) -> None:
    first = await make_server()
    second = await make_server()
    conn = Connection(f"127.0.0.1:{first.running.port},127.0.0.1:{second.running.port}")
    assert conn.target.startswith("ipv4:")
    await conn.reach()

    async def create() -> None:
        await conn.call(conn.stub.CreateGame, pb.CreateGameRequest(
            kind=pb.GAME_KIND_WAR, request_id=uuid.uuid4().hex))

    for _ in range(6):
        await create()
    counts = [len((await h.stub.ListGames(pb.ListGamesRequest())).games)
              for h in (first, second)]
    assert counts[0] > 0 and counts[1] > 0  # both nodes served
    await second.running.stop(0)
    for _ in range(6):
        await create()  # every call lands: the dead node is skipped
    assert len((await first.stub.ListGames(pb.ListGamesRequest())).games) == counts[0] + 6
    await conn.close()


def client_lines(out: str) -> list[str]:
    """What the client printed, without the in-process server's log lines."""
    return [line for line in out.splitlines() if not LOG_LINE.match(line)]


LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \[")


async def test_create_prints_the_id_once_and_list_shows_every_table(
        make_server: ServerFactory, capsys: pytest.CaptureFixture[str]) -> None:
    h = await make_server()
    where = ["--target", f"127.0.0.1:{h.running.port}"]
    ids = []
    for _ in range(3):
        assert await cli.run(cli.parse_args(["create", "war", *where])) == 0
        mine = client_lines(capsys.readouterr().out)
        assert len(mine) == 1 and len(mine[0].split()) == 1  # the id, once
        ids.append(mine[0])
    await h.stub.JoinGame(pb.JoinGameRequest(game_id=ids[0], display_name="zoé"))
    assert await cli.run(cli.parse_args(["list", *where, "--page-size", "1", "--json"])) == 0
    listed = json.loads("\n".join(client_lines(capsys.readouterr().out)))
    assert sorted(g["game_id"] for g in listed) == sorted(ids)  # every page
    assert {g["game_id"]: g["display_names"] for g in listed}[ids[0]] == ["zoé", ""]
    assert all(g["open_seats"] for g in listed)
    assert await cli.run(cli.parse_args(["list", *where])) == 0
    lines = client_lines(capsys.readouterr().out)
    assert lines[0].split("\t")[0] == "table"
    assert sorted(line.split("\t")[0] for line in lines[1:]) == sorted(ids)  # ids whole
    # In words: the kind as the command takes it, the status as people say it.
    assert {tuple(line.split("\t")[1:3]) for line in lines[1:]} == {("war",
                                                                     "waiting for players")}
    assert any("zoé" in line for line in lines)


def test_seats_file_keeps_tokens_for_its_owner_only(tmp_path: Path) -> None:
    assert seats_file.path({"TAPIS_STATE_DIR": "/x"}) == Path("/x/seats.json")
    assert seats_file.path({"XDG_STATE_HOME": "/s"}) == Path("/s/tapis/seats.json")
    file = tmp_path / "state" / "seats.json"
    held = seats_file.HeldSeat("g1", 1, "secret", "127.0.0.1:1", "ana")
    seats_file.remember(held, file)
    seats_file.remember(seats_file.HeldSeat("g2", 0, "other", "t", "bo"), file)
    assert seats_file.find("g1", file) == held
    assert stat.S_IMODE(os.stat(file).st_mode) == 0o600
    seats_file.forget("g1", file)
    assert seats_file.find("g1", file) is None
    assert seats_file.find("g2", file) is not None
    file.write_text("not json")
    assert seats_file.find("g2", file) is None


async def test_a_stream_resumes_by_sequence_when_cut_as_too_slow() -> None:
    conn = Connection("127.0.0.1:1")
    asked: list[int] = []

    class Stream:
        def __init__(self, after: int) -> None:
            self.after = after

        def __aiter__(self) -> Any:
            return self.gen()

        async def gen(self) -> Any:
            for sequence in range(self.after + 1, self.after + 3):
                yield pb.StreamEventsResponse(events=[pb.Event(sequence=sequence)])
            if self.after == 0:
                raise refusal(grpc.StatusCode.RESOURCE_EXHAUSTED, "STREAM_TOO_SLOW",
                              retry_delay_ms="1")

    def stream_events(request: pb.StreamEventsRequest, **_: Any) -> Stream:
        asked.append(request.after_sequence)
        return Stream(request.after_sequence)

    conn.stub.StreamEvents = stream_events  # type: ignore[method-assign]
    got = [event.sequence async for event in conn.events("g")]
    assert got == [1, 2, 3, 4]
    assert asked == [0, 2]
    await conn.close()
    await asyncio.sleep(0)


async def test_list_shows_a_table_between_two_games_of_its_series(
        make_server: ServerFactory, capsys: pytest.CaptureFixture[str]) -> None:
    h = await make_server()
    created = await h.stub.CreateGame(pb.CreateGameRequest(
        kind=pb.GAME_KIND_WAR, seats=2, seed=4, request_id="between",
        seat_configs=[pb.SeatConfig(type=pb.SEAT_TYPE_PERSON)] * 2,
        war=war_pb2.WarOptions(target_points=1)))
    game_id = created.game.game_id
    tokens = [(await h.stub.JoinGame(pb.JoinGameRequest(game_id=game_id, display_name=name))
               ).seat_token for name in ("ana", "bo")]
    reveal = pb.Action(war=war_pb2.WarAction(reveal=war_pb2.WarReveal()))
    while (view := (await h.stub.GetGame(pb.GetGameRequest(game_id=game_id))).game).status \
            == pb.GAME_STATUS_IN_PROGRESS:
        await h.stub.SubmitAction(pb.SubmitActionRequest(game_id=game_id, action=reveal),
                                  metadata=(("authorization",
                                             f"Bearer {tokens[view.awaiting_seats[0]]}"),))
    assert await cli.run(cli.parse_args(["list", "--target", f"127.0.0.1:{h.running.port}"])) \
        == 0
    lines = client_lines(capsys.readouterr().out)
    assert [line.split("\t")[:3] for line in lines[1:]] == [[game_id, "war", "between games"]]
