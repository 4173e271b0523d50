"""The JavaScript client's categorical randomizers (clients/js/src/mechanisms.js): their law.

Bit-exactness (the same integer weights ``rr_weights`` and OUE thresholds, the same report
for the same 64-bit words) is checked by the shared vectors (``tests/vectors/coins.json``,
``unary.json``, ``bodies.json``, run by ``node --test``). Here the *law* of what the client
sends under node with seeded words: per input item, the histogram of its reports against
the Python spec's exact ``transition_matrix()`` (chi-square over all inputs' cells,
alpha = 1e-6); the same reports are rejected by the law of the spec at epsilon x 1.3.
OLH's output (seed, y) is not enumerable: y is tested against ``transition_matrix(seed)``,
grouped by the hashed value ``h_seed(v)`` that determines its row.

Skipped without ``node`` except in CI (see tests/test_js_client.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from _jshelpers import chi_square_p, js_reports, needs_node
from ldpkit.frequency import GRR, OLH, OUE, HadamardResponse
from ldpkit.spec import Reports

pytestmark = needs_node

ALPHA = 1e-6
PER_INPUT = 20_000


def law_p_value(spec: Any, reports: Reports, inputs: np.ndarray) -> float:
    """Chi-square p-value of the reports given their inputs under ``spec``'s exact law."""
    points = np.unique(inputs)
    if isinstance(spec, OLH):
        g = spec.range_size
        seeds = np.asarray(reports.seeds, dtype=np.uint64)
        y = np.asarray(reports.values, dtype=np.int64)
        hashed = spec.hash_items(seeds, inputs)
        observed, expected = [], []
        for v in points:
            for x in range(g):
                rows = np.flatnonzero((inputs == v) & (hashed == x))
                if rows.size == 0:
                    continue
                # row v of transition_matrix(seed) depends on the seed only through h_seed(v)
                law = spec.transition_matrix(seed=int(seeds[rows[0]]))[int(v)]
                observed.append(np.bincount(y[rows], minlength=g))
                expected.append(rows.size * law)
        return chi_square_p(np.array(observed), np.array(expected))
    matrix = spec.transition_matrix()
    index = spec.output_index(Reports(spec, **reports.arrays))
    observed = np.array(
        [np.bincount(index[inputs == v], minlength=matrix.shape[1]) for v in points]
    )
    expected = np.array([np.sum(inputs == v) * matrix[int(v)] for v in points])
    return chi_square_p(observed, expected)


SPECS = [
    GRR(epsilon=1.0, domain_size=6),
    OUE(epsilon=1.0, domain_size=4),
    OLH(epsilon=1.0, domain_size=6),
    HadamardResponse(epsilon=1.0, domain_size=6),
    pytest.param(GRR(epsilon=0.25, domain_size=3), marks=pytest.mark.slow),
    pytest.param(HadamardResponse(epsilon=2.5, domain_size=5), marks=pytest.mark.slow),
    pytest.param(OUE(epsilon=2.0, domain_size=3), marks=pytest.mark.slow),
]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"{s.name}-{s.epsilon:g}")
def test_js_categorical_law_matches_transition_matrix(spec: Any) -> None:
    d = spec.domain_size
    points = sorted({0, d // 2, d - 1})
    inputs = np.repeat(points, PER_INPUT)
    reports = js_reports(spec, values=inputs.tolist(), seed=20261125)
    assert len(reports) == inputs.size
    p_value = law_p_value(spec, reports, inputs)
    assert p_value > ALPHA, f"{spec.name}: the client's law differs from Python's (p={p_value})"
    # the test has power: the law at epsilon x 1.3 is rejected for the same reports
    wrong = spec.replace(epsilon=spec.epsilon * 1.3)
    wrong_p = law_p_value(wrong, Reports(wrong, **reports.arrays), inputs)
    assert wrong_p < ALPHA, f"{spec.name}: epsilon x 1.3 not rejected (p={wrong_p})"
