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
from ldpkit.longitudinal import LGRR, LOLOHA, LOSUE, LOUE, LSOUE, LSUE, DBitFlipPM, OneBitMean
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


def _dbitflip_z(spec: DBitFlipPM, reports: Reports, truth: np.ndarray, read: DBitFlipPM) -> float:
    """Max |z| of the frequencies estimated as ``read`` would (its p, q), variance of ``spec``."""
    stats = spec.aggregate(Reports(spec, **reports.arrays))
    scale = spec.domain_size / (stats.n * spec.sampled_bits)
    freq = scale * (stats.ones - read.q * stats.sampled) / (read.p - read.q)
    return float(np.max(np.abs((freq - truth) / np.sqrt(spec.variance(stats.n, truth)))))


@needs_node
@pytest.mark.slow
@pytest.mark.parametrize("d", [1, 3])
def test_js_dbitflip_reports_are_unbiased(d: int) -> None:
    spec = DBitFlipPM(epsilon=2.0, domain_size=8, sampled_bits=d)
    counts = np.array([16000, 8000, 6000, 4000, 3000, 1500, 1000, 500])  # n = 40_000
    truth = counts / counts.sum()
    reports = js_reports(spec, counts=counts, seed=2017 + d)
    assert len(reports) == counts.sum()
    assert _dbitflip_z(spec, reports, truth, spec) <= 5.0
    # power: the same reports read with a wrong epsilon's p and q
    assert _dbitflip_z(spec, reports, truth, spec.replace(epsilon=1.6)) > 6.0


@needs_node
@pytest.mark.slow
def test_js_onebitmean_reports_are_unbiased() -> None:
    spec = OneBitMean(epsilon=1.0, low=0.0, high=100.0, points=16)
    values = np.random.default_rng(0).uniform(60.0, 100.0, 40_000)
    reports = js_reports(spec, values=values.tolist(), seed=20171)
    est = spec.estimate(spec.aggregate(Reports(spec, **reports.arrays)))
    sd = np.sqrt(spec.variance_at(values.size, values))
    assert abs(est.mean - values.mean()) < 5 * sd
    # power: the reports mirrored (the two cells' probabilities swapped) miss the mean
    minus, plus = spec.report_values()
    mirrored = np.where(np.asarray(reports.values) == plus, minus, plus)
    swapped = spec.estimate(spec.aggregate(Reports(spec, values=mirrored)))
    assert abs(swapped.mean - values.mean()) > 6 * sd
