"""Server-wide limits for keyless calls, and each backend's own share (on a manual clock)."""

from __future__ import annotations

from tapis_service.door.quotas import CREATES, JOINS, LISTS, QuotaLimits, Quotas


def count(allowed: list[bool]) -> int:
    return sum(allowed)


def test_keyless_creates_share_one_bucket_whatever_the_address() -> None:
    quotas = Quotas(QuotaLimits(keyless_create_rate=50, keyless_create_burst=200))
    # 10 s of creates from everywhere, 1,000 a second: the burst, then the rate
    allowed = [quotas.allow_create(None, ms) for ms in range(0, 10_000)]
    assert count(allowed) <= 200 + 50 * 10
    assert count(allowed) >= 200 + 50 * 10 - 1
    assert quotas.allow_create("backend-a", 10_000)  # a backend's share is its own


def test_each_backend_has_its_own_bucket() -> None:
    quotas = Quotas(QuotaLimits(backend_create_rate=1, backend_create_burst=2))
    assert [quotas.allow_create("a", 0) for _ in range(3)] == [True, True, False]
    assert quotas.allow_create("b", 0)
    assert quotas.allow_create("a", 1000)


def test_tables_held_are_capped_per_owner() -> None:
    quotas = Quotas(QuotaLimits(keyless_max_tables=2, backend_max_tables=1))
    assert quotas.may_hold_another(None, 1) and not quotas.may_hold_another(None, 2)
    assert quotas.may_hold_another("a", 0) and not quotas.may_hold_another("a", 1)


def test_joins_and_lists_without_a_key_are_limited_server_wide() -> None:
    quotas = Quotas(QuotaLimits(join_rate=1, join_burst=2, list_rate=1, list_burst=1))
    assert [quotas.allow_join(None, 0) for _ in range(3)] == [True, True, False]
    assert quotas.allow_join("a", 0)  # a backend's joins are not counted
    assert [quotas.allow_list(None, 0) for _ in range(2)] == [True, False]
    assert quotas.allow_list("a", 0)


def test_a_rate_of_zero_is_no_limit() -> None:
    quotas = Quotas(QuotaLimits(keyless_create_rate=0, join_rate=0, list_rate=0,
                                keyless_max_tables=0))
    assert all(quotas.allow_create(None, 0) for _ in range(10_000))
    assert all(quotas.allow_join(None, 0) and quotas.allow_list(None, 0) for _ in range(1000))
    assert quotas.may_hold_another(None, 1_000_000)


def test_one_address_takes_a_share_of_each_keyless_budget_only() -> None:
    quotas = Quotas(QuotaLimits(keyless_create_rate=8, keyless_create_burst=8, join_rate=8,
                                join_burst=8, list_rate=8, list_burst=8,
                                keyless_address_share=0.25))
    for budget in (CREATES, JOINS, LISTS):
        # a quarter of the burst, then a quarter of the rate (2 a second), per address
        assert [quotas.allow_address(budget, "10.0.0.1", 0) for _ in range(3)] == [
            True, True, False]
        assert quotas.allow_address(budget, "10.0.0.2", 0)  # another address: its own share
        assert not quotas.allow_address(budget, "10.0.0.1", 499)
        assert quotas.allow_address(budget, "10.0.0.1", 500)
    unshared = Quotas(QuotaLimits(keyless_address_share=0))
    assert all(unshared.allow_address(LISTS, "10.0.0.1", 0) for _ in range(1000))
