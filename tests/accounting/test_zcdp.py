"""zCDP accounting: conversions against the paper 003 digest's worked numbers and
dp_accounting, additive composition in the ledger, and a rho budget."""

from __future__ import annotations

import math

import pytest

import dpcvx
from dpcvx.accounting.ledger import Ledger, PrivacyEvent, ZcdpAccountant
from dpcvx.accounting.zcdp import dp_to_zcdp, gaussian_to_zcdp, pure_to_zcdp, zcdp_to_dp


@pytest.mark.parametrize("rho,eps", [(0.1, 2.2460), (0.5, 5.2985), (1.0, 7.7861)])
def test_bs16_conversion_matches_the_digest(rho, eps):
    assert zcdp_to_dp(rho, 1e-5, "bs16") == pytest.approx(eps, abs=1e-4)
    assert zcdp_to_dp(rho, 1e-5, "bs16") == pytest.approx(
        rho + 2 * math.sqrt(rho * math.log(1e5)), rel=1e-15
    )


@pytest.mark.parametrize(
    "eps,rho", [(0.5, 0.005314), (1.0, 0.020820), (2.0, 0.080045), (5.0, 0.449623)]
)
def test_inverse_conversion_matches_the_digest(eps, rho):
    assert dp_to_zcdp(eps, 1e-5) == pytest.approx(rho, abs=1e-6)
    assert zcdp_to_dp(dp_to_zcdp(eps, 1e-5), 1e-5, "bs16") == pytest.approx(eps, rel=1e-12)


def test_rdp_conversion_is_dp_accountings_and_tighter():
    import dp_accounting
    from dp_accounting.rdp import RdpAccountant

    for rho in (0.01, 0.1, 1.0, 5.0):
        acc = RdpAccountant()
        acc.compose(dp_accounting.GaussianDpEvent(1 / math.sqrt(2 * rho)))
        assert zcdp_to_dp(rho, 1e-6, "rdp") <= acc.get_epsilon(1e-6) + 1e-9  # finer orders
        assert zcdp_to_dp(rho, 1e-6, "rdp") <= zcdp_to_dp(rho, 1e-6, "bs16")
        assert zcdp_to_dp(rho, 1e-6) == min(
            zcdp_to_dp(rho, 1e-6, "rdp"), zcdp_to_dp(rho, 1e-6, "bs16")
        )


def test_pure_and_gaussian_forms():
    assert pure_to_zcdp(1.0) == 0.5
    assert gaussian_to_zcdp(2.0) == 1 / 8
    assert PrivacyEvent(label="p", epsilon=0.4).implied_rho() == pytest.approx(0.08)
    assert PrivacyEvent(label="a", epsilon=0.4, delta=1e-6, kind="approx").implied_rho() is None


def test_zcdp_events_compose_additively_in_the_ledger():
    events = [PrivacyEvent.zcdp(f"step {t}", rho=0.01, delta=1e-5) for t in range(100)]
    ledger = Ledger(events=tuple(events))
    assert ledger.total_rho() == pytest.approx(1.0)
    total = ledger.total()
    assert total.delta == pytest.approx(1e-3)
    # rho = 1 at delta = 1e-3 beats basic composition of 100 events by far
    assert total.epsilon == pytest.approx(zcdp_to_dp(1.0, 1e-3), rel=1e-12)
    assert total.epsilon < ledger.basic_total().epsilon


def test_zcdp_event_validation():
    with pytest.raises(dpcvx.InvalidParameterError, match="not"):
        PrivacyEvent(label="x", epsilon=0.1, delta=1e-5, kind="zcdp", rho=1.0)
    with pytest.raises(dpcvx.InvalidParameterError, match="delta"):
        PrivacyEvent(label="x", epsilon=10.0, delta=0.0, kind="zcdp", rho=1.0)
    with pytest.raises(dpcvx.InvalidParameterError, match="rho"):
        PrivacyEvent(label="x", epsilon=1.0, rho=1.0)


def test_zcdp_accountant_budget_in_rho():
    acct = ZcdpAccountant(rho=0.5)
    acct.reserve(PrivacyEvent.zcdp("a", 0.2, 1e-6))
    acct.reserve(PrivacyEvent(label="pure", epsilon=0.6))  # 0.18-zCDP
    assert acct.spent_rho == pytest.approx(0.38)
    before = len(acct.ledger)
    with pytest.raises(dpcvx.PrivacyBudgetError):
        acct.reserve(PrivacyEvent.zcdp("b", 0.2, 1e-6))
    assert len(acct.ledger) == before
    with pytest.raises(dpcvx.InvalidParameterError, match="no zCDP form"):
        acct.reserve(PrivacyEvent(label="a", epsilon=0.1, delta=1e-6, kind="approx"))
    assert acct.can_afford(PrivacyEvent.zcdp("c", 0.1, 1e-6))


def test_reserve_all_is_all_or_nothing():
    acct = dpcvx.Accountant(1.0)
    acct.reserve(PrivacyEvent(label="first", epsilon=0.3))
    with pytest.raises(dpcvx.PrivacyBudgetError):
        acct.reserve_all([PrivacyEvent(label=f"s{i}", epsilon=0.2) for i in range(4)])
    assert len(acct.ledger) == 1 and acct.spent.epsilon == pytest.approx(0.3)
    acct.reserve_all([PrivacyEvent(label=f"s{i}", epsilon=0.2) for i in range(3)])
    assert len(acct.ledger) == 4
    z = ZcdpAccountant(0.1)
    with pytest.raises(dpcvx.PrivacyBudgetError):
        z.reserve_all([PrivacyEvent.zcdp(f"z{i}", 0.03, 1e-7) for i in range(4)])
    assert len(z.ledger) == 0
