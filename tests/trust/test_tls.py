"""TLS on a gRPC port: a client trusting the CA is served, a plaintext one is not; mutual TLS
refuses a client without a certificate; certificates reload for the next connection, and bad
files are refused with a message naming them (the certificates in force are kept)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from tapis_service.door.tls import (
    ReloadingTls,
    TlsFiles,
    TlsFilesError,
    channel_credentials,
    cluster_tls,
    load,
)
from tests.support.certificates import Issued, issue

# a channel of its own for each test connection: grpc would otherwise share one connection
# among channels with the same target and arguments
OWN_CONNECTION = (("grpc.use_local_subchannel_pool", 1),)


@pytest.fixture
def first(tmp_path: Path) -> Issued:
    return issue(tmp_path, "first")


class Served:
    def __init__(self, server: grpc.aio.Server, port: int, tls: ReloadingTls) -> None:
        self.server, self.port, self.tls = server, port, tls
        self.target = f"localhost:{port}"


async def serve(tls: ReloadingTls) -> Served:
    server = grpc.aio.server()
    servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_secure_port("127.0.0.1:0", tls.credentials())
    await server.start()
    await servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    return Served(server, port, tls)


@pytest.fixture
async def started() -> AsyncIterator[list[Served]]:
    servers: list[Served] = []
    yield servers
    for served in servers:
        await served.server.stop(0)


async def check(channel: grpc.aio.Channel) -> int:
    answer = await health_pb2_grpc.HealthStub(channel).Check(
        health_pb2.HealthCheckRequest(), timeout=10)
    return int(answer.status)


def secure(served: Served, ca: bytes, cert: bytes | None = None,
           key: bytes | None = None) -> grpc.aio.Channel:
    return grpc.aio.secure_channel(served.target, channel_credentials(ca, cert, key),
                                   options=OWN_CONNECTION)


async def refused(channel: grpc.aio.Channel) -> grpc.StatusCode:
    async with channel:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await check(channel)
    return raised.value.code()


async def test_a_client_trusting_the_ca_is_served_and_a_plaintext_one_is_not(
        first: Issued, started: list[Served]) -> None:
    served = await serve(ReloadingTls(first.files()))
    started.append(served)
    async with secure(served, first.ca_bytes()) as channel:
        assert await check(channel) == health_pb2.HealthCheckResponse.SERVING
    plain = grpc.aio.insecure_channel(served.target, options=OWN_CONNECTION)
    assert await refused(plain) == grpc.StatusCode.UNAVAILABLE
    stranger = issue(first.ca.parent, "stranger")
    assert await refused(secure(served, stranger.ca_bytes())) == grpc.StatusCode.UNAVAILABLE


async def test_mutual_tls_refuses_a_client_without_a_certificate_of_the_client_ca(
        tmp_path: Path, first: Issued, started: list[Served]) -> None:
    clients = issue(tmp_path, "clients", "backend-a")
    outsider = issue(tmp_path, "outsider", "backend-b")
    served = await serve(ReloadingTls(first.files(client_ca=clients.ca)))
    started.append(served)
    assert served.tls.mutual
    async with secure(served, first.ca_bytes(), clients.cert_bytes(),
                      clients.key_bytes()) as channel:
        assert await check(channel) == health_pb2.HealthCheckResponse.SERVING
    assert await refused(secure(served, first.ca_bytes())) == grpc.StatusCode.UNAVAILABLE
    assert await refused(secure(served, first.ca_bytes(), outsider.cert_bytes(),
                                outsider.key_bytes())) == grpc.StatusCode.UNAVAILABLE


async def test_a_reload_serves_the_new_certificate_to_the_next_connection(
        tmp_path: Path, first: Issued, started: list[Served]) -> None:
    files = TlsFiles(tmp_path / "live.pem", tmp_path / "live-key.pem")
    files.cert.write_bytes(first.cert_bytes())
    files.key.write_bytes(first.key_bytes())
    served = await serve(ReloadingTls(files))
    started.append(served)
    before = secure(served, first.ca_bytes())
    assert await check(before) == health_pb2.HealthCheckResponse.SERVING
    second = issue(tmp_path, "second")
    files.cert.write_bytes(second.cert_bytes())
    files.key.write_bytes(second.key_bytes())
    assert served.tls.reload()
    async with secure(served, second.ca_bytes()) as channel:
        assert await check(channel) == health_pb2.HealthCheckResponse.SERVING
    assert await refused(secure(served, first.ca_bytes())) == grpc.StatusCode.UNAVAILABLE
    # the connection open before the reload keeps its certificate
    assert await check(before) == health_pb2.HealthCheckResponse.SERVING
    await before.close()


async def test_a_bad_reload_keeps_the_certificates_in_force(
        tmp_path: Path, first: Issued, started: list[Served]) -> None:
    files = TlsFiles(tmp_path / "live.pem", tmp_path / "live-key.pem")
    files.cert.write_bytes(first.cert_bytes())
    files.key.write_bytes(first.key_bytes())
    served = await serve(ReloadingTls(files))
    started.append(served)
    files.key.write_bytes(issue(tmp_path, "other").key_bytes())  # not the certificate's key
    assert not served.tls.reload()
    assert served.tls.pem.key == first.key_bytes()
    async with secure(served, first.ca_bytes()) as channel:
        assert await check(channel) == health_pb2.HealthCheckResponse.SERVING


def test_bad_files_are_refused_naming_the_file(tmp_path: Path, first: Issued) -> None:
    missing = tmp_path / "missing.pem"
    with pytest.raises(TlsFilesError, match=r"missing\.pem"):
        load(TlsFiles(missing, first.key))
    text = tmp_path / "text.pem"
    text.write_text("not a certificate\n")
    with pytest.raises(TlsFilesError, match=r"text\.pem is not PEM"):
        load(TlsFiles(first.cert, text))
    other = issue(tmp_path, "other")
    with pytest.raises(TlsFilesError, match="does not fit the certificate"):
        load(TlsFiles(first.cert, other.key))
    with pytest.raises(TlsFilesError, match="client CA"):
        load(TlsFiles(first.cert, first.key, client_ca=first.key))


async def test_a_node_reaches_a_mutual_tls_node_with_its_cluster_credentials(
        tmp_path: Path, started: list[Served]) -> None:
    nodes = issue(tmp_path, "nodes", "tapis-cluster.internal")
    served = await serve(ReloadingTls(nodes.files(client_ca=nodes.ca)))
    started.append(served)
    cluster = cluster_tls(served.tls.pem, server_name="tapis-cluster.internal")
    async with grpc.aio.secure_channel(served.target, cluster.credentials(),
                                       options=[*OWN_CONNECTION,
                                                *cluster.channel_options()]) as channel:
        assert await check(channel) == health_pb2.HealthCheckResponse.SERVING
    # without the name override the address does not match the certificate's name
    plain_name = cluster_tls(served.tls.pem)
    assert await refused(grpc.aio.secure_channel(
        served.target, plain_name.credentials(), options=OWN_CONNECTION)) \
        == grpc.StatusCode.UNAVAILABLE
    # a stranger's certificate is refused by the node
    stranger = issue(tmp_path, "stranger", "tapis-cluster.internal")
    assert await refused(grpc.aio.secure_channel(
        served.target, channel_credentials(nodes.ca_bytes(), stranger.cert_bytes(),
                                           stranger.key_bytes()),
        options=[*OWN_CONNECTION, *cluster.channel_options()])) == grpc.StatusCode.UNAVAILABLE


def test_cluster_tls_needs_a_ca(tmp_path: Path, first: Issued) -> None:
    with pytest.raises(TlsFilesError, match="needs --cluster-tls-ca"):
        cluster_tls(load(first.files()))
    with pytest.raises(TlsFilesError, match="go together"):
        cluster_tls(load(first.files()), cert=first.cert, ca=first.ca)
    own = issue(tmp_path, "own")
    chosen = cluster_tls(load(first.files()), cert=own.cert, key=own.key, ca=first.ca)
    assert (chosen.ca, chosen.cert) == (first.ca_bytes(), own.cert_bytes())
