"""The chaos run's ledger (``tapis_bench.ledger``) on made-up answers: it must flag a lost, a
doubled and a not-applied-for-committed write, and pass a clean history."""

from __future__ import annotations

from tapis_bench.ledger import OK, Answer, Request, classify, promises_not_applied

GAME = "g"


def _request(number: int, expected: int, *answers: Answer, check: Answer | None) -> Request:
    request = Request(GAME, f"r{number}", 0, expected, b"", list(answers))
    request.check = check
    return request


def _clean() -> list[Request]:
    """Versions 1 to 3 committed (r3 refused before a later try applied it); r4 refused, then
    applied by the check (version 4, past the version read before it)."""
    return [
        _request(1, 0, Answer(OK, version=1), check=Answer(OK, version=1)),
        _request(2, 1, Answer("UNAVAILABLE", "COMMIT_UNKNOWN"), Answer(OK, version=2),
                 check=Answer(OK, version=2)),
        _request(3, 2, Answer("DEADLINE_EXCEEDED"),
                 Answer("UNAVAILABLE", "STORE_UNAVAILABLE", at_ms=2_500),
                 check=Answer(OK, version=3, applied_ms=3_000)),
        _request(4, 3, Answer("UNAVAILABLE", "STORE_UNAVAILABLE"),
                 check=Answer(OK, version=4)),
        _request(5, 3, Answer("ABORTED", "STALE_VERSION"),
                 check=Answer("ABORTED", "STALE_VERSION")),
    ]


def _counts(requests: list[Request], before: int = 3) -> dict[str, int]:
    counts = classify(requests, {GAME: 0}, {GAME: before})
    return {key: counts[key] for key in ("lost", "doubled", "not_applied_for_committed")}


def test_a_clean_history_has_nothing_to_flag() -> None:
    assert _counts(_clean()) == {"lost": 0, "doubled": 0, "not_applied_for_committed": 0}
    assert classify(_clean(), {GAME: 0}, {GAME: 3})["committed"] == 3


def test_an_acknowledged_write_the_check_does_not_find_is_lost() -> None:
    requests = _clean()
    requests[0].check = Answer("ABORTED", "STALE_VERSION")  # acknowledged, then forgotten
    assert _counts(requests)["lost"] == 1
    requests = _clean()
    requests[1].check = None  # the check got no answer
    assert _counts(requests)["lost"] == 1


def test_a_version_advanced_by_no_committed_write_is_doubled() -> None:
    requests = _clean()
    requests[2].check = Answer("ABORTED", "STALE_VERSION")  # version 3 by no write of ours
    assert _counts(requests)["doubled"] == 1
    requests = _clean()
    requests[2].check = Answer(OK, version=2)  # two committed writes at one version
    assert _counts(requests)["doubled"] >= 1


def test_a_committed_write_refused_as_not_applied_once_applied_is_flagged() -> None:
    requests = _clean()
    requests[2].answers.append(Answer("UNAVAILABLE", "STORE_UNAVAILABLE", at_ms=3_500))
    assert _counts(requests)["not_applied_for_committed"] == 1
    requests = _clean()  # no event time: any such refusal is flagged
    requests[2].check = Answer(OK, version=3)
    assert _counts(requests)["not_applied_for_committed"] == 1


def test_only_reasons_that_say_not_applied_are_promises() -> None:
    assert promises_not_applied(Answer("UNAVAILABLE", "STORE_UNAVAILABLE"))
    assert promises_not_applied(Answer("ABORTED", "STALE_VERSION"))
    assert promises_not_applied(Answer("FAILED_PRECONDITION", "NOT_YOUR_TURN"))
    assert not promises_not_applied(Answer("UNAVAILABLE", "COMMIT_UNKNOWN"))
    assert not promises_not_applied(Answer("UNAVAILABLE", "TABLE_MOVED"))
    # refused before the request was looked up: of this attempt only (errors.proto)
    assert not promises_not_applied(Answer("UNAVAILABLE", "SERVER_STARTING"))
    assert not promises_not_applied(Answer("UNAVAILABLE", "SERVER_STOPPING"))
    assert not promises_not_applied(Answer("UNAVAILABLE"))  # a node down: no reason
    assert not promises_not_applied(Answer("DEADLINE_EXCEEDED"))
    assert not promises_not_applied(Answer(OK, version=1))
