"""The ledger of a chaos run (``tapis_bench.pg_outage``): every ``SubmitAction`` request sent,
with every answer it got, and the check that says which were committed.

Each request is sent with an ``expected_version``, so it can commit only at the version after
it. At the end (disruptions stopped, nodes healthy, a settle time) each table's version is
read (``before_check``) and every request is sent once more with its ``request_id``: a table
keeps its committed request ids for its life, so a committed request is answered with its
committed version (at most ``before_check``); one never committed is refused
(``STALE_VERSION``) or applied now (a version above ``before_check``: not committed).

:func:`classify` then counts, all of which must be 0:

* **lost**: acknowledged requests (an OK answer) whose check does not give the version they
  were acknowledged with (or that the check could not answer);
* **doubled**: tables whose version advanced (``before_check`` minus the version at the start)
  by another number than their committed requests, plus committed requests that share a
  version with another of their table;
* **not_applied_for_committed**: committed requests answered with a promise that they were not
  applied (:func:`promises_not_applied`) once they had been applied: an answer received more
  than ``CLOCK_MARGIN_MS`` after the time of the request's first event (``Event.time``: when
  the server applied the input that was committed; the server and this process read one
  machine's clock), as the check or an acknowledgement gives it. A refusal received before
  then is true: that attempt was not applied, a later one was. A committed request whose
  answers carry no event time is flagged on any such promise.

What promises "not applied": every refusal whose ``ErrorInfo`` reason is one of
``tapis.v1.ErrorReason``, except ``COMMIT_UNKNOWN`` (in doubt by definition), ``TABLE_MOVED``
(errors.proto: answering a write, it does not say the write was not applied), and
``SERVER_STARTING`` and ``SERVER_STOPPING`` (errors.proto: refused before the request was
looked up, they speak of that attempt only, never of an earlier one with its request id).
An answer without a reason promises nothing: grpc's own ``UNAVAILABLE`` (a node down or a
connection cut), ``DEADLINE_EXCEEDED`` (the client's timeout), ``CANCELLED``, ``UNKNOWN`` (which
the run counts on its own) or ``INTERNAL``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

OK = "OK"
IN_DOUBT_REASONS = frozenset({"COMMIT_UNKNOWN", "TABLE_MOVED", "SERVER_STARTING",
                              "SERVER_STOPPING"})
"""Reasons that say nothing of whether a write was applied by an earlier attempt."""
CLOCK_MARGIN_MS = 20
"""How far apart the server's event times and this process's clock may read (one machine)."""


@dataclass(frozen=True)
class Answer:
    """One answer to a request: ``code`` a grpc status name (``OK`` for an acknowledgement,
    then ``version`` is the version it gave and ``applied_ms`` its first event's time),
    ``reason`` the ErrorInfo reason ("" if none), ``at_ms`` when it was received (ms since the
    epoch)."""

    code: str
    reason: str = ""
    version: int = 0
    at_ms: int = 0
    applied_ms: int = 0


def promises_not_applied(answer: Answer) -> bool:
    """The answer says the request was not applied (see the module's docstring)."""
    return answer.code != OK and bool(answer.reason) and answer.reason not in IN_DOUBT_REASONS


@dataclass
class Request:
    """A ``SubmitAction`` request (its action kept serialized) and what it was answered."""

    game_id: str
    request_id: str
    seat: int
    expected_version: int
    action: bytes
    answers: list[Answer] = field(default_factory=list)
    check: Answer | None = None

    def acknowledged(self) -> list[int]:
        return [answer.version for answer in self.answers if answer.code == OK]


def refused_once_applied(request: Request) -> bool:
    """A committed request was answered "not applied" after it had been applied."""
    applied = [answer.applied_ms for answer in [*request.answers, request.check]
               if answer is not None and answer.code == OK and answer.applied_ms]
    since = min(applied) + CLOCK_MARGIN_MS if applied else None
    return any(promises_not_applied(answer) and (since is None or answer.at_ms > since)
               for answer in request.answers)


def committed(request: Request, before_check: int) -> bool:
    """The check answered the committed version of a request applied before the check."""
    check = request.check
    return check is not None and check.code == OK and check.version <= before_check


def classify(requests: list[Request], initial: dict[str, int],
             before_check: dict[str, int]) -> dict[str, int]:
    """The ledger's counts (``lost``, ``doubled`` and ``not_applied_for_committed`` must be
    0); ``initial`` and ``before_check`` are each table's version at the start and before the
    check."""
    found = violations(requests, initial, before_check)
    return {"requests": len(requests),
            "acknowledged": sum(1 for request in requests if request.acknowledged()),
            "committed": sum(committed(request, before_check[request.game_id])
                             for request in requests),
            "unchecked": sum(1 for request in requests if request.check is None),
            **{name: len(found[name]) for name in ("lost", "doubled",
                                                   "not_applied_for_committed")}}


def violations(requests: list[Request], initial: dict[str, int],
               before_check: dict[str, int]) -> dict[str, list[str]]:
    """What :func:`classify` counts, named: the request ids lost and committed though once
    refused as not applied, the tables (and shared versions) doubled."""
    lost: list[str] = []
    not_applied: list[str] = []
    per_table: dict[str, Counter[int]] = defaultdict(Counter)
    for request in requests:
        versions = request.acknowledged()
        check = request.check
        if versions and (check is None or check.code != OK
                         or any(version != check.version for version in versions)):
            lost.append(request.request_id)
        if committed(request, before_check[request.game_id]):
            assert check is not None
            per_table[request.game_id][check.version] += 1
            if refused_once_applied(request):
                not_applied.append(request.request_id)
    doubled: list[str] = []
    for game_id, start in initial.items():
        at = per_table[game_id]
        if before_check[game_id] - start != sum(at.values()):
            doubled.append(f"{game_id}: +{before_check[game_id] - start} versions, "
                           f"{sum(at.values())} committed")
        doubled += [f"{game_id}@{version}" for version, count in at.items()
                    for _ in range(count - 1)]
    return {"lost": lost, "doubled": doubled, "not_applied_for_committed": not_applied}
