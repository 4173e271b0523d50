"""PrivacyAccountant charges read from the specs: memoized repeats are free."""

from __future__ import annotations

import numpy as np
import pytest

from ldpkit import GRR, BudgetExceededError, Device, PrivacyAccountant
from ldpkit.longitudinal import LOSUE


def test_a_year_of_daily_telemetry(tmp_path):
    """365 daily reports through a Device, with a few changes of value: the accountant
    charges epsilon_inf per distinct value, as the device's own privacy_spent says."""
    spec = LOSUE(epsilon_inf=1.0, epsilon_1=0.4, domain_size=12)
    device = Device(secret=bytes(32), path=tmp_path / "d.json")
    acc = PrivacyAccountant(budget=3.5)
    values = np.repeat([3, 5, 3, 7], [100, 100, 100, 65])  # 3 distinct values over a year
    for day, v in enumerate(values):
        acc.charge_report("me", spec, value=v)
        device.report(spec, [v], rng=day)
    assert acc.spent("me") == pytest.approx(3 * spec.epsilon_inf)
    assert device.privacy_spent(spec) == pytest.approx(spec.longitudinal_privacy_loss(3))
    assert device.privacy_spent(spec) <= acc.spent("me")
    # a fourth value would pass the budget: refused before anything is sent
    with pytest.raises(BudgetExceededError, match="epsilon must fit the remaining budget"):
        acc.charge_report("me", spec, value=9)
    assert acc.charge_report("me", spec, value=5) == pytest.approx(0.5)  # memoized: free


def test_fresh_reports_cost_epsilon_1_each():
    spec = LOSUE(epsilon_inf=1.0, epsilon_1=0.25, domain_size=12)
    acc = PrivacyAccountant(budget=1.0)
    for _ in range(4):
        acc.charge_report("me", spec, value=3, memoized=False)
    with pytest.raises(BudgetExceededError):
        acc.charge_report("me", spec, value=3, memoized=False)
    assert acc.report_cost(spec) == 1.0 and acc.report_cost(spec, memoized=False) == 0.25
    grr = GRR(epsilon=0.5, domain_size=4)
    assert acc.report_cost(grr) == acc.report_cost(grr, memoized=False) == 0.5
    with pytest.raises(TypeError, match="spec must be"):
        acc.report_cost("GRR")
    with pytest.raises(TypeError, match="memoized must be"):
        acc.report_cost(grr, memoized=1)
