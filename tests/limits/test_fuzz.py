"""Fuzzing every request message of the contract (strategies built from the descriptors) and
random bytes to every method: never UNKNOWN or INTERNAL, the server SERVING afterwards, and no
game changed by a refused request. Derandomized, so every run tries the same examples."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from typing import Any

import grpc
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tapis.v1 import game_service_pb2 as pb
from tapis_service.observe.clock import ManualClock
from tests.support.calls import auth, person_seats, view_of
from tests.support.games import KINDS, proto_kind, seat_counts
from tests.support.server import Harness, ServerFactory
from tests.support.tables import live_of

SERVICE = pb.DESCRIPTOR.services_by_name["GameService"]
FORBIDDEN = (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL)
FUZZ = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow, HealthCheck.data_too_large])
KNOWN_IDS: list[str] = ["0123456789abcdef"]
"""Game ids the strategies draw from, besides random text (filled once the tables exist)."""
USUALLY_SET = frozenset({"game_id", "kind", "action"})
"""Fields drawn in most examples, so that requests reach past the first checks."""
_INTS = {
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1), FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
}


def _text(name: str) -> st.SearchStrategy[str]:
    plain = st.one_of(st.text(max_size=12), st.text(min_size=120, max_size=140),
                      st.just(""))
    if name == "game_id":
        known = st.deferred(lambda: st.sampled_from(KNOWN_IDS))
        return st.integers(0, 4).flatmap(lambda i: plain if i == 0 else known)
    return plain


def _scalar(field: FieldDescriptor) -> st.SearchStrategy[Any]:
    kind = field.type
    if kind in _INTS:
        low, high = _INTS[kind]
        return st.one_of(st.integers(max(low, 0), 8), st.integers(low, high))
    if kind == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if kind == FieldDescriptor.TYPE_ENUM:
        values = [v.number for v in field.enum_type.values]
        return st.one_of(st.sampled_from(values[1:] or values), st.sampled_from([*values, 99]))
    if kind == FieldDescriptor.TYPE_STRING:
        return _text(field.name)
    if kind == FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=16)
    if kind in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return st.floats(allow_nan=False, width=32)
    raise AssertionError(f"no strategy for {field.full_name}")


def messages(descriptor: Descriptor, depth: int = 0) -> st.SearchStrategy[Message]:
    """Any message of this type: each field absent or a drawn value (a oneof ends with the last
    member set), nested messages down to a few levels."""
    cls = GetMessageClass(descriptor)
    optional: dict[str, st.SearchStrategy[Any]] = {}
    required: dict[str, st.SearchStrategy[Any]] = {}
    for field in descriptor.fields:
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            key, value = field.message_type.fields_by_name["key"], \
                field.message_type.fields_by_name["value"]
            optional[field.name] = st.dictionaries(
                st.one_of(_scalar(key), st.from_regex(r"[a-z][a-z0-9._/-]{0,8}", fullmatch=True)),
                _scalar(value), max_size=20)
            continue
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            if depth >= 4:
                continue
            element: st.SearchStrategy[Any] = st.deferred(
                lambda f=field: messages(f.message_type, depth + 1))
        else:
            element = _scalar(field)
        drawn = st.lists(element, max_size=6) if field.is_repeated else element
        if depth == 0 and field.name in USUALLY_SET:
            required[field.name] = st.one_of(drawn, drawn, drawn, st.none())
        else:
            optional[field.name] = drawn

    def build(values: dict[str, Any]) -> Message:
        message = cls()
        for name, value in values.items():
            if value is None:
                continue
            field = descriptor.fields_by_name[name]
            if isinstance(value, dict):  # a map (labels)
                getattr(message, name).update(value)
            elif field.is_repeated:
                container = getattr(message, name)
                if field.type == FieldDescriptor.TYPE_MESSAGE:
                    for item in value:
                        container.add().CopyFrom(item)
                else:
                    container.extend(value)
            elif field.type == FieldDescriptor.TYPE_MESSAGE:
                getattr(message, name).CopyFrom(value)
            else:
                setattr(message, name, value)
        return message

    return st.fixed_dictionaries(required, optional=optional).map(build)


class Tables:
    """The tables the fuzzer plays against, and the credentials it may send."""

    def __init__(self, h: Harness) -> None:
        self.h = h
        self.tokens: list[str] = []
        self.by_game: dict[str, list[str]] = {}

    async def setup(self) -> None:
        KNOWN_IDS.clear()
        for kind in KINDS:
            seats = seat_counts(kind)[0]
            created = await self.h.stub.CreateGame(pb.CreateGameRequest(
                kind=proto_kind(kind), seats=seats, seat_configs=person_seats(seats)))
            game_id = created.game.game_id
            KNOWN_IDS.append(game_id)
            for _ in range(seats):
                joined = await self.h.stub.JoinGame(pb.JoinGameRequest(game_id=game_id))
                self.tokens.append(joined.seat_token)
                self.by_game.setdefault(game_id, []).append(joined.seat_token)
        await self.h.stub.CreateGame(pb.CreateGameRequest(
            kind=pb.GAME_KIND_WAR, seat_configs=person_seats(2)))  # one still waiting

    def metadata(self, choice: int, game_id: str) -> tuple[tuple[str, str], ...] | None:
        """No token, a malformed one, a wrong one, another game's, or one of the game's."""
        if choice == 0:
            return None
        if choice == 1:
            return (("authorization", "Basic nope"),)
        if choice == 2:
            return auth("not-a-token")
        if choice == 3 or game_id not in self.by_game:
            return auth(self.tokens[choice % len(self.tokens)])
        own = self.by_game[game_id]
        return auth(own[choice % len(own)])

    async def snapshot(self) -> dict[str, object]:
        """Every live table's whole state (the engine's ``Table``, a frozen value), and, for
        those the fuzzed calls name (``KNOWN_IDS``), the table as a spectator sees it over
        gRPC (the manual clock stands still: no bot moves). (A GetGame of every table around
        every call made the test quadratic in the tables its accepted CreateGames add, and
        no call names those.)"""
        games: dict[str, object] = {game_id: session.table
                                    for game_id, session in live_of(self.h.host).items()}
        for game_id in KNOWN_IDS:
            if game_id in games:
                games[game_id] = (games[game_id],
                                  (await view_of(self.h, game_id)).SerializeToString())
        return games


async def call_method(h: Harness, method: str, payload: bytes,
                      metadata: Any) -> grpc.StatusCode:
    """Send raw bytes to a method; the status code it answered."""
    path = f"/{SERVICE.full_name}/{method}"
    try:
        if method == "StreamEvents":
            call = h.channel.unary_stream(path)(payload, metadata=metadata)
            with contextlib.suppress(TimeoutError):  # still open: a live stream, accepted
                await asyncio.wait_for(call.read(), 0.05)
            call.cancel()
            code = await call.code()
            return grpc.StatusCode.OK if code == grpc.StatusCode.CANCELLED else code
        await h.channel.unary_unary(path)(payload, metadata=metadata)
    except grpc.aio.AioRpcError as error:
        return error.code()
    return grpc.StatusCode.OK


async def checked(tables: Tables, method: str, payload: bytes, credential: int,
                  game_id: str) -> grpc.StatusCode:
    before = await tables.snapshot()
    code = await call_method(tables.h, method, payload, tables.metadata(credential, game_id))
    assert code not in FORBIDDEN, (method, payload[:80])
    if code != grpc.StatusCode.OK:
        assert await tables.snapshot() == before, (method, code, payload[:80])
    return code


async def test_fuzzed_requests_and_random_bytes_never_break_the_server(
        make_server: ServerFactory) -> None:
    h = await make_server(clock=ManualClock(), create_burst=100_000)
    tables = Tables(h)
    await tables.setup()

    def fuzz_messages(method: str, descriptor: Descriptor) -> None:
        @FUZZ
        @given(message=messages(descriptor), credential=st.integers(0, 12))
        def draw(message: Message, credential: int) -> None:
            pending.append((method, message.SerializeToString(), credential,
                            getattr(message, "game_id", "")))

        draw()

    @FUZZ
    @given(method=st.sampled_from([m.name for m in SERVICE.methods]),
           payload=st.binary(max_size=200), credential=st.integers(0, 12))
    def fuzz_bytes(method: str, payload: bytes, credential: int) -> None:
        pending.append((method, payload, credential, ""))

    pending: list[tuple[str, bytes, int, str]] = []
    for method in SERVICE.methods:
        fuzz_messages(method.name, method.input_type)
    fuzz_bytes()
    methods = {method for method, _, _, _ in pending}
    assert methods == {m.name for m in SERVICE.methods}
    answered: Counter[tuple[str, str]] = Counter()
    for method, payload, credential, game_id in pending:
        code = await checked(tables, method, payload, credential, game_id)
        answered[method, code.name] += 1
    # the examples reach past the first checks: some are accepted, some refused by the rules
    assert answered["CreateGame", "OK"] and answered["GetGame", "OK"] \
        and answered["StreamEvents", "OK"]
    health = health_pb2_grpc.HealthStub(h.channel)
    answer = await health.Check(health_pb2.HealthCheckRequest())
    assert answer.status == health_pb2.HealthCheckResponse.SERVING
