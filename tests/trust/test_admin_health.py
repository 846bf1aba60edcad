"""`tapis-admin health` against a TLS server: with --pid it follows the server process's own
port and TLS, trusting --tls-ca (or TAPIS_TLS_CA), else the server's certificate file when that
holds its root, else refusing in one line that asks for --tls-ca; with --target, TLS is on when
a CA (or --tls) is given. The certificate is always checked."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from tapis_service.door.tls import ReloadingTls
from tapis_service.process import admin
from tests.support.certificates import Issued, issue
from tests.support.process import free_port, wait_serving

PID = 4242


@dataclass
class Served:
    port: int
    issued: Issued


def _serve(tls: ReloadingTls | None) -> tuple[grpc.Server, int]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = health.HealthServicer()
    servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_secure_port("127.0.0.1:0", tls.credentials()) if tls is not None \
        else server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """A health service over TLS, with a certificate (the leaf alone) a test CA signed."""
    issued = issue(tmp_path / "certs", "server")
    server, port = _serve(ReloadingTls(issued.files()))
    yield Served(port, issued)
    server.stop(0)


@pytest.fixture
def plain() -> Iterator[int]:
    server, port = _serve(None)
    yield port
    server.stop(0)


def fake_process(proc: Path, cwd: Path, *flags: str, environ: str = "") -> Path:
    """A /proc entry for a tapis-server started in ``cwd`` with ``flags``."""
    entry = proc / str(PID)
    entry.mkdir(parents=True)
    argv = ["/venv/bin/python", "/venv/bin/tapis-server", *flags]
    (entry / "cmdline").write_bytes(b"".join(word.encode() + b"\0" for word in argv))
    (entry / "environ").write_bytes(environ.encode() + b"\0")
    (entry / "cwd").symlink_to(cwd)
    return proc


def probe(proc: Path, environ: dict[str, str] | None = None, *, tls_ca: Path | None = None,
          tls: bool = False, tls_name: str | None = None) -> str:
    return admin.health(None, "", 10.0, PID, tls_ca=tls_ca, tls=tls, tls_name=tls_name,
                        environ=environ or {}, proc=proc)


def tls_flags(port: int, cert: str = "server.pem") -> tuple[str, ...]:
    return ("--port", str(port), "--tls-cert", cert, "--tls-key", "server-key.pem")


def test_pid_follows_the_servers_tls_and_trusts_the_ca_given(served: Served,
                                                              tmp_path: Path) -> None:
    proc = fake_process(tmp_path / "proc", served.issued.cert.parent, *tls_flags(served.port))
    other = issue(tmp_path / "other", "other")
    with pytest.raises(admin.Refused) as refused:
        probe(proc)  # the server's chain is its leaf alone: no root to trust
    assert str(refused.value) == (
        "the server serves TLS with server.pem, signed by a CA it does not hold: give "
        "--tls-ca FILE (or TAPIS_TLS_CA), the CA that signed it")
    assert probe(proc, tls_ca=served.issued.ca) == "SERVING"
    assert probe(proc, {"TAPIS_TLS_CA": str(served.issued.ca)}) == "SERVING"
    # never dialled without checking: another CA, the system's roots, a name not in it
    assert probe(proc, tls_ca=other.ca) == "UNREACHABLE (UNAVAILABLE)"
    assert probe(proc, tls=True) == "UNREACHABLE (UNAVAILABLE)"
    assert probe(proc, tls_ca=served.issued.ca, tls_name="tapis.example") \
        == "UNREACHABLE (UNAVAILABLE)"


def test_pid_trusts_the_servers_chain_when_it_ends_with_its_root(served: Served,
                                                                 tmp_path: Path) -> None:
    certs = served.issued.cert.parent
    (certs / "chain.pem").write_bytes(served.issued.cert_bytes() + served.issued.ca_bytes())
    proc = fake_process(tmp_path / "proc", certs, *tls_flags(served.port, "chain.pem"))
    assert probe(proc) == "SERVING"


def test_pid_follows_a_plaintext_server_whatever_the_ca(plain: int, served: Served,
                                                        tmp_path: Path) -> None:
    proc = fake_process(tmp_path / "proc", tmp_path, "--port", str(plain))
    assert probe(proc, {"TAPIS_TLS_CA": str(served.issued.ca)}) == "SERVING"


def test_pid_refuses_a_server_on_a_free_port_in_one_line(tmp_path: Path) -> None:
    """--port 0: the port is only in the server's log; dialling port 0 would say UNREACHABLE
    of a server that may be serving."""
    proc = fake_process(tmp_path / "proc", tmp_path, "--port", "0")
    with pytest.raises(admin.Refused) as refused:
        probe(proc)
    assert str(refused.value) == ("the server listens on a free port (--port 0), named in its "
                                  "`serving` log line: give --target HOST:PORT")


def test_pid_probes_a_mutual_tls_server_on_its_health_port(plain: int, served: Served,
                                                           tmp_path: Path) -> None:
    mutual = (*tls_flags(served.port), "--tls-client-ca", str(served.issued.ca))
    proc = fake_process(tmp_path / "proc", served.issued.cert.parent, *mutual)
    with pytest.raises(admin.Refused, match=r"client certificates .* --health-port"):
        probe(proc, tls_ca=served.issued.ca)
    proc = fake_process(tmp_path / "proc2", served.issued.cert.parent, *mutual,
                        "--health-port", str(plain))
    assert probe(proc, tls_ca=served.issued.ca) == "SERVING"


def test_target_is_tls_when_a_ca_is_given(served: Served) -> None:
    target = f"localhost:{served.port}"
    ca = str(served.issued.ca)

    def at(environ: dict[str, str], *, tls_ca: Path | None = None, tls: bool = False) -> str:
        return admin.health(target, "", 10.0, tls_ca=tls_ca, tls=tls, environ=environ)

    assert at({}) == "UNREACHABLE (UNAVAILABLE)"  # in clear to a TLS port
    assert at({"TAPIS_TLS_CERT": "server.pem"}) == "UNREACHABLE (UNAVAILABLE)"  # not a CA
    assert at({}, tls_ca=served.issued.ca) == "SERVING"
    assert at({"TAPIS_TLS_CA": ca}) == "SERVING"
    assert at({}, tls=True) == "UNREACHABLE (UNAVAILABLE)"  # not a system root
    assert admin.health(f"127.0.0.1:{served.port}", "", 10.0, environ={"TAPIS_TLS_CA": ca}) \
        == "SERVING"  # the certificate names 127.0.0.1 too
    with pytest.raises(admin.Refused, match="cannot read the CA"):
        at({}, tls_ca=Path(ca + ".missing"))


@pytest.mark.slow  # a server process, and tapis-admin's
async def test_the_command_on_a_tls_server_process(tmp_path: Path) -> None:
    """A real server started with relative certificate paths in its own directory, probed from
    another: exit 2 and one line without a CA, SERVING with --tls-ca, by --pid and --target."""
    issued = issue(tmp_path / "certs", "server")
    port = free_port()
    env = {name: value for name, value in os.environ.items() if not name.startswith("TAPIS_")}
    server = subprocess.Popen(
        [sys.executable, "-m", "tapis_service.process.main", "--log-level", "warning",
         *tls_flags(port)], cwd=issued.cert.parent, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def command(*words: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tapis_service.process.admin", "health",
                               *words], env=env, cwd=tmp_path, capture_output=True, text=True,
                              timeout=60, check=False)

    try:
        await wait_serving(f"localhost:{port}", process=server,
                           credentials=grpc.ssl_channel_credentials(issued.ca_bytes()))
        refused = command("--pid", str(server.pid))
        assert (refused.returncode, refused.stdout) == (2, "")
        assert refused.stderr.splitlines() == [
            "tapis-admin: the server serves TLS with server.pem, signed by a CA it does not "
            "hold: give --tls-ca FILE (or TAPIS_TLS_CA), the CA that signed it"]
        for words in (("--pid", str(server.pid)), ("--target", f"localhost:{port}")):
            served = command(*words, "--tls-ca", str(issued.ca))
            assert (served.returncode, served.stdout) == (0, "SERVING\n"), served.stderr
        clear = command("--target", f"localhost:{port}")
        assert (clear.returncode, clear.stdout) == (1, "UNREACHABLE (UNAVAILABLE)\n")
    finally:
        server.terminate()
        server.wait(30)


def test_help_documents_the_tls_options_and_the_exit_codes(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        admin.main(["health", "--help"])
    text = capsys.readouterr().out
    for word in ("--tls-ca", "--tls ", "--tls-name", "TAPIS_TLS_CA", "TAPIS_TLS=1",
                 "TAPIS_HEALTH_NAME", "exit status: 0 SERVING"):
        assert word in text, word
