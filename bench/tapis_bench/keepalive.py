"""Measure how long a silent peer's stream stays open (not a test: a figure).

    .venv/bin/python -m tapis_bench.keepalive [--keepalive-ms 1000]

Starts `tapis-server --keepalive-time-ms K --keepalive-timeout-ms K --metrics-port`, opens one
StreamEvents call over raw HTTP/2 (h2), then goes silent: it neither reads nor acknowledges
pings, as a peer whose machine vanished. Prints the seconds until the server's open-stream
gauge (`tapis_streams`) is back to 0: the server noticed the dead peer and freed its stream.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time
import urllib.request

import grpc
import h2.config
import h2.connection

from tapis.v1 import game_service_pb2 as pb
from tapis.v1 import game_service_pb2_grpc as pb_grpc
from tapis_bench.procs import free_port


def open_streams(metrics_port: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as page:
        for line in page.read().decode().splitlines():
            if line.startswith("tapis_streams "):
                return float(line.split()[1])
    return -1.0


def silent_stream(port: int, game_id: str) -> socket.socket:
    """A StreamEvents call whose client then never reads nor answers a ping again."""
    connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    sock = socket.create_connection(("127.0.0.1", port))
    connection.initiate_connection()
    stream = connection.get_next_available_stream_id()
    connection.send_headers(stream, [
        (":method", "POST"), (":scheme", "http"),
        (":path", "/tapis.v1.GameService/StreamEvents"), (":authority", f"127.0.0.1:{port}"),
        ("content-type", "application/grpc"), ("te", "trailers")])
    body = pb.StreamEventsRequest(game_id=game_id).SerializeToString()
    connection.send_data(stream, b"\x00" + len(body).to_bytes(4, "big") + body,
                         end_stream=True)
    sock.sendall(connection.data_to_send())
    sock.recv(65_535)
    return sock


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keepalive-ms", type=int, default=1000)
    parser.add_argument("--give-up-s", type=float, default=120.0)
    args = parser.parse_args()
    port, metrics_port = free_port(), free_port()
    server = subprocess.Popen([
        sys.executable, "-m", "tapis_service.process.main", "--port", str(port),
        "--log-level", "error",
        "--metrics-port", str(metrics_port), "--keepalive-time-ms", str(args.keepalive_ms),
        "--keepalive-timeout-ms", str(args.keepalive_ms)])
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        grpc.channel_ready_future(channel).result(timeout=30)
        game_id = pb_grpc.GameServiceStub(channel).CreateGame(
            pb.CreateGameRequest(kind=pb.GAME_KIND_WAR)).game.game_id
        channel.close()
        sock = silent_stream(port, game_id)
        started = time.perf_counter()
        assert open_streams(metrics_port) == 1
        while open_streams(metrics_port) > 0 and time.perf_counter() - started < args.give_up_s:
            time.sleep(0.1)
        freed = open_streams(metrics_port) == 0
        print(json.dumps({"keepalive_ms": args.keepalive_ms, "freed": freed,
                          "seconds": round(time.perf_counter() - started, 2)}))
        sock.close()
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()
