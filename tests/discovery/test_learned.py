"""PEM's search over an alphabet learned from the reports (``extensions="learned"``)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from _discoveryhelpers import planted_population
from ldpkit import PEM
from ldpkit.discovery._learned import _beam, learned_alphabet, utf8_rows

_PLANTED = {"ant": 0.25, "and": 0.15, "bee": 0.1, "cat": 0.05}
_LETTERS = "abcdefghij"


def _population(n: int, rng: np.random.Generator) -> np.ndarray:
    """Planted words and a tail of rare 4-letter strings over 10 letters."""
    return planted_population(n, rng, _PLANTED, _LETTERS)


def _spec(epsilon: float = 3.0) -> PEM:
    return PEM(epsilon=epsilon, max_length=6, top_k=4, keep=8, hash_range=16, hash_functions=64)


def test_learned_alphabet_is_the_used_bytes():
    """The first pass's evidence keeps the letters the data use and drops most other bytes."""
    spec = PEM(epsilon=3.0, max_length=6, top_k=4, keep=8)  # default g, H: few collisions
    stats = spec.aggregate(spec.randomize(_population(60_000, np.random.default_rng(1)), rng=2))
    *_, mass, var = _beam(spec, stats, None)
    allowed = learned_alphabet(mass, var, 2.0)
    used = [ord(c) for c in "antdbec"]  # the planted words' letters: strong evidence
    assert allowed[0] and np.all(allowed[used])
    assert np.count_nonzero(allowed) <= 1 + 12 + 15  # ~2% of the 243 unused bytes pass
    unused = np.array([b for b in range(1, 256) if chr(b) not in _LETTERS + "nt"])
    z = mass[unused] / np.sqrt(var[unused])
    # the unused bytes' evidence is null noise: mean ~0, variance ~1
    assert abs(float(np.mean(z))) < 0.3 and 0.6 < float(np.var(z)) < 1.6
    assert float(np.var(z * 1.6)) > 1.6  # the same check fails for a scale of 1.6


def test_learned_search_finds_the_planted_words_in_a_smaller_second_pass():
    """Same planted words as the byte search; the second pass tests far fewer extensions."""
    values = _population(60_000, np.random.default_rng(3))
    spec = _spec()
    stats = spec.aggregate(spec.randomize(values, rng=5))
    plain = spec.estimate(stats, extensions="all")
    learned = spec.estimate(stats, extensions="learned")
    assert set(learned.items) == set(_PLANTED) == set(plain.items)
    # the control's family is both passes' candidates; the second pass tests far fewer
    assert plain.tested < learned.tested < 1.6 * plain.tested
    assert learned.tested == sum(learned.candidates_per_level)
    assert spec.estimate(stats).items == learned.items  # the default for pool_ended


def test_utf8_rows_agrees_with_the_decoder():
    """The vectorized check accepts exactly the rows Python decodes (padding trailing)."""
    rng = np.random.default_rng(7)
    words = ["abc", "zoë", "日本", "🙂", "ñandú", "a\u00ff"]
    rows = [list(w.encode()) + [0] * (12 - len(w.encode())) for w in words]
    bytes_ = np.concatenate([rng.integers(0, 256, (400, 6)), rng.integers(0x80, 0xC0, (400, 6))])
    rows += [list(r) + [0] * 6 for r in bytes_.tolist()]
    grid = np.array(rows, dtype=np.uint16)

    def decodes(row: np.ndarray) -> bool:
        raw = bytes(row[: np.count_nonzero(np.cumprod(row != 0))].tolist())
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return False
        return bool(np.all(row[len(raw) :] == 0))  # padding only trails

    expected = np.array([decodes(r) for r in grid])
    assert expected[: len(words)].all() and 0 < expected.sum() < len(grid)
    # the check is looser only on overlong and surrogate forms, which no client sends
    got = utf8_rows(grid)
    assert np.all(got[expected]) and np.mean(got == expected) > 0.99


def _final_z(epsilon_decode: float) -> np.ndarray:
    """Z-scores of the planted words' returned frequencies over 4 randomizations."""
    values = _population(60_000, np.random.default_rng(21))
    truth = Counter(values.tolist())
    spec, zs = _spec(), []
    for seed in range(4):
        stats = spec.aggregate(spec.randomize(values, rng=seed))
        other = spec.replace(epsilon=epsilon_decode)
        hh = other.estimate(type(stats)(other, stats.n, counts=stats.counts), extensions="learned")
        planted = np.array([s in _PLANTED for s in hh.items])
        f = np.array([truth[s] / values.size for s in hh.items])
        zs.append(((hh.frequencies - f) / hh.std_error)[planted])
    return np.concatenate(zs)


def test_learned_frequencies_are_unbiased():
    """The returned frequencies are the pooled estimates: |z| <= 5 with the served errors."""
    z = _final_z(3.0)
    assert z.size >= 12 and np.all(np.abs(z) <= 5.0) and float(np.mean(z**2)) < 2.5, z


def test_learned_check_fails_for_a_wrong_epsilon():
    """The same check decoded at a wrong epsilon is caught."""
    assert np.max(np.abs(_final_z(4.2))) > 6.0


def test_no_evidence_keeps_the_first_pass():
    """With a handful of users no symbol has evidence: the byte search's answer stands."""
    spec = PEM(epsilon=0.5, max_length=3, top_k=2)
    stats = spec.aggregate(spec.randomize(["ab", "b", "ab"], rng=0))
    learned = spec.estimate(stats, extensions="learned")
    assert len(learned.items) == 2 and np.all(np.isfinite(learned.std_error))


def test_default_extensions_follow_pool_ended():
    """None: the learned pass for ldpkit's search, every symbol for the papers' (unpooled)."""
    values = _population(20_000, np.random.default_rng(4))
    for pooled, rule in ((True, "learned"), (False, "all")):
        spec = _spec().replace(pool_ended=pooled)
        stats = spec.aggregate(spec.randomize(values, rng=1))
        got, want = spec.estimate(stats), spec.estimate(stats, extensions=rule)
        assert got.items == want.items and got.tested == want.tested
        other = spec.estimate(stats, extensions="learned" if rule == "all" else "all")
        assert other.tested != got.tested  # the two rules test different families


@pytest.mark.parametrize("bad", ["bytes", "", 1])
def test_bad_extensions_are_refused(bad):
    """An unknown extension rule is refused, naming the parameter and the allowed values."""
    spec = PEM(epsilon=1.0, max_length=3, top_k=2)
    stats = spec.aggregate(spec.randomize(["ab", "b"], rng=0))
    with pytest.raises(ValueError, match=r"extensions must be one of \('all', 'learned'\), got"):
        spec.estimate(stats, extensions=bad)
