import math

import numpy as np
import pytest

from ldpkit import GRR, OLH, OUE, choose_oracle
from ldpkit.frequency.choose import report_bits


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
            # OLH needs 64 + ceil(log2 g) bits; below that only GRR fits
            expected = OLH if d - 1 >= report_bits(OLH(epsilon=eps, domain_size=d)) else GRR
            assert isinstance(choose_oracle(eps, d, max_report_bits=d - 1), expected)


def test_chosen_has_minimal_variance_among_fitting():
    for eps in np.linspace(0.2, 6, 15):
        for d in (2, 5, 17, 100, 1000):
            best = choose_oracle(float(eps), d)
            for other in (
                GRR(epsilon=eps, domain_size=d),
                OUE(epsilon=eps, domain_size=d),
                OLH(epsilon=eps, domain_size=d),
            ):
                assert best.variance(1) <= other.variance(1) * (1 + 1e-12)


def test_report_budget():
    assert report_bits(GRR(epsilon=1.0, domain_size=1024)) == 10
    assert report_bits(OUE(epsilon=1.0, domain_size=1024)) == 1024
    assert report_bits(OLH(epsilon=1.0, domain_size=1024)) == 64 + 2
    assert isinstance(choose_oracle(1.0, 1024, max_report_bits=20), GRR)
    with pytest.raises(ValueError, match="max_report_bits must be at least"):
        choose_oracle(4.0, 1 << 20, max_report_bits=1)
    with pytest.raises(ValueError, match="epsilon must be a finite number >= 1e-06"):
        choose_oracle(0.0, 10)
