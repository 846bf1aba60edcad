"""The envelope's encoding: ClientFrame in, ServerFrame out, binary (protobuf) or text (proto3
JSON), and which GameService request each frame carries.

Each request of ``ClientFrame.request`` is answered by the field of ``ServerFrame.response``
with the same field number (``create_game`` 10 by ``create_game`` 10, ``stream_events`` 14 by
``events`` 14, ``stop_events`` 16 by ``events_stopped`` 16); the RPC a request field carries is
the one of the table of RPCs (``rpcs``) whose request message it holds (``RPC_OF_FIELD``).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any, Final

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message

from tapis.v1 import websocket_pb2 as ws_pb
from tapis_engine.errors import RuleError
from tapis_service.codec import requests, wire
from tapis_service.door.limits import MAX_RECEIVE_MESSAGE_BYTES
from tapis_service.door.rpcs import BY_REQUEST, Rpc
from tapis_service.observe.errors import (
    ServiceError,
    fault,
    from_rule_error,
    invalid_argument,
    status_message,
)

MAX_FRAME_BYTES: Final = MAX_RECEIVE_MESSAGE_BYTES
"""The largest message a client may send: the largest request gRPC accepts."""

_CLIENT = ws_pb.ClientFrame.DESCRIPTOR
_SERVER = ws_pb.ServerFrame.DESCRIPTOR
RESPONSE_FIELD: Final[dict[str, str]] = {
    field.name: _SERVER.fields_by_number[field.number].name
    for field in _CLIENT.oneofs_by_name["request"].fields}
"""The ServerFrame field answering each ClientFrame request field."""
RPC_OF_FIELD: Final[dict[str, Rpc]] = {
    field.name: BY_REQUEST[field.message_type.full_name]
    for field in _CLIENT.oneofs_by_name["request"].fields
    if field.message_type is not None and field.message_type.full_name in BY_REQUEST}
"""The RPC each ClientFrame request field carries (every one but ``stop_events``)."""
CARRIED = tuple(RPC_OF_FIELD.values())
"""The RPCs a socket carries."""
STOP: Final = "stop_events"


class Format(enum.Enum):
    """How a client's messages are encoded; the server answers each in its own format."""

    BINARY = "binary"
    """Binary WebSocket messages: the protobuf encoding."""
    JSON = "json"
    """Text WebSocket messages: the proto3 JSON encoding (debugging)."""


def invalid_request(message: str) -> ServiceError:
    return invalid_argument("INVALID_REQUEST", message)


def too_long(size: int) -> ServiceError:
    return invalid_argument(
        "VALUE_TOO_LONG", f"a message is at most {MAX_FRAME_BYTES} bytes, not {size}")


class Frame:
    """A ClientFrame, read: its id and credentials, the name of its request's field (None:
    none), the request as its RPC's method takes it (``requests.reader``: SubmitAction's read by
    hand) and the request's bytes (a cluster node relays them as they are)."""

    __slots__ = ("api_key", "field", "id", "request", "seat_token", "wire")

    def __init__(self, frame_id: int, seat_token: str, api_key: str, field: str | None,
                 request: Any, wire: bytes) -> None:
        self.id = frame_id
        self.seat_token = seat_token
        self.api_key = api_key
        self.field = field
        self.request = request
        self.wire = wire

    @staticmethod
    def of(frame: ws_pb.ClientFrame) -> Frame:
        """The plain way: a parsed frame's fields read, its request's bytes read again as its
        RPC's method takes it."""
        field = frame.WhichOneof("request")
        if field is None:
            return Frame(frame.id, frame.seat_token, frame.api_key, None, None, b"")
        wire = getattr(frame, field).SerializeToString()
        return Frame(frame.id, frame.seat_token, frame.api_key, field, _READERS[field](wire),
                     wire)


_READERS: Final[dict[str, Callable[[bytes], Any]]] = {
    **{field: requests.reader(rpc) for field, rpc in RPC_OF_FIELD.items()},
    STOP: ws_pb.StopEvents.FromString}
"""How each request field's bytes are read."""
_FIELDS: Final[dict[int, str]] = {field.number: field.name
                           for field in _CLIENT.oneofs_by_name["request"].fields}
_REQUEST_FIELDS: Final[tuple[tuple[int, str], ...]] = tuple(sorted(_FIELDS.items()))
_SUBMIT: Final = "submit_action"
_FRAME_KINDS: Final = bytes(
    requests.VARINT if number == 1 else
    requests.LENGTH_DELIMITED if number in (2, 3) or number in _FIELDS else requests.NONE
    for number in range(max(_FIELDS) + 1))
"""ClientFrame: id 1, seat_token 2, api_key 3, one request of fields 10 to 16."""


def _by_hand(payload: bytes) -> Frame | None:
    """The frame read by hand (``codec.requests``' rule), or None: the plain way."""
    found = requests.scan(payload, _FRAME_KINDS)
    if found is None:
        return None
    field: str | None = None
    wire = b""
    for number, name in _REQUEST_FIELDS:
        held: bytes | None = found[number]
        if held is not None:
            if field is not None:  # two of the oneof's fields: protobuf keeps the last
                return None
            field, wire = name, held
    seat_token = requests.text(found[2])
    api_key = requests.text(found[3])
    if seat_token is None or api_key is None:
        return None
    request: Any = None
    if field is not None:
        try:  # SubmitAction's reader called as a native function (every action)
            request = requests.read_submit_action(wire) if field == _SUBMIT \
                else _READERS[field](wire)
        except Exception:  # not its message: protobuf refuses the whole frame (the plain way)
            return None
    frame_id = found[1]
    return Frame(0 if frame_id is None else frame_id, seat_token, api_key, field, request,
                 wire)


def decode(payload: bytes, fmt: Format) -> Frame:
    """The ClientFrame in ``payload``, its size checked first (VALUE_TOO_LONG); INVALID_REQUEST
    if it is none."""
    if len(payload) > MAX_FRAME_BYTES:
        raise too_long(len(payload))
    if fmt is Format.BINARY:
        read = _by_hand(payload)
        if read is not None:
            return read
    frame = ws_pb.ClientFrame()
    try:
        if fmt is Format.BINARY:
            frame.ParseFromString(payload)
        else:
            json_format.Parse(payload.decode("utf-8"), frame)
        return Frame.of(frame)
    except (DecodeError, json_format.ParseError, UnicodeDecodeError, RecursionError) as error:
        raise invalid_request(f"the message is not a {fmt.value} ClientFrame") from error


def request_field(frame: Frame) -> str:
    """The name of the request ``frame`` carries; INVALID_REQUEST if it has id 0 or none."""
    if frame.id == 0:
        raise invalid_request("a ClientFrame needs an id other than 0")
    field = frame.field
    if field is None:
        raise invalid_request("the ClientFrame holds no request")
    return field


def encode(frame: ws_pb.ServerFrame, fmt: Format) -> bytes | str:
    """``frame`` as a binary (bytes) or text (str) WebSocket message."""
    if fmt is Format.BINARY:
        return frame.SerializeToString()
    return json_format.MessageToJson(frame, indent=None)


def answer(frame_id: int, field: str, response: Message | bytes) -> ws_pb.ServerFrame:
    """The ServerFrame carrying ``response`` (a message, or one serialized already) in
    ``field``."""
    frame = ws_pb.ServerFrame(id=frame_id)
    body = getattr(frame, field)
    if isinstance(response, bytes):
        body.ParseFromString(response)
    else:
        body.CopyFrom(response)
    return frame


_ID_TAG: Final = wire.tag(_SERVER, "id")
_ONE_BYTE: Final = [bytes((size,)) for size in range(0x80)]
_RESPONSE_TAGS: Final = {field.name: wire.tag(_SERVER, field.name)
                  for field in _SERVER.oneofs_by_name["response"].fields}


def answer_wire(frame_id: int, field: str, payload: bytes) -> bytes:
    """The binary message of ``answer(frame_id, field, payload)`` without parsing ``payload``
    again: the GameApi serializes each event once per view and every socket of that view sends
    those bytes. A protobuf field of a message type is its tag, its length and the message's
    bytes; protobuf writes ``id`` (field 1) first, as here (``test_frames`` checks the bytes
    equal ``answer(...).SerializeToString()``)."""
    head = _ID_TAG + wire.varint(frame_id) if frame_id else b""
    return head + wire.nested(_RESPONSE_TAGS[field], payload)


def answer_head(frame_id: int, field: str) -> bytes:
    """What ``answer_wire`` writes before the payload's length: the same for every answer of
    one stream, made once for it (``headed``)."""
    return (_ID_TAG + wire.varint(frame_id) if frame_id else b"") + _RESPONSE_TAGS[field]


def headed(head: bytes, payload: bytes) -> bytes:
    """``answer_wire(frame_id, field, payload)`` from ``answer_head(frame_id, field)``
    (``test_frames`` checks the two are the same bytes)."""
    size = len(payload)
    return head + (_ONE_BYTE[size] if size < 0x80 else wire.varint(size)) + payload


def as_refusal(error: Exception) -> ServiceError:
    """The service refusal of a domain or service error."""
    if isinstance(error, RuleError):
        return from_rule_error(error)
    assert isinstance(error, ServiceError)
    return error


def refusal(frame_id: int, error: ServiceError) -> ws_pb.ServerFrame:
    """The ServerFrame refusing request ``frame_id`` (or ending its stream): the status gRPC
    would have sent."""
    frame = ws_pb.ServerFrame(id=frame_id)
    frame.refusal.CopyFrom(status_message(error))
    return frame


def internal(frame_id: int) -> ws_pb.ServerFrame:
    """The answer to a request the server failed on through a fault of its own (logged), as
    gRPC's call guard answers it: ``INTERNAL`` / ``INTERNAL``, never the fault's text."""
    return refusal(frame_id, fault())
