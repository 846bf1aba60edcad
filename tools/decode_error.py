"""Decode the error details `buf curl` prints, with the types the server's reflection serves.

`buf curl` prints a refusal in the Connect JSON error form, where each detail's `value` is the
base64 of the message: buf does not decode error details itself. This reads that JSON on
standard input, asks the server (by reflection) for each detail's type and prints the JSON with
every detail decoded::

    buf curl --protocol grpc --http2-prior-knowledge -d '{"gameId":"nope"}' \\
        http://127.0.0.1:50051/tapis.v1.GameService/GetGame 2>&1 \\
      | .venv/bin/python tools/decode_error.py 127.0.0.1:50051
"""

from __future__ import annotations

import base64
import json
import sys
from typing import Any

import grpc
from google.protobuf import descriptor_pool, json_format, message_factory
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)


def decode_details(error: dict[str, Any], target: str) -> dict[str, Any]:
    """``error`` with each detail's ``value`` decoded, by the server's reflection, as ``debug``."""
    with grpc.insecure_channel(target) as channel:
        pool = descriptor_pool.DescriptorPool(ProtoReflectionDescriptorDatabase(channel))
        details = []
        for detail in error.get("details", []):
            kind = message_factory.GetMessageClass(pool.FindMessageTypeByName(detail["type"]))
            raw = base64.b64decode(detail["value"] + "=" * (-len(detail["value"]) % 4))
            debug = json_format.MessageToDict(kind.FromString(raw))
            details.append({**detail, "debug": debug})
    return {**error, "details": details}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    text = sys.stdin.read()
    try:
        error = json.loads(text)
    except json.JSONDecodeError:
        error = None
    if not isinstance(error, dict) or "details" not in error:
        sys.stdout.write(text)  # not a refusal: pass it through
        return 0
    print(json.dumps(decode_details(error, args[0]), indent=3))
    return 0


if __name__ == "__main__":
    sys.exit(main())
