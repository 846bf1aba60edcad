"""Calls made to wait in grpc's core as a server's stop begins its shutdown, deterministically:
the stop's last step before the shutdown (``host.end_streams``, through its
``stop_listeners``) sends them from grpc's own threads (a synchronous channel) and holds the
event loop until channelz counts them started in the core. grpc.aio asks the core for one
call at a time: the core hands the first to that request, and the others wait in its queue
(what the shutdown kills with ``CANCELLED``)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import grpc
from grpc._cython import cygrpc

from tapis_service.process.server import RunningServer
from tests.support.calls import reason_of

WITHIN_S = 10.0
"""The longest the loop is held for the core to count the calls (they are local)."""


def started(server_id: int) -> int:
    """The calls grpc's core has started for the server (channelz)."""
    data = json.loads(cygrpc.channelz_get_server(server_id))["server"]["data"]
    return int(data.get("callsStarted", 0))


def queue_at_stop(running: RunningServer, send: Callable[[], list[Any]]) -> list[Any]:
    """The futures ``send()`` returns (filled in as the stop begins its shutdown)."""
    server_id = running.core_id
    assert server_id is not None
    sent: list[Any] = []

    def arriving() -> None:
        running.host.stop_listeners.remove(arriving)  # once
        sent.extend(queue(server_id, send))

    running.host.stop_listeners.append(arriving)
    return sent


def queue(server_id: int, send: Callable[[], list[Any]]) -> list[Any]:
    """The futures ``send()`` returns, once grpc's core has started every call: the event
    loop held (nothing of the server runs) until then."""
    before = started(server_id)
    sent = send()
    give_up = time.monotonic() + WITHIN_S
    while started(server_id) < before + len(sent):
        assert time.monotonic() < give_up, "the calls never reached grpc's core"
        time.sleep(0.001)  # the loop held on purpose
    return sent


def outcome(future: Any) -> tuple[str, str]:
    """(code name, ErrorInfo reason) of a finished call ("OK", "" when answered)."""
    try:
        future.result()
    except grpc.RpcError as error:
        return error.code().name, reason_of(error)  # type: ignore[arg-type]
    return "OK", ""
