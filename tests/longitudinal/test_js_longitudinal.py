"""The JS client's longitudinal randomizers (clients/js/src/longitudinal.js), seen from Python:
their reports decode here and give unbiased estimates (z-tests that fail for a wrong
epsilon_1); the shared vectors themselves are checked by
tests/test_js_client.py (current, node --test)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from _jshelpers import NODE, js_reports, needs_node
from ldpkit.io import reports_from_dict
from ldpkit.longitudinal import LGRR, LOLOHA, LOSUE, LOUE, LSOUE, LSUE
from ldpkit.spec import Mechanism, Reports

VECTORS = Path(__file__).resolve().parents[1] / "vectors"


def test_longitudinal_vector_bodies_decode_in_python() -> None:
    for case in json.loads((VECTORS / "longitudinal.json").read_text())["bodies"]:
        reports = reports_from_dict(case["body"])
        assert len(reports) == len(case["values"])


def _max_z(spec: Mechanism, reports: Reports, truth: np.ndarray) -> float:
    decoded = Reports(spec, **reports.arrays)
    est = spec.estimate(spec.aggregate(decoded))  # type: ignore[attr-defined]
    return float(np.max(np.abs((est.frequencies - truth) / np.sqrt(est.variance))))


SPECS = [
    LGRR(epsilon_inf=2.0, epsilon_1=1.0, domain_size=6),
    LOUE(epsilon_inf=2.0, epsilon_1=1.0, domain_size=6),
    LOSUE(epsilon_inf=2.0, epsilon_1=1.0, domain_size=6),
    LSUE(epsilon_inf=2.0, epsilon_1=1.0, domain_size=6),
    LSOUE(epsilon_inf=2.0, epsilon_1=1.0, domain_size=6),
    LOLOHA(epsilon_inf=2.0, epsilon_1=1.0, domain_size=6, hash_range=3),
]


@needs_node
@pytest.mark.slow
@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_js_longitudinal_reports_are_unbiased(spec: Mechanism) -> None:
    assert NODE is not None
    counts = np.array([14000, 3000, 1500, 1000, 400, 100])  # n = 20_000
    truth = counts / counts.sum()
    reports = js_reports(spec, counts=counts, seed=20261207)
    assert len(reports) == counts.sum()
    assert _max_z(spec, reports, truth) <= 5.0
    # power: decoding with a wrong epsilon_1 is caught (one report's law depends on
    # epsilon_inf only through epsilon_1's calibration; the permanent law's own z-test
    # against a wrong epsilon_inf is in test_device_budget.py)
    assert _max_z(spec.replace(epsilon=0.7), reports, truth) > 6.0
