import math

import numpy as np
import pytest

from ldpkit import GRR, HRR, OLH, OUE, HadamardResponse, choose_oracle
from ldpkit.frequency.choose import oracle_candidates, report_bits


@pytest.mark.parametrize("eps", [0.25, 0.5, 1.0, 2.0, 3.0, 5.0])
def test_fo17_rule(eps):
    """GRR exactly when d < 3 e^eps + 2, else OUE; OLH when d bits are too many."""
    boundary = 3 * math.exp(eps) + 2
    for d in sorted(
        {2, 3, int(boundary) - 1, int(boundary), int(boundary) + 1, int(boundary) + 2, 4096}
    ):
        if d < 2:
            continue
        chosen = choose_oracle(eps, d)
        # at the boundary itself both variances are equal; away from it the rule is strict
        if abs(d - boundary) > 0.5:
            assert isinstance(chosen, GRR) == (d < boundary), (eps, d, chosen)
        if d > boundary + 0.5:
            assert isinstance(chosen, OUE)
            # OLH needs 64 + ceil(log2 g) bits; below that HR (ceil(log2(d + 1)) bits) or
            # GRR, whichever has the lower variance
            budget = d - 1
            if budget >= report_bits(OLH(epsilon=eps, domain_size=d)):
                expected = OLH
            else:
                grr, hr = (
                    GRR(epsilon=eps, domain_size=d),
                    HadamardResponse(epsilon=eps, domain_size=d),
                )
                fits_hr = report_bits(hr) <= budget
                expected = HadamardResponse if fits_hr and hr.variance(1) < grr.variance(1) else GRR
            assert isinstance(choose_oracle(eps, d, max_report_bits=budget), expected)


def test_chosen_has_minimal_variance_among_fitting():
    for eps in np.linspace(0.2, 6, 15):
        for d in (2, 5, 17, 100, 1000):
            best = choose_oracle(float(eps), d)
            for other in (
                GRR(epsilon=eps, domain_size=d),
                OUE(epsilon=eps, domain_size=d),
                OLH(epsilon=eps, domain_size=d),
                HadamardResponse(epsilon=eps, domain_size=d),
                HRR(epsilon=eps, domain_size=d),
            ):
                assert best.variance(1) <= other.variance(1) * (1 + 1e-12)


def test_report_budget():
    assert report_bits(GRR(epsilon=1.0, domain_size=1024)) == 10
    assert report_bits(OUE(epsilon=1.0, domain_size=1024)) == 1024
    assert report_bits(OLH(epsilon=1.0, domain_size=1024)) == 64 + 2
    assert report_bits(HadamardResponse(epsilon=1.0, domain_size=1024)) == 11  # K = 2048
    assert report_bits(HRR(epsilon=1.0, domain_size=1024)) == 10 + 1  # K = 1024, plus a sign
    # 20 bits: GRR (10 bits, Var* = (e + 1022) / (e - 1)^2 = 347) loses to HR (11 bits,
    # Var* = ((e + 1) / (e - 1))^2 = 4.68)
    assert isinstance(choose_oracle(1.0, 1024, max_report_bits=20), HadamardResponse)
    assert isinstance(choose_oracle(1.0, 1024, max_report_bits=10), GRR)
    with pytest.raises(ValueError, match="max_report_bits must be at least"):
        choose_oracle(4.0, 1 << 20, max_report_bits=1)
    with pytest.raises(ValueError, match="epsilon must be a finite number >= 1e-06"):
        choose_oracle(0.0, 10)


def test_hadamard_wins_a_tight_budget_and_explains_why():
    """The motivating case: d = 10,000, 16-bit reports, eps = 1: HR (14 bits, 4.68), not GRR."""
    choice = choose_oracle(1.0, 10_000, max_report_bits=16, explain=True)
    assert isinstance(choice.spec, HadamardResponse)
    table = {c.spec.name: c for c in choice.candidates}
    assert table["HadamardResponse"].report_bits == 14 and table["HRR"].report_bits == 15
    e = math.e
    # closed forms of Var* at f = 0: GRR (FO17 eq. 2) and HR ((e^eps + 1) / (e^eps - 1))^2
    assert table["GRR"].scaled_variance == pytest.approx((e + 10_000 - 2) / (e - 1) ** 2, rel=1e-12)
    assert table["HadamardResponse"].scaled_variance == pytest.approx(
        ((e + 1) / (e - 1)) ** 2, rel=1e-12
    )
    assert [c.fits for c in choice.candidates] == [True, False, False, True, True]
    assert "HadamardResponse" in str(choice) and "n*Var" in str(choice)
    assert oracle_candidates(1.0, 10_000, 16) == choice.candidates
