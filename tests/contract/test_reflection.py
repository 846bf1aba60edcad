"""Server reflection serves every type a response can carry, error details included; `buf curl`
over reflection works as the README shows it."""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from pathlib import Path

import grpc
import pytest
from google.protobuf import descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

from tapis.v1 import errors_pb2
from tapis.v1 import game_service_pb2 as pb
from tests.support.server import Harness
from tools.decode_error import decode_details

BUF = Path(sys.executable).parent / "buf"


def reflected_pool(port: int) -> tuple[descriptor_pool.DescriptorPool, list[str], grpc.Channel]:
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    database = ProtoReflectionDescriptorDatabase(channel)
    return descriptor_pool.DescriptorPool(database), list(database.get_services()), channel


def reachable_messages(message: Descriptor, seen: set[str]) -> None:
    if message.full_name in seen:
        return
    seen.add(message.full_name)
    for field in message.fields:
        if field.message_type is not None:
            reachable_messages(field.message_type, seen)


def resolve_all(port: int) -> dict[str, object]:
    """Everything the tests check, resolved through a fresh reflection client (blocking)."""
    pool, services, channel = reflected_pool(port)
    with channel:
        service = pool.FindServiceByName("tapis.v1.GameService")
        messages: set[str] = set()
        for method in service.methods:
            reachable_messages(method.output_type, messages)
        return {
            "services": services,
            "reason_values": [v.name for v in pool.FindEnumTypeByName(
                "tapis.v1.ErrorReason").values],
            "error_info": pool.FindMessageTypeByName("google.rpc.ErrorInfo").full_name,
            "status": pool.FindMessageTypeByName("google.rpc.Status").full_name,
            "response_messages": sorted(messages),
        }


async def test_reflection_resolves_the_error_types_and_every_response_type(
        server: Harness) -> None:
    found = await asyncio.to_thread(resolve_all, server.running.port)
    assert "tapis.v1.GameService" in found["services"]
    assert found["reason_values"] == [v.name for v in errors_pb2.ErrorReason.DESCRIPTOR.values]
    assert found["error_info"] == "google.rpc.ErrorInfo"
    assert found["status"] == "google.rpc.Status"
    expected: set[str] = set()
    for method in pb.DESCRIPTOR.services_by_name["GameService"].methods:
        reachable_messages(method.output_type, expected)
    assert found["response_messages"] == sorted(expected)
    assert "tapis.v1.BasraView" in expected and "google.protobuf.Timestamp" in expected


def decode_status_by_reflection(port: int, details_bin: bytes) -> list[tuple[str, str, str]]:
    """The (type, reason, domain) of each detail, using only the descriptors reflection gave."""
    pool, _, channel = reflected_pool(port)
    with channel:
        status_class = message_factory.GetMessageClass(
            pool.FindMessageTypeByName("google.rpc.Status"))
        status = status_class.FromString(details_bin)
        decoded = []
        for detail in status.details:
            name = detail.type_url.rsplit("/", 1)[-1]
            kind = message_factory.GetMessageClass(pool.FindMessageTypeByName(name))
            info = kind.FromString(detail.value)
            decoded.append((name, info.reason, info.domain))
        return decoded


async def test_an_error_decodes_with_the_reflected_types_alone(server: Harness) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await server.stub.GetGame(pb.GetGameRequest(game_id="nope"))
    trailer = dict(refused.value.trailing_metadata() or ())["grpc-status-details-bin"]
    assert isinstance(trailer, bytes)
    decoded = await asyncio.to_thread(decode_status_by_reflection, server.running.port, trailer)
    assert decoded == [("google.rpc.ErrorInfo", "GAME_NOT_FOUND", "tapis.v1")]
    assert errors_pb2.ErrorReason.Value("ERROR_REASON_GAME_NOT_FOUND") > 0


async def buf_curl(port: int, method: str, body: str, *flags: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        str(BUF), "curl", "--protocol", "grpc", "--http2-prior-knowledge", *flags, "-d", body,
        f"http://127.0.0.1:{port}/tapis.v1.GameService/{method}",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_buf_curl_error_details_decode_over_reflection(server: Harness) -> None:
    status, _, err = await buf_curl(server.running.port, "GetGame", '{"gameId":"nope"}')
    assert status != 0
    error = json.loads(err)
    assert error["code"] == "not_found"
    # buf prints each detail as base64 (Connect's error JSON); the type is named, and the
    # server's reflection has it: decode it as tools/decode_error.py does.
    assert [d["type"] for d in error["details"]] == ["google.rpc.ErrorInfo"]
    assert base64.b64decode(error["details"][0]["value"] + "==")  # raw bytes, not JSON
    decoded = await asyncio.to_thread(decode_details, error, f"127.0.0.1:{server.running.port}")
    assert decoded["details"][0]["debug"] == {"reason": "GAME_NOT_FOUND", "domain": "tapis.v1"}


README_CREATE = ('{"kind":"GAME_KIND_WAR","seatConfigs":[{"type":"SEAT_TYPE_PERSON"},'
                 '{"type":"SEAT_TYPE_BOT"}]}')


async def test_buf_curl_emit_defaults_keeps_seat_zero(server: Harness) -> None:
    status, out, _ = await buf_curl(server.running.port, "CreateGame", README_CREATE)
    assert status == 0
    seats = json.loads(out)["game"]["seats"]
    assert "seat" not in seats[0] and seats[1]["seat"] == 1  # proto3 JSON drops the zero
    status, out, _ = await buf_curl(server.running.port, "CreateGame", README_CREATE,
                                    "--emit-defaults")
    assert status == 0
    seats = json.loads(out)["game"]["seats"]
    assert [s["seat"] for s in seats] == [0, 1]
    assert seats[0]["taken"] is False  # other defaults are spelled out too


def test_the_readme_shows_the_commands_tested_here() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert "--emit-defaults" in readme
    assert README_CREATE in readme
    assert "tools/decode_error.py" in readme


def test_the_server_names_the_error_files_it_reflects() -> None:
    from google.rpc import error_details_pb2, status_pb2

    from tapis_service.process.server import EXTRA_FILES, reflection_pool

    assert {f.name for f in EXTRA_FILES} == {errors_pb2.DESCRIPTOR.name,
                                             status_pb2.DESCRIPTOR.name,
                                             error_details_pb2.DESCRIPTOR.name}
    pool = reflection_pool()
    assert pool.FindEnumTypeByName("tapis.v1.ErrorReason").full_name == "tapis.v1.ErrorReason"
