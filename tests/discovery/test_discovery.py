"""ldpkit.discovery: PEM and TreeHist, their per-level estimates and intervals."""

from __future__ import annotations

import numpy as np
import pytest

from _discoveryhelpers import planted_population
from ldpkit import PEM, TreeHist
from ldpkit._exact import rr_probabilities
from ldpkit.discovery import HeavyHitters
from ldpkit.discovery._search import estimate_level
from ldpkit.discovery._strings import (
    decode_symbols,
    empty_key,
    encode_strings,
    extend_keys,
    family_seeds,
    hash_keys,
)

# --- strings to symbols ------------------------------------------------------------------


def test_encoding_cuts_at_character_boundaries_and_pads():
    grid = encode_strings(["héllo", "aé", "€€", "ab", ""], 2, None)
    assert grid.tolist() == [[104, 0], [97, 0], [0, 0], [97, 98], [0, 0]]
    grid = encode_strings(["héllo", "€€x"], 3, None)
    assert grid.tolist() == [[104, 195, 169], [226, 130, 172]]
    assert decode_symbols(grid[1], None) == "€"
    assert encode_strings([b"ab", "ab"], 3, None).tolist() == [[97, 98, 0]] * 2
    assert encode_strings(["ab\x00cd"], 5, None).tolist() == [[97, 98, 0, 0, 0]]  # NUL ends
    assert encode_strings(["a\x00b"], 3, "ab").tolist() == [[1, 0, 0]]


def test_encoding_with_an_alphabet():
    grid = encode_strings(np.array(["ba", "abcab"]), 4, "abc")
    assert grid.tolist() == [[2, 1, 0, 0], [1, 2, 3, 1]]
    assert decode_symbols(grid[1], "abc") == "abca"
    with pytest.raises(ValueError, match="values must use only"):
        encode_strings(["abz"], 4, "abc")


@pytest.mark.parametrize("bad", [[1, 2], "abc", np.zeros(3), [None]])
def test_encoding_refuses_non_strings(bad):
    with pytest.raises(TypeError, match="values must be"):
        PEM(epsilon=1.0, max_length=4).randomize(bad, rng=0)


def test_spec_validation_messages():
    with pytest.raises(ValueError, match="max_length must be"):
        PEM(epsilon=1.0, max_length=0)
    with pytest.raises(ValueError, match="control must be"):
        PEM(epsilon=1.0, control="bonferroni")
    with pytest.raises(ValueError, match="alphabet must be"):
        PEM(epsilon=1.0, alphabet="aa")
    with pytest.raises(ValueError, match="threshold must be"):
        TreeHist(epsilon=1.0, threshold=0.0)


def test_report_law_is_exact_grr():
    spec = PEM(epsilon=2.0, max_length=3)
    p, q = rr_probabilities(2.0, spec.range_size - 1)
    assert (spec.p, spec.q) == (p, q)
    assert spec.privacy_loss() <= 2.0 and spec.privacy_loss() == pytest.approx(2.0, abs=1e-12)


@pytest.mark.parametrize("cls", [PEM, TreeHist])
def test_report_law_given_group_and_hash(cls):
    """Given (group, hash index), y is GRR over [g] centred on h(prefix): the offset
    (y - h) mod g is 0 w.p. p and each other value w.p. q; rejected at epsilon x 1.3."""
    from ldpkit.testing import chisquare_gof

    spec = cls(epsilon=1.5, max_length=3, hash_range=6, hash_functions=4)
    values = ["héllo"] * 60_000
    symbols = encode_strings(values[:1], 3, None)[0]
    keys, key = [], empty_key(1)
    for s in symbols:
        key = extend_keys(key, np.array([s]))
        keys.append(key[0])

    def offsets(mech, seed):
        r = mech.randomize(values, rng=seed)
        groups, hashes = r.groups.astype(np.int64), r.hashes.astype(np.int64)
        seeds = np.stack([family_seeds(level, 4) for level in range(3)])[groups, hashes]
        h = hash_keys(np.array(keys, dtype=np.uint64)[groups], seeds, 6)
        return np.bincount((r.values.astype(np.int64) - h) % 6, minlength=6)

    law = np.array([spec.p] + [spec.q] * 5)
    assert chisquare_gof(offsets(spec, 1), law) > 1e-6
    assert chisquare_gof(offsets(spec.replace(epsilon=1.5 * 1.3), 2), law) < 1e-6


def test_a_device_reports_the_hash_of_its_own_prefix():
    # at a huge epsilon the GRR keeps y = h_{l,j}(prefix): check against the server's keys
    spec = PEM(epsilon=38.0, max_length=3, hash_range=1024, hash_functions=8)
    values = ["abc", "ab", "b", "zzzz"] * 50
    reports = spec.randomize(values, rng=1)
    for i, text in enumerate(values):
        level, j, y = (int(reports.groups[i]), int(reports.hashes[i]), int(reports.values[i]))
        key = empty_key(1)
        for s in encode_strings([text], 3, None)[0, : level + 1]:
            key = extend_keys(key, np.array([s]))
        assert hash_keys(key, family_seeds(level, 8)[j], 1024)[0] == y


# --- the per-level estimate: unbiased, with the documented variance -------------------------

_PLANTED = {"ant": 0.25, "and": 0.15, "bee": 0.1, "cat": 0.05}


def _population(n: int, rng: np.random.Generator) -> np.ndarray:
    return planted_population(n, rng, _PLANTED)


def _level_z(spec, stats, values, level: int, prefixes: list[str]) -> np.ndarray:
    keys = []
    for text in prefixes:
        key = empty_key(1)
        for s in encode_strings([text], spec.max_length, None)[0, : level + 1]:
            key = extend_keys(key, np.array([s]))
        keys.append(key[0])
    f, std, _ = estimate_level(
        spec, stats.counts[level], np.array(keys, dtype=np.uint64), level, stats.n
    )
    cut = [v.encode()[: level + 1] for v in values]
    truth = np.array([np.mean([c == t.encode()[: level + 1] for c in cut]) for t in prefixes])
    return (f - truth) / std


def _z_scores(spec_for_estimate) -> np.ndarray:
    rng = np.random.default_rng(7)
    values = _population(120_000, rng)
    spec = PEM(epsilon=2.0, max_length=3, hash_range=8, hash_functions=64)
    zs = []
    for seed in range(3):
        stats = spec.aggregate(spec.randomize(values, rng=seed))
        for level, prefixes in enumerate(
            (["a", "b", "c", "j"], ["an", "be", "ca"], list(_PLANTED))
        ):
            zs.append(_level_z(spec_for_estimate(spec), stats, values, level, prefixes))
    return np.concatenate(zs)


def test_level_estimates_are_unbiased_with_the_documented_variance():
    z = _z_scores(lambda s: s)
    assert np.all(np.abs(z) <= 5.0), z
    assert 0.2 < float(np.mean(z**2)) < 2.5, z  # the variance is neither far too small nor large


def test_level_check_fails_for_a_wrong_epsilon():
    z = _z_scores(lambda s: s.replace(epsilon=1.4))  # same g and H, wrong p
    assert np.max(np.abs(z)) > 6.0


def test_uniform_table_gives_zero_and_the_null_variance_exactly():
    spec = PEM(epsilon=1.0, max_length=2, hash_range=4, hash_functions=16)
    table = np.full((16, 4), 25, dtype=np.int64)  # n_l = 1600, every y equally often
    keys = extend_keys(empty_key(5), np.arange(5))
    f, std, std0 = estimate_level(spec, table, keys, 0, 3200)
    assert np.all(f == 0.0)
    gap = spec.p - 0.25
    null = 0.25 * 0.75 / (1600 * gap * gap)
    family = 1.0 * min(1.0, 3.0 * null**0.5) / (3 * 16)
    assert np.allclose(std0**2, null + family, rtol=1e-12)
    assert np.allclose(std**2, null + family, rtol=1e-12)  # f = 0: no sampling term


# --- discovery ----------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [PEM, TreeHist])
def test_recovers_planted_heavy_hitters(cls):
    values = _population(60_000, np.random.default_rng(3))
    spec = cls(epsilon=4.0, max_length=4, top_k=4)
    hh = spec.run(values, rng=5)
    assert isinstance(hh, HeavyHitters)
    assert hh.items == tuple(_PLANTED)
    truth = np.array(list(_PLANTED.values()))
    assert np.all(np.abs(hh.frequencies - truth) <= 6 * hh.std_error + 0.01)
    frame = hh.to_frame()
    assert list(frame["item"]) == list(hh.items) and set(frame) >= {"ci_low", "ci_high"}
    assert len(hh.candidates_per_level) == 4 and hh.tested == sum(hh.candidates_per_level)


def test_stats_are_mergeable_and_independent_of_n():
    spec = PEM(epsilon=4.0, max_length=4, top_k=4)
    values = _population(20_000, np.random.default_rng(4))
    a = spec.aggregate(spec.randomize(values[:5000], rng=1))
    b = spec.aggregate(spec.randomize(values[5000:], rng=2))
    merged = a + b
    assert merged.n == 20_000 and merged.counts.shape == a.counts.shape
    assert merged.counts.shape == (4, spec.family_size, spec.range_size)
    assert spec.estimate(merged).items == tuple(_PLANTED)


def test_longer_strings_count_under_their_prefix():
    values = ["international"] * 7000 + ["internet"] * 3000 + ["x"] * 1000
    hh = PEM(epsilon=8.0, max_length=6, top_k=2).run(values, rng=0)
    assert hh.items == ("intern", "x")
    assert abs(hh.frequencies[0] - 10 / 11) <= 6 * hh.std_error[0]


def test_alphabet_spec_runs_end_to_end():
    rng = np.random.default_rng(2)
    values = np.array(["abba", "cab", "b"], dtype=object)[rng.choice(3, 30_000, p=[0.5, 0.3, 0.2])]
    hh = TreeHist(epsilon=3.0, max_length=4, top_k=3, alphabet="abc").run(values, rng=1)
    assert hh.items == ("abba", "cab", "b")


def test_plot_draws_bars():
    import matplotlib

    matplotlib.use("Agg")
    values = _population(20_000, np.random.default_rng(5))
    hh = PEM(epsilon=4.0, max_length=4, top_k=4).run(values, rng=0)
    ax = hh.plot()
    assert len(ax.patches) == len(hh.items)


# --- error control and interval coverage ---------------------------------------------------


def _truth(values: np.ndarray, length: int) -> dict[str, float]:
    cut = [v.encode()[:length].decode() for v in values]
    items, counts = np.unique(cut, return_counts=True)
    return dict(zip(items.tolist(), (counts / len(values)).tolist()))


@pytest.mark.parametrize("control", ["fwer", "fdr", None])
def test_interval_coverage(control):
    """Coverage over 30 runs (measured: see docs/results/heavy_hitters_discovery.md)."""
    values = _population(30_000, np.random.default_rng(11))
    truth = _truth(values, 4)
    spec = PEM(epsilon=3.0, max_length=4, top_k=6, control=control)
    runs, all_covered, covered, total, false_items = 30, 0, 0, 0, 0
    covered_planted = total_planted = 0
    for seed in range(runs):
        hh = spec.run(values, rng=100 + seed)
        lo, hi = hh.confidence_interval()
        f = np.array([truth.get(s, 0.0) for s in hh.items])
        inside = (lo <= f) & (f <= hi)
        covered += int(inside.sum())
        total += inside.size
        all_covered += bool(inside.all())
        false_items += int(np.sum(f == 0.0))
        planted = np.array([s in _PLANTED for s in hh.items], dtype=bool)
        covered_planted += int(inside[planted].sum())
        total_planted += int(planted.sum())
    if control == "fwer":
        assert all_covered >= runs - 3  # simultaneous 95 % (Bonferroni: conservative)
        # family-wise 5 % per run: ~1.5 of 30 runs may hold a noise item (measured: 1)
        assert false_items <= 3
    elif control == "fdr":
        assert covered >= 0.9 * total  # false coverage rate <= 5 % (+ slack for 30 runs)
    else:
        # marginal 95 %: right for the real heavy hitters, not for the noise items the top-k
        # selects (winner's curse: measured 117 of 180 covered overall)
        assert covered_planted >= 0.9 * total_planted
        assert covered < 0.9 * total


def test_control_drops_noise_items():
    values = _population(30_000, np.random.default_rng(12))
    plain = PEM(epsilon=3.0, max_length=4, top_k=10).run(values, rng=0)
    strict = PEM(epsilon=3.0, max_length=4, top_k=10, control="fwer").run(values, rng=0)
    assert len(plain) == 10
    assert set(strict.items) == set(_PLANTED)  # the 6 other slots were noise
    lo_plain, hi_plain = plain.confidence_interval()
    lo, hi = strict.confidence_interval()
    assert np.all(hi[:4] - lo[:4] > hi_plain[:4] - lo_plain[:4])  # simultaneous: wider


# --- consistency across levels: ended strings pooled over their groups ----------------------


def _final_z(estimate_spec) -> tuple[np.ndarray, np.ndarray]:
    values = _population(60_000, np.random.default_rng(21))
    truth = _truth(values, 6)
    spec = PEM(epsilon=3.0, max_length=6, top_k=4, keep=8, hash_range=16, hash_functions=64)
    zs, stds = [], []
    for seed in range(4):
        stats = spec.aggregate(spec.randomize(values, rng=seed))
        other = estimate_spec(spec)
        hh = other.estimate(type(stats)(other, stats.n, counts=stats.counts))
        planted = np.array([s in _PLANTED for s in hh.items])
        f = np.array([truth.get(s, 0.0) for s in hh.items])
        zs.append(((hh.frequencies - f) / hh.std_error)[planted])
        stds.append(hh.std_error[planted])
    return np.concatenate(zs), np.concatenate(stds)


def test_pooled_estimates_are_unbiased_and_tighter():
    z, std = _final_z(lambda s: s)
    assert z.size >= 12 and np.all(np.abs(z) <= 5.0) and float(np.mean(z**2)) < 2.5, z
    z1, std1 = _final_z(lambda s: s.replace(pool_ended=False))
    assert np.all(np.abs(z1) <= 5.0), z1
    assert float(np.median(std)) < 0.75 * float(np.median(std1))  # 3 groups pooled, not 1


def test_pooled_check_fails_for_a_wrong_epsilon():
    z, _ = _final_z(lambda s: s.replace(epsilon=1.4))
    assert np.max(np.abs(z)) > 6.0
