"""docs/api.md and the README's error table are what the proto comments generate."""

from __future__ import annotations

from tests.support.games import GAME_ONEOFS, KINDS, game_fields
from tools.api_docs import API_DOC, README, TABLE_BEGIN, expected_outputs


def test_generated_docs_are_up_to_date() -> None:
    expected = expected_outputs()
    assert set(expected) == {API_DOC, README}
    for path, text in expected.items():
        assert path.read_text(encoding="utf-8") == text, \
            f"{path.name} is out of date: run `make api-docs`"


def test_the_reference_documents_every_type_and_the_error_reasons() -> None:
    text = API_DOC.read_text(encoding="utf-8")
    per_game = [f"### {field.message_type.name}" for message, oneof in GAME_ONEOFS
                for field in message.DESCRIPTOR.oneofs_by_name[oneof].fields
                if field.name in game_fields(message, oneof)]
    assert len(per_game) == len(GAME_ONEOFS) * len(KINDS)
    for heading in ("### GameService", "### ErrorReason", "### Event", *per_game):
        assert f"\n{heading}\n" in text, heading
    assert "| `ERROR_REASON_NOT_YOUR_TURN` |" in text
    readme = README.read_text(encoding="utf-8")
    assert TABLE_BEGIN in readme
    assert "| `FAILED_PRECONDITION` |" in readme and "`ILLEGAL_CAPTURE`" in readme
