"""--trusted-proxies: the client's address is the right-most x-forwarded-for entry that is not
a trusted proxy, when (and only when) the connection comes from a trusted proxy; it feeds the
per-address limits and the logs, over gRPC and WebSocket alike."""

from __future__ import annotations

import re

import grpc
import pytest

from tapis.v1 import game_service_pb2 as pb
from tapis_service.door import logcontext
from tapis_service.door.proxies import TrustedProxies
from tapis_service.process.configuration import BadSetting, parse
from tests.support.fresh import in_fresh_interpreter
from tests.support.server import ServerFactory
from tests.support.websocket import Client
from tests.trust.door import refusal

PROXY = "ipv4:10.0.0.5:40000"
PROXIES = TrustedProxies.parse("10.0.0.0/8, 192.168.1.1, fd00::/8")


@pytest.mark.parametrize(("peer", "forwarded", "client"), [
    # not a trusted proxy: the header is ignored, whatever it says
    ("ipv4:203.0.113.9:5000", ["198.51.100.1"], "ipv4:203.0.113.9:5000"),
    ("ipv6:[2001:db8::1]:5000", ["198.51.100.1"], "ipv6:[2001:db8::1]:5000"),
    # a trusted proxy: the right-most entry that is not a proxy
    (PROXY, ["198.51.100.1"], "ipv4:198.51.100.1:40000"),
    (PROXY, ["1.1.1.1, 198.51.100.1, 10.0.0.7"], "ipv4:198.51.100.1:40000"),
    (PROXY, ["1.1.1.1", "198.51.100.1, 192.168.1.1"], "ipv4:198.51.100.1:40000"),
    (PROXY, ["[2001:db8::7]:443"], "ipv6:[2001:db8::7]:40000"),
    (PROXY, ["198.51.100.1:8080"], "ipv4:198.51.100.1:40000"),
    (PROXY, ["::ffff:198.51.100.1"], "ipv4:198.51.100.1:40000"),
    ("ipv6:[fd00::3]:40000", ["2001:db8::9"], "ipv6:[2001:db8::9]:40000"),
    # no header, or only proxies in it: the farthest hop known
    (PROXY, [], PROXY),
    (PROXY, ["10.0.0.9, 10.0.0.8"], "ipv4:10.0.0.9:40000"),
    # a forged entry that is not an address stops the walk at the last trusted hop
    (PROXY, ["198.51.100.1, unknown"], PROXY),
    (PROXY, ["garbage, 10.0.0.8"], "ipv4:10.0.0.8:40000"),
    # not an IP peer (a unix socket): as it is
    ("unix:/tmp/sock", ["198.51.100.1"], "unix:/tmp/sock"),
])
def test_the_client_is_the_right_most_untrusted_entry_behind_a_trusted_proxy(
        peer: str, forwarded: list[str], client: str) -> None:
    assert PROXIES.client_peer(peer, forwarded) == client


def test_without_trusted_proxies_the_header_is_never_read() -> None:
    assert TrustedProxies().client_peer(PROXY, ["198.51.100.1"]) == PROXY


def test_a_bad_network_is_refused_at_start() -> None:
    assert parse(["--trusted-proxies", "10.0.0.0/8,::1"]).trusted_proxies == "10.0.0.0/8,::1"
    with pytest.raises(BadSetting, match=re.escape("'10.0.0.300/8' is not an address")):
        parse(["--trusted-proxies", "10.0.0.0/8,10.0.0.300/8"])


def forwarded(address: str) -> tuple[tuple[str, str], ...]:
    return (("x-forwarded-for", f"1.2.3.4, {address}"),)


async def creates_allowed(stub: object, address: str, tries: int) -> int:
    created = 0
    for _ in range(tries):
        try:
            await stub.CreateGame(  # type: ignore[attr-defined]
                pb.CreateGameRequest(kind=pb.GAME_KIND_WAR), metadata=forwarded(address))
            created += 1
        except grpc.aio.AioRpcError as error:
            assert refusal(error) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "RATE_LIMITED")
    return created


@pytest.mark.parametrize("trusted", [True, False])
async def test_per_address_limits_count_the_forwarded_client_only_behind_a_trusted_proxy(
        make_server: ServerFactory, trusted: bool) -> None:
    harness = await make_server(create_rate_per_s=0.001, create_burst=2,
                                trusted_proxies="127.0.0.0/8" if trusted else "")
    assert await creates_allowed(harness.stub, "198.51.100.1", 3) == 2
    assert await creates_allowed(harness.stub, "198.51.100.2", 2) == (2 if trusted else 0)


class _Call:
    """What a call's log lines read of its grpc context: a proxy's connection, forwarding."""

    def peer(self) -> str:
        return PROXY

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return (("x-forwarded-for", "198.51.100.1"),)


@pytest.mark.parametrize(("proxies", "peer"), [
    (PROXIES, "ipv4:198.51.100.1:40000"), (TrustedProxies(), PROXY), (None, PROXY)])
def test_a_call_s_log_lines_name_the_forwarded_client_behind_a_trusted_proxy(
        proxies: TrustedProxies | None, peer: str) -> None:
    call = logcontext.CallInfo(_Call(), None, 0.0, proxies)
    assert call.fields()["peer"] == peer


@pytest.mark.parametrize("trusted", [True, False])
async def test_websocket_sockets_count_the_forwarded_client_only_behind_a_trusted_proxy(
        make_server: ServerFactory, trusted: bool) -> None:
    harness = await make_server(ws_port=0, ws_max_sockets_per_peer=1,
                                trusted_proxies="127.0.0.1" if trusted else "")
    url = f"ws://127.0.0.1:{harness.running.ws_port}/ws"
    first = await Client.open(url, headers=[("X-Forwarded-For", "198.51.100.1")])
    second = await Client.open(url, headers=[("X-Forwarded-For", "198.51.100.2")])
    await first.call(get_game=pb.GetGameRequest(game_id="0" * 16))
    if trusted:
        await second.call(get_game=pb.GetGameRequest(game_id="0" * 16))
    else:
        assert await second.closed() == 1013  # one socket per address: the same address
    endpoint = harness.running.ws
    assert endpoint is not None
    assert set(endpoint.sockets) == ({"ipv4:198.51.100.1", "ipv4:198.51.100.2"} if trusted
                                     else {"ipv4:127.0.0.1"})
    first.close()
    second.close()


def methods_calling_caller_of_alone() -> list[str]:
    """The servicer's methods that build a Caller with ``caller_of`` directly."""
    import ast
    import inspect

    from tapis_service.grpc import servicer

    tree = ast.parse(inspect.getsource(servicer.GameServicer))
    return [node.name for node in ast.walk(tree) if isinstance(node, ast.AsyncFunctionDef)
            and any(isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                    and call.func.id == "caller_of" for call in ast.walk(node))]


def test_every_grpc_method_builds_its_caller_behind_the_trusted_proxies() -> None:
    """The servicer's methods take their Caller from ``GameServicer.caller`` (which knows the
    trusted proxies), never from ``caller_of`` alone (ReplaceSeat once did). Parsed in a fresh
    interpreter (tests/support/fresh.py)."""
    assert in_fresh_interpreter(methods_calling_caller_of_alone) == []
