"""The JavaScript client's multi-attribute randomizers (clients/js/src/multidim.js): their law.

Bit-exactness (the same body for the same uniforms and 64-bit words) is checked by
``tests/vectors/multidim.json`` under ``node --test``. Here the reports the client makes
under node (seeded splitmix64 coins) are decoded by :mod:`ldpkit.multidim`, and the
unbiased estimates are z-tested against the truth of the simulated users (per-attribute
frequencies, joint marginals (CALM, FullDomain, Fourier), the plain grids' cell frequencies, the group shares,
the means of AttributeSampling, DuchiMean and LaplaceMean), each with the spec's own
variance; decoded at a wrong epsilon (x 1.3; x 0.5 for the tuples without OLH and the
means) the same z-test fails (|z| > 6).
And the path of a web page: clients/js fetches a CALM spec from a live collector on
127.0.0.1, randomizes tuples and posts them; ``?marginal=0,1`` answers the true table.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import numpy as np
import pytest

from _jshelpers import js_reports, needs_node, send
from ldpkit.multidim import (
    CALM,
    HDG,
    RSFD,
    SMP,
    SPL,
    TDG,
    AttributeSampling,
    DuchiMean,
    Fourier,
    FullDomain,
    GroupMean,
    LaplaceMean,
    UniformGrid,
)
from ldpkit.service import create_app
from ldpkit.spec import Mechanism, Reports

SEED = 20261231
N = 30_000
SIZES = (3, 4, 2)


def _tuples(n: int, seed: int) -> np.ndarray:
    """Correlated categorical tuples over SIZES."""
    gen = np.random.default_rng(seed)
    a = gen.choice(3, size=n, p=[0.5, 0.3, 0.2])
    b = (a + gen.choice(4, size=n, p=[0.55, 0.25, 0.15, 0.05])) % 4
    c = (gen.random(n) < 0.3 + 0.2 * a).astype(np.int64)
    return np.stack([a, b, c], axis=1)


def _z_categorical(spec: Mechanism, reports: Reports, x: np.ndarray) -> float:
    """Largest |z| of every per-attribute frequency (or the (0, 1) marginal's cells)."""
    est = spec.estimate(spec.aggregate(Reports(spec, **reports.arrays)))
    n = x.shape[0]
    if isinstance(spec, (CALM, FullDomain, Fourier)):
        table = est.marginal((0, 1))
        truth = np.zeros((SIZES[0], SIZES[1]))
        np.add.at(truth, (x[:, 0], x[:, 1]), 1.0 / n)
        return float(np.max(np.abs(table.table - truth) / table.std_error))
    z = []
    for j, e in enumerate(est):
        truth = np.bincount(x[:, j], minlength=SIZES[j]) / n
        z.append(np.abs(e.frequencies - truth) / e.std_error)
    return float(np.max(np.concatenate(z)))


CATEGORICAL = [
    SPL(epsilon=2.0, domain_sizes=SIZES),
    SMP(epsilon=2.0, domain_sizes=SIZES),
    RSFD(epsilon=2.0, domain_sizes=SIZES),
    RSFD(epsilon=2.0, domain_sizes=SIZES, protocol="oue-z"),
    CALM(epsilon=2.0, domain_sizes=SIZES),
    CALM(epsilon=2.0, domain_sizes=SIZES, oracle="grr"),
    FullDomain(epsilon=2.0, domain_sizes=SIZES),
    FullDomain(epsilon=2.0, domain_sizes=SIZES, oracle="olh"),
    Fourier(epsilon=2.0, domain_sizes=SIZES),
]


@needs_node
@pytest.mark.parametrize("spec", CATEGORICAL, ids=repr)
def test_js_categorical_tuples_are_unbiased(spec: Mechanism) -> None:
    x = _tuples(N, SEED)
    reports = js_reports(spec, values=x.tolist(), seed=SEED)
    assert len(reports) == N
    assert _z_categorical(spec, reports, x) <= 5.0
    # budget splitting and fake data leave little signal per cell: half the epsilon (OLH's
    # hash range shrinks with epsilon, so its reports are decoded at 1.3 times it instead)
    olh = getattr(spec, "oracle", "") == "olh"
    wrong = spec.replace(epsilon=spec.epsilon * (1.3 if olh else 0.5))
    assert _z_categorical(wrong, reports, x) > 6.0


def _z_grids(spec: Any, reports: Reports, x: np.ndarray) -> float:
    """Largest |z| of every plain grid's cell frequencies (before post-processing)."""
    stats = spec.aggregate(Reports(spec, **reports.arrays))
    z = []
    for m, (freq, var) in enumerate(spec.plain_grids(stats)):
        shape = spec.grid_shape(m)
        cells = spec._cell(x, spec.grids[m], shape)
        truth = np.bincount(cells, minlength=int(np.prod(shape))) / x.shape[0]
        z.append(np.abs(np.ravel(freq) - truth) / np.sqrt(np.ravel(var)))
    return float(np.max(np.concatenate(z)))


GRIDS = [
    HDG(epsilon=2.0, low=(0.0, 0.0, 0.0), high=(1.0, 24.0, 120.0), g1=8, g2=4),
    TDG(epsilon=2.0, low=(0.0, 0.0), high=(24.0, 120.0), g2=4),
    UniformGrid(epsilon=2.0, low=(0.0, 0.0), high=(1.0, 1.0), g=4),
]


@needs_node
@pytest.mark.parametrize("spec", GRIDS, ids=repr)
def test_js_grid_cells_are_unbiased(spec: Any) -> None:
    gen = np.random.default_rng(SEED)
    lo, hi = np.asarray(spec.low), np.asarray(spec.high)
    u = gen.beta(2.0, 5.0, size=(N, lo.size))
    u[:, -1] = np.clip(0.5 * u[:, 0] + 0.5 * gen.random(N), 0.0, 1.0)  # correlated
    x = lo + (hi - lo) * u
    reports = js_reports(spec, values=x.tolist(), seed=SEED)
    assert _z_grids(spec, reports, x) <= 5.0
    wrong = spec.replace(epsilon=spec.epsilon * 1.3)
    assert _z_grids(wrong, reports, x) > 6.0


def _z_groups(spec: GroupMean, reports: Reports, rows: np.ndarray) -> float:
    est = spec.estimate(spec.aggregate(Reports(spec, **reports.arrays)))
    groups = rows[:, 0].astype(np.int64)
    shares = np.bincount(groups, minlength=spec.domain_size) / rows.shape[0]
    means = np.bincount(groups, weights=rows[:, 1], minlength=spec.domain_size)
    means = means / np.bincount(groups, minlength=spec.domain_size)
    z_share = np.abs(est.shares - shares) / np.sqrt(est.share_variance)
    z_mean = np.abs(est.means - means) / est.std_error
    return float(max(z_share.max(), z_mean.max()))


@needs_node
@pytest.mark.parametrize("oracle", ["grr", "olh"])
def test_js_group_means_are_unbiased(oracle: str) -> None:
    spec = GroupMean(epsilon=2.0, domain_size=3, low=-30.0, high=120.0, oracle=oracle)
    gen = np.random.default_rng(SEED)
    groups = gen.choice(3, size=N, p=[0.5, 0.3, 0.2])
    values = np.clip(20.0 * groups + gen.normal(10.0, 15.0, N), -30.0, 120.0)
    rows = np.stack([groups.astype(np.float64), values], axis=1)
    reports = js_reports(spec, values=[[int(g), float(v)] for g, v in rows.tolist()], seed=SEED)
    assert _z_groups(spec, reports, rows) <= 5.0
    wrong = spec.replace(epsilon=spec.epsilon * 1.3)
    assert _z_groups(wrong, reports, rows) > 6.0


def _z_sampled(spec: AttributeSampling, reports: Reports, x: np.ndarray) -> float:
    """Largest |z| of every numerical mean and categorical frequency."""
    est = spec.estimate(spec.aggregate(Reports(spec, **reports.arrays)))
    dn = spec.numerical
    z = [np.abs(est.means - x[:, :dn].mean(axis=0)) / est.std_error]
    for j, e in enumerate(est.categorical):
        truth = np.bincount(x[:, dn + j].astype(np.int64), minlength=spec.domain_sizes[j])
        z.append(np.abs(e.frequencies - truth / x.shape[0]) / e.std_error)
    return float(np.max(np.concatenate(z)))


SAMPLED = [
    AttributeSampling(epsilon=2.0, low=(0.0, -5.0), high=(1.0, 5.0), domain_sizes=(3,)),
    AttributeSampling(
        epsilon=6.0,
        low=(0.0, 0.0),
        high=(24.0, 120.0),
        domain_sizes=(4,),
        mechanism="pm",
        sampled=2,
    ),
]


@needs_node
@pytest.mark.parametrize("spec", SAMPLED, ids=repr)
def test_js_attribute_sampling_is_unbiased(spec: AttributeSampling) -> None:
    gen = np.random.default_rng(SEED)
    lo, hi = np.asarray(spec.low), np.asarray(spec.high)
    x = lo + (hi - lo) * gen.beta(2.0, 5.0, size=(N, lo.size))
    items = gen.choice(
        spec.domain_sizes[0],
        size=N,
        p=np.linspace(1, 2, spec.domain_sizes[0]) / np.linspace(1, 2, spec.domain_sizes[0]).sum(),
    )
    rows = [[*r, int(c)] for r, c in zip(x.tolist(), items.tolist(), strict=True)]
    reports = js_reports(spec, values=rows, seed=SEED)
    assert len(reports) == N
    full = np.column_stack([x, items])
    assert _z_sampled(spec, reports, full) <= 5.0
    wrong = spec.replace(epsilon=spec.epsilon * 0.5)
    assert _z_sampled(wrong, reports, full) > 6.0


BOXES = [
    DuchiMean(epsilon=2.0, low=(0.0, -5.0, 10.0), high=(1.0, 5.0, 100.0)),
    DuchiMean(epsilon=1.0, low=(0.0, 0.0), high=(24.0, 120.0)),
    # the estimate depends on epsilon only through the grid G = ceil(2 epsilon / d): 4 here
    LaplaceMean(epsilon=4.0, low=(0.0, 0.0), high=(24.0, 120.0)),
]


@needs_node
@pytest.mark.parametrize("spec", BOXES, ids=repr)
def test_js_box_means_are_unbiased(spec: DuchiMean | LaplaceMean) -> None:
    gen = np.random.default_rng(SEED)
    lo, hi = np.asarray(spec.low), np.asarray(spec.high)
    x = lo + (hi - lo) * gen.beta(2.0, 5.0, size=(N, lo.size))
    reports = js_reports(spec, values=x.tolist(), seed=SEED)
    assert len(reports) == N

    def z(s: DuchiMean | LaplaceMean) -> float:
        est = s.estimate(s.aggregate(Reports(s, **reports.arrays)))
        return float(np.max(np.abs(est.means - x.mean(axis=0)) / est.std_error))

    assert z(spec) <= 5.0
    # read at a wrong epsilon, either side, the same reports miss the true means
    assert z(spec.replace(epsilon=spec.epsilon * 0.5)) > 6.0
    assert z(spec.replace(epsilon=spec.epsilon * 2.0)) > 6.0


@needs_node
def test_js_tuples_to_a_live_collector_give_the_marginal(tmp_path: Any, serve_app: Any) -> None:
    """Send tuples from clients/js to a live CALM collection; its 2-way marginal is the truth."""
    spec = CALM(epsilon=3.0, domain_sizes=SIZES, oracle="grr")
    url = serve_app(create_app({"flights": spec}, f"sqlite:///{tmp_path / 'c.db'}"))
    x = _tuples(8000, SEED + 1)
    arg = {"url": url, "collection": "flights", "values": x.tolist(), "batch": 2000}
    assert send(arg) == {"stored": 8000}
    with urllib.request.urlopen(
        f"{url}/v1/collections/flights/estimate?marginal=0,1", timeout=60
    ) as response:
        body = json.loads(response.read())
    assert body["kind"] == "multidim" and body["n"] == 8000 and body["batches"] == 4
    answer = body["multidim"]["marginal"]
    truth = np.zeros((3, 4))
    np.add.at(truth, (x[:, 0], x[:, 1]), 1.0 / len(x))
    z = (np.array(answer["estimates"]) - truth.ravel()) / np.array(answer["std_errors"])
    assert float(np.max(np.abs(z))) <= 5.0
    assert all(
        lo <= e <= hi for lo, e, hi in zip(answer["ci_low"], answer["estimates"], answer["ci_high"])
    )
