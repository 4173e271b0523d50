"""The JavaScript client's set and key-value randomizers (clients/js/src/sets.js): their law.

Bit-exactness (the same integer weights, the same body for the same uniforms and 64-bit
words) is checked by ``tests/vectors/sets.json`` under ``node --test``. Here the reports the
client makes under node (seeded splitmix64 coins) are decoded by :mod:`ldpkit.sets` and the
unbiased estimators are z-tested against the truth of the simulated users, every variance
computed from the truth and the spec's exact probabilities:

- :class:`PaddingSampling` (GRR, OLH): the padded frequency of every real item and the
  length CDF the dummies estimate (Wang et al. 2018, section IV);
- :class:`PCKV` (UE, GRR): the padded frequency and the value sum of every key (PCKV
  section 4.3), and the means of the frequent keys (a ratio: z with the delta-method
  ``mean_variance``);
- :class:`PrivKV`: the frequency of every key and ``f * mean`` (the unbiased numerator
  of its mean, Ye et al. 2019, section IV);
- :class:`PrivSet`: the padded frequency of every real item and the dummies' length CDF
  (Wang et al., INFOCOM 2018, section IV), with Floyd's subsets and with the shuffle.

Each test also decodes the same reports with epsilon x 1.3 and requires that the z-test
then fails (|z| > 6): the check has power. The node tests skip without ``node`` except in
CI (see tests/test_js_client.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from _jshelpers import js_reports, needs_node
from ldpkit.io import reports_from_dict
from ldpkit.sets import PCKV, PaddingSampling, PrivKV, PrivSet, UserPairs, UserSets
from ldpkit.spec import Reports

VECTORS = Path(__file__).resolve().parent / "vectors" / "sets.json"

SEED = 20261207
N = 30_000


def _users_sets(d: int, ell: int, n: int, seed: int) -> list[list[int]]:
    """Sets skewed towards the low items, lengths 0 .. ell + 2 (some sampled down)."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, d + 1)
    weights /= weights.sum()
    sizes = rng.integers(0, ell + 3, size=n)
    return [rng.choice(d, size=int(s), replace=False, p=weights).tolist() for s in sizes]


def _users_pairs(d: int, ell: int, n: int, seed: int) -> list[list[list[float]]]:
    """Key-value users: the sets above, each key's value around its own mean (key k's values
    are centred on ``cos(k)``), on the grid k / 64 (exact in JSON and in JS)."""
    rng = np.random.default_rng(seed + 1)
    out = []
    for keys in _users_sets(d, ell, n, seed):
        centre = np.cos(np.array(keys, dtype=np.float64))
        vals = np.clip(np.round((centre + rng.uniform(-0.4, 0.4, len(keys))) * 64) / 64, -1, 1)
        out.append([[k, float(v)] for k, v in zip(keys, vals.tolist())])
    return out


def _padded_share(offsets: np.ndarray, items: np.ndarray, d: int, ell: int) -> np.ndarray:
    """Per item: (1/n) sum over its holders of min(1, ell / L) (padded frequency), over the
    d real items and the ell dummies (dummy d + j is reported by the users with L <= j)."""
    n = offsets.size - 1
    lengths = np.diff(offsets)
    weight = np.minimum(1.0, ell / np.maximum(lengths, 1))
    real = np.bincount(items, weights=np.repeat(weight, lengths), minlength=d) / n
    cdf = np.array([np.mean(lengths <= j) for j in range(ell)])
    return np.concatenate([real, cdf])


# --- PaddingSampling --------------------------------------------------------------------------
def _padding_z(spec: PaddingSampling, reports: Reports, sets: UserSets) -> float:
    """Largest |z| of the padded frequencies and the length CDF decoded under ``spec``."""
    est = spec.estimate(spec.aggregate(Reports(spec, **reports.arrays)))
    d, ell = spec.domain_size, spec.padding
    truth = _padded_share(sets.offsets, sets.items, d, ell)
    var = spec.variance(len(sets), truth)  # ell^2 x the oracle's at t / ell (Theorem 3)
    got = np.concatenate([est.frequencies, est.length_cdf])
    return float(np.max(np.abs(got - truth) / np.sqrt(var)))


@needs_node
@pytest.mark.parametrize("oracle", ["grr", "olh"])
def test_js_padding_sampling_is_unbiased(oracle: str) -> None:
    spec = PaddingSampling(epsilon=2.0, domain_size=8, padding=2, oracle=oracle)
    users = _users_sets(spec.domain_size, spec.padding, N, SEED)
    reports = js_reports(spec, values=users, seed=SEED)
    assert len(reports) == N
    sets = UserSets.from_lists(users)
    assert _padding_z(spec, reports, sets) <= 5.0
    wrong = spec.replace(epsilon=spec.epsilon * 1.3)
    assert _padding_z(wrong, reports, sets) > 6.0


# --- PCKV -------------------------------------------------------------------------------------
def _pckv_z(spec: PCKV, reports: Reports, pairs: UserPairs) -> tuple[float, float, float]:
    """Largest |z| of (frequencies, value sums, means of the keys held by >= 20%)."""
    est = spec.estimate(spec.aggregate(Reports(spec, **reports.arrays)))
    n, d, ell = len(pairs), spec.domain_size, spec.padding
    a, b, p = spec.a, spec.b, spec.p
    lengths = pairs.lengths
    sampled = np.repeat(1.0 / np.maximum(lengths, ell), lengths)  # P[a held pair is sampled]
    # (1/n) sum over holders of min(1, ell / L) (x value): the padded frequency and sum
    freq = ell * np.bincount(pairs.keys, weights=sampled, minlength=d) / n
    sums = ell * np.bincount(pairs.keys, weights=sampled * pairs.values, minlength=d) / n
    z_freq = (est.frequencies - freq) / np.sqrt(spec.frequency_variance(n, freq))
    # Var of n1 - n2 summed over users: P[entry non-zero] - E[entry]^2 (entries in {-1,0,1})
    c = a * (2 * p - 1)
    nonzero = n * b + (a - b) * np.bincount(pairs.keys, weights=sampled, minlength=d)
    mean_sq = np.bincount(pairs.keys, weights=(c * sampled * pairs.values) ** 2, minlength=d)
    var_sums = ell**2 * (nonzero - mean_sq) / (n * c) ** 2
    z_sums = (est.sums - sums) / np.sqrt(var_sums)
    frequent = freq >= 0.2
    target = sums[frequent] / freq[frequent]  # what the ratio D^ / S^ estimates
    z_means = (est.means[frequent] - target) / np.sqrt(est.mean_variance[frequent])
    return (
        float(np.max(np.abs(z_freq))),
        float(np.max(np.abs(z_sums))),
        float(np.max(np.abs(z_means))),
    )


@needs_node
@pytest.mark.parametrize("method", ["ue", "grr"])
def test_js_pckv_is_unbiased(method: str) -> None:
    spec = PCKV(epsilon=2.0, domain_size=6, padding=2, method=method)
    users = _users_pairs(spec.domain_size, spec.padding, N, SEED)
    reports = js_reports(spec, values=users, seed=SEED)
    assert len(reports) == N
    pairs = UserPairs.from_lists(users)
    z_freq, z_sums, z_means = _pckv_z(spec, reports, pairs)
    assert max(z_freq, z_sums, z_means) <= 5.0, (z_freq, z_sums, z_means)
    wrong = spec.replace(epsilon=spec.epsilon * 1.3)
    assert max(_pckv_z(wrong, reports, pairs)[:2]) > 6.0


# --- PrivKV -----------------------------------------------------------------------------------
def _privkv_z(spec: PrivKV, reports: Reports, pairs: UserPairs) -> tuple[float, float]:
    """Largest |z| of (frequencies, f * mean), conditionally on the reports per key."""
    stats = spec.aggregate(Reports(spec, **reports.arrays))
    est = spec.estimate(stats)
    d, p1, p2 = spec.domain_size, spec.p1, spec.p2
    freq, means = pairs.truth(d)
    nk = stats.sampled.astype(np.float64)
    ones = freq * p1 + (1 - freq) * (1 - p1)  # P[<1, s>] on a report of key k
    z_freq = (est.frequencies - freq) / np.sqrt(ones * (1 - ones) / (nk * (2 * p1 - 1) ** 2))
    # E[X] = p1 (2 p2 - 1) f m for X in {-1, 0, +1}: (c+ - c-) / (nk p1 (2 p2 - 1)) is unbiased
    c = p1 * (2 * p2 - 1)
    fm = (stats.positive - stats.negative) / (nk * c)
    var_fm = (ones - (c * freq * means) ** 2) / (nk * c**2)
    z_fm = (fm - freq * means) / np.sqrt(var_fm)
    # the estimate's mean is that numerator over its count (pulled towards 0, see PrivKV)
    raw = (stats.positive - stats.negative) / ((stats.positive + stats.negative) * (2 * p2 - 1))
    np.testing.assert_allclose(est.means, np.clip(raw, -1, 1))
    return float(np.max(np.abs(z_freq))), float(np.max(np.abs(z_fm)))


@needs_node
def test_js_privkv_is_unbiased() -> None:
    spec = PrivKV(epsilon=3.0, domain_size=6)
    users = _users_pairs(spec.domain_size, 2, N, SEED)
    reports = js_reports(spec, values=users, seed=SEED)
    assert len(reports) == N
    pairs = UserPairs.from_lists(users)
    assert max(_privkv_z(spec, reports, pairs)) <= 5.0
    wrong = spec.replace(epsilon=spec.epsilon * 1.3)
    assert max(_privkv_z(wrong, reports, pairs)) > 6.0


# --- PrivSet -----------------------------------------------------------------------------------
def _privset_z(spec: PrivSet, reports: Reports, sets: UserSets) -> float:
    """Largest |z| of the padded frequencies and the length CDF decoded under ``spec``."""
    est = spec.estimate(spec.aggregate(Reports(spec, **reports.arrays)))
    truth = _padded_share(sets.offsets, sets.items, spec.domain_size, spec.padding)
    # the mixture variance of one report (its q (1 - q) + t (p - q)(1 - p - q) bounds the
    # variance of the users' independent coins from above: a conservative z)
    var = spec.variance(len(sets), truth)
    got = np.concatenate([est.frequencies, est.length_cdf])
    return float(np.max(np.abs(got - truth) / np.sqrt(var)))


@needs_node
@pytest.mark.parametrize(
    "spec",
    [
        PrivSet(epsilon=2.0, domain_size=8, padding=2),  # Floyd's subsets
        PrivSet(epsilon=1.0, domain_size=20, padding=1, subset_size=14),  # a shuffle of [0, D)
    ],
    ids=["floyd", "shuffle"],
)
def test_js_privset_is_unbiased(spec: PrivSet) -> None:
    # 70% of the users hold item 0 alone: a padded frequency near 1, where a wrong
    # epsilon shows even for a large k (whose p - q is small)
    rest = _users_sets(spec.domain_size, spec.padding, N, SEED + 3)
    alone = np.random.default_rng(SEED + 4).random(N) < 0.7
    users = [[0] if a else s for a, s in zip(alone.tolist(), rest)]
    reports = js_reports(spec, values=users, seed=SEED)
    assert len(reports) == N
    sets = UserSets.from_lists(users)
    assert _privset_z(spec, reports, sets) <= 5.0
    wrong = spec.replace(epsilon=spec.epsilon * 1.3)
    assert _privset_z(wrong, reports, sets) > 6.0


_LAW_SCRIPT = """
import { PrivSet } from './src/index.js';
const out = [];
for (const [epsilon, d, ell] of JSON.parse(process.argv[1])) {
  try {
    const m = new PrivSet({ epsilon, domain_size: d, padding: ell });
    out.push([m.k, m.a.toString(), m.privacyLoss()]);
  } catch (e) {
    out.push(String(e.message));
  }
}
process.stdout.write(JSON.stringify(out));
"""


@needs_node
def test_js_privset_law_equals_python_over_a_grid() -> None:
    """The default k, the integer a of the branch coin and the loss equal Python's (240 specs)."""
    import subprocess

    from _jshelpers import CLIENT, NODE

    grid = [
        (eps, d, ell)
        for eps in (0.05, 0.3, 1.0, 2.0, 4.0, 8.0, 20.0, 40.0)
        for d in (2, 3, 7, 64, 500, 4000)
        for ell in (1, 2, 8, 32, 1024, 60000)
    ]
    done = subprocess.run(
        [NODE, "--input-type=module", "-e", _LAW_SCRIPT, json.dumps(grid)],
        cwd=CLIENT,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    got = json.loads(done.stdout)
    refused = 0
    for (eps, d, ell), js in zip(grid, got, strict=True):
        try:
            spec = PrivSet(epsilon=eps, domain_size=d, padding=ell)
        except ValueError as e:  # refused on both sides, for the same parameter
            assert isinstance(js, str), (eps, d, ell, js)
            assert str(e).split(" must")[0] == js.split(" must")[0], (str(e), js)
            refused += 1
            continue
        a = spec._law()[0]
        assert js == [spec.k, str(a), spec.privacy_loss()], (eps, d, ell)
    assert 0 < refused < len(grid) // 2


@needs_node
@pytest.mark.slow
@pytest.mark.parametrize(
    "spec",
    [
        PaddingSampling(epsilon=2.0, domain_size=8, padding=2),
        PCKV(epsilon=2.0, domain_size=6, padding=2),
        PCKV(epsilon=2.0, domain_size=6, padding=2, method="grr"),
        PrivSet(epsilon=2.0, domain_size=8, padding=2),
    ],
    ids=lambda s: f"{s.name}-{getattr(s, 'method', '')}",
)
def test_js_secure_coins_sets_are_unbiased(spec: Any) -> None:
    # the production path (crypto.getRandomValues, not reproducible): |z| <= 5.5 over the
    # ~10 estimates fails by chance with probability < 1e-6
    n = 10_000
    if isinstance(spec, PaddingSampling):
        users = _users_sets(spec.domain_size, spec.padding, n, SEED + 2)
        reports = js_reports(spec, values=users, seed=None)
        assert _padding_z(spec, reports, UserSets.from_lists(users)) <= 5.5
    elif isinstance(spec, PrivSet):
        users = _users_sets(spec.domain_size, spec.padding, n, SEED + 2)
        reports = js_reports(spec, values=users, seed=None)
        assert _privset_z(spec, reports, UserSets.from_lists(users)) <= 5.5
    else:
        users = _users_pairs(spec.domain_size, spec.padding, n, SEED + 2)
        reports = js_reports(spec, values=users, seed=None)
        assert max(_pckv_z(spec, reports, UserPairs.from_lists(users))[:2]) <= 5.5


def test_set_vector_bodies_decode_and_aggregate_in_python() -> None:
    cases = json.loads(VECTORS.read_text())
    assert {c["body"]["mechanism"]["mechanism"] for c in cases} == {
        "PaddingSampling",
        "PCKV",
        "PrivKV",
        "PrivSet",
    }
    for case in cases:
        reports = reports_from_dict(case["body"])
        assert reports.spec.aggregate(reports).n == len(case["values"])
