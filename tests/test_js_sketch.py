"""The JavaScript client's open-domain oracles (clients/js/src/sketch.js: CMS, HCMS, FLH).

Bit-exactness (BLAKE2b, item keys ``ldpkit.item/1``, row hashes, CMS thresholds, the
report for the same 64-bit words) is checked by the shared vectors
(``tests/vectors/sketch.json``, run by ``node --test``; ``tests/test_js_client.py`` checks
they are current and runs the node suite). Here: strings randomized by the client under
node (seeded words, and once crypto.getRandomValues), aggregated and estimated by ldpkit,
give unbiased frequencies (z-tests with the spec's variance, over the held strings and one
string nobody holds), and the same check fails when the server decodes with epsilon x 1.3.

Skipped without ``node`` except in CI (see tests/test_js_client.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from _jshelpers import js_reports, needs_node
from ldpkit.frequency import CMS, FLH, HCMS
from ldpkit.spec import Mechanism, Reports

pytestmark = needs_node

ITEMS = ["the", "zoë", "日本語", "🙂", "", "a longer string of words"]
COUNTS = np.array([14000, 3000, 1500, 1000, 400, 100])  # n = 20_000
CANDIDATES = [*ITEMS, "nobody holds this"]
TRUTH = np.append(COUNTS / COUNTS.sum(), 0.0)

# depth large enough that the heavy items' shared hash collisions (a fixed offset over
# families, sd ~ sqrt(sum f^2 / (depth width)), class Notes) stay well below the noise
SPECS = [
    CMS(epsilon=1.0, width=64, depth=1024),
    HCMS(epsilon=1.0, width=64, depth=1024),
    FLH(epsilon=1.0, num_hashes=1024),
]


def _values(counts: np.ndarray) -> list[str]:
    return [item for item, c in zip(ITEMS, counts.tolist()) if c for _ in range(c)]


def _max_z(spec: Mechanism, reports: Reports) -> float:
    # the same arrays decoded under ``spec`` (which may differ from the one that made them)
    decoded = Reports(spec, **reports.arrays)
    est = spec.estimate(spec.aggregate(decoded), candidates=CANDIDATES)  # type: ignore[attr-defined]
    assert est.labels == CANDIDATES
    z = (est.frequencies - TRUTH) / np.sqrt(est.variance)
    return float(np.max(np.abs(z)))


@pytest.mark.slow
@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_js_strings_give_unbiased_estimates(spec: Mechanism) -> None:
    reports = js_reports(spec, values=_values(COUNTS), seed=20261207)
    assert len(reports) == COUNTS.sum()
    assert _max_z(spec, reports) <= 5.0
    # the check has power: decoding with epsilon x 1.3 is caught
    wrong = spec.replace(epsilon=spec.epsilon * 1.3)  # type: ignore[attr-defined]
    assert _max_z(wrong, reports) > 6.0


@pytest.mark.slow
@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_js_secure_coins_give_unbiased_estimates(spec: Mechanism) -> None:
    # the production path (crypto.getRandomValues, not reproducible): |z| <= 5.5 over the 7
    # candidates fails by chance with probability < 3e-7 (plus the small collision offset)
    reports = js_reports(spec, values=_values(COUNTS // 2), seed=None)
    assert _max_z(spec, reports) <= 5.5
