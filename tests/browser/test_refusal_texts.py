"""Every refusal reason of the contract has the web client's sentence in English and French
(web/src/refusals.json), or is named there as one a player in the browser never meets."""

from __future__ import annotations

import json
from pathlib import Path

from tapis.v1 import errors_pb2

TEXTS = Path(__file__).resolve().parents[2] / "web" / "src" / "refusals.json"


def test_every_reason_is_said_in_both_languages_or_never_met() -> None:
    texts = json.loads(TEXTS.read_text(encoding="utf-8"))
    reasons = {value.name.removeprefix("ERROR_REASON_")
               for value in errors_pb2.ErrorReason.DESCRIPTOR.values}
    said, never = set(texts["en"]), set(texts["never"])
    assert set(texts["fr"]) == said
    assert not said & never, said & never
    assert reasons - said - never == set()  # a reason without a sentence
    assert (said | never) - reasons == set()  # a sentence for no reason
    assert all(texts["en"][reason] and texts["fr"][reason] for reason in said)
