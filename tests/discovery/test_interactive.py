"""ldpkit.discovery.InteractivePEM: rounds of users answering about published candidates."""

from __future__ import annotations

import numpy as np
import pytest

from _discoveryhelpers import planted_population
from ldpkit.discovery import DiscoveryRounds, InteractivePEM, PEMRound, RoundEstimate
from ldpkit.discovery._strings import (
    empty_key,
    encode_strings,
    extend_keys,
    family_seeds,
    hash_keys,
)
from ldpkit.testing import chisquare_gof

_PLANTED = {"ant": 0.25, "and": 0.15, "bee": 0.1, "cat": 0.05}


def _population(n: int, rng: np.random.Generator) -> np.ndarray:
    return planted_population(n, rng, _PLANTED)


def _key(text: str, length: int, max_length: int) -> np.uint64:
    key = empty_key(1)
    for s in encode_strings([text], max_length, None)[0, :length]:
        key = extend_keys(key, np.array([s]))
    return key[0]


def _row(text: str, length: int) -> tuple[int, ...]:
    return tuple(int(s) for s in encode_strings([text], length, None)[0])


# --- the round's public domain and the report law --------------------------------------------


def test_candidates_extend_open_survivors_by_every_symbol_and_ended_by_the_padding():
    spec = PEMRound(epsilon=1.0, max_length=4, survivors=(_row("ab", 2), _row("b", 2)))
    rows, keys = spec.candidates()
    assert spec.level == 2 and spec.candidate_count == 257 == rows.shape[0]
    assert rows[:256, :2].tolist() == [[97, 98]] * 256 and rows[:256, 2].tolist() == list(
        range(256)
    )
    assert rows[256].tolist() == [98, 0, 0]
    assert keys[99] == _key("abc", 3, 4) and keys[256] == _key("b", 3, 4)
    assert PEMRound(epsilon=1.0, survivors=((), ())).survivors == ()  # the first round


@pytest.mark.parametrize(
    ("survivors", "match"),
    [
        (((97,), (97, 98)), "survivors must be rows of one length"),
        (((97, 98, 99, 100),), "survivors must be rows of one length"),
        (((0, 97),), "survivors must pad only at the end"),
        (((97,), (97,)), "survivors must be distinct"),
        (((300,),), "survivors must hold symbols in"),
    ],
)
def test_survivor_validation(survivors, match):
    with pytest.raises(ValueError, match=match):
        PEMRound(epsilon=1.0, max_length=4, survivors=survivors)


@pytest.mark.parametrize("bad", ["ab", (("a",),), ((1.5,),), ((True,),)])
def test_survivor_types(bad):
    with pytest.raises(TypeError, match="survivors must be a tuple of symbol rows"):
        PEMRound(epsilon=1.0, max_length=4, survivors=bad)


def test_a_member_reports_the_hash_of_its_prefix_and_a_non_member_is_uniform():
    survivors = (_row("ab", 2),)
    spec = PEMRound(
        epsilon=38.0, max_length=3, survivors=survivors, hash_range=1024, hash_functions=8
    )
    member = spec.randomize(["abc"] * 200, rng=1)
    seeds = family_seeds(2, 8)[member.hashes.astype(np.int64)]
    h = hash_keys(np.full(200, _key("abc", 3, 3), dtype=np.uint64), seeds, 1024)
    assert np.array_equal(member.values.astype(np.int64), h)  # eps 38: GRR keeps
    other = spec.randomize(["ba"] * 20_000, rng=2)  # "b" is not a survivor
    counts = np.bincount(other.values.astype(np.int64), minlength=1024)
    assert chisquare_gof(counts, np.full(1024, 1 / 1024)) > 1e-6


def test_report_law_given_hash_and_membership():
    """A member's (y - h) mod g is 0 w.p. p, each other offset w.p. q; "none" is uniform.

    The member law is rejected at epsilon x 1.3; privacy_loss is the GRR rows' ratio, which
    bounds the uniform row's too.
    """
    spec = PEMRound(
        epsilon=1.5, max_length=3, survivors=(_row("héllo", 3)[:2],), hash_range=6, hash_functions=4
    )
    key = _key("héllo", 3, 3)

    def offsets(mech, seed):
        r = mech.randomize(["héllo"] * 60_000, rng=seed)
        seeds = family_seeds(2, 4)[r.hashes.astype(np.int64)]
        h = hash_keys(np.full(len(r), key, dtype=np.uint64), seeds, 6)
        return np.bincount((r.values.astype(np.int64) - h) % 6, minlength=6)

    law = np.array([spec.p] + [spec.q] * 5)
    assert chisquare_gof(offsets(spec, 1), law) > 1e-6
    assert chisquare_gof(offsets(spec.replace(epsilon=1.5 * 1.3), 2), law) < 1e-6
    none = spec.randomize(["zz"] * 60_000, rng=3).values.astype(np.int64)
    assert chisquare_gof(np.bincount(none, minlength=6), np.full(6, 1 / 6)) > 1e-6
    assert spec.privacy_loss() == pytest.approx(1.5, abs=1e-12)
    assert np.log(spec.p * 6) <= spec.privacy_loss() and -np.log(spec.q * 6) <= 1.5 + 1e-12


# --- the round's estimate: unbiased, with the documented variance --------------------------


def _round_z(epsilon_of_estimate: float) -> np.ndarray:
    rng = np.random.default_rng(7)
    values = _population(60_000, rng)
    zs = []
    for level, survivors in enumerate([(), (_row("a", 1), _row("b", 1), _row("c", 1))]):
        spec = PEMRound(
            epsilon=2.0, max_length=3, survivors=survivors, hash_range=8, hash_functions=256
        )
        cut = np.array([v.encode()[: level + 1] for v in values], dtype=object)
        for seed in range(3):
            stats = spec.aggregate(spec.randomize(values, rng=seed))
            est = spec.replace(epsilon=epsilon_of_estimate).estimate(
                stats.__class__(
                    spec.replace(epsilon=epsilon_of_estimate), stats.n, counts=stats.counts
                )
            )
            names = [bytes(row.astype(np.uint8)).rstrip(b"\0") for row in est.prefixes]
            tested = [
                i
                for i, s in enumerate(names)
                if s in {b"a", b"b", b"c", b"j", b"an", b"be", b"ca", b"ab"}
            ]
            truth = np.array([np.mean(cut == names[i]) for i in tested])
            zs.append((est.frequencies[tested] - truth) / est.std_error[tested])
    return np.concatenate(zs)


def test_round_estimates_are_unbiased_with_the_documented_variance():
    z = _round_z(2.0)
    assert z.size >= 20 and np.all(np.abs(z) <= 5.0), z
    assert 0.2 < float(np.mean(z**2)) < 2.5, z


def test_round_check_fails_for_a_wrong_epsilon():
    assert np.max(np.abs(_round_z(1.4))) > 6.0


def test_uniform_table_gives_zero_and_the_null_variance_exactly():
    spec = PEMRound(epsilon=1.0, max_length=2, hash_range=4, hash_functions=16)
    stats = spec.empty_stats().__class__(spec, 1600, counts=np.full((16, 4), 25))
    est = spec.estimate(stats)
    assert isinstance(est, RoundEstimate) and np.all(est.frequencies == 0.0)
    gap = spec.p - 0.25
    null = 0.25 * 0.75 / (1600 * gap * gap)
    family = 1.0 * min(1.0, 3.0 * null**0.5) / (3 * 16)  # nothing significant: all untested
    assert np.allclose(est.null_std_error**2, null + family, rtol=1e-12)
    assert np.allclose(est.std_error**2, null + family, rtol=1e-12)
    assert est.none_frequency == 1.0


# --- the driver ------------------------------------------------------------------------------


def test_recovers_planted_heavy_hitters():
    values = _population(60_000, np.random.default_rng(3))
    hh = InteractivePEM(epsilon=4.0, max_length=3, top_k=4).run(values, rng=5)
    assert set(hh.items) == set(_PLANTED)
    truth = np.array([_PLANTED[s] for s in hh.items])
    assert np.all(np.abs(hh.frequencies - truth) <= 5 * hh.std_error)
    assert hh.candidates_per_level[0] == 256 and len(hh.candidates_per_level) == 3


def _final_z(epsilon_of_reports: float) -> np.ndarray:
    zs = []
    for seed in range(4):
        values = _population(40_000, np.random.default_rng(seed))
        protocol = InteractivePEM(
            epsilon=3.0, max_length=4, top_k=4, hash_range=16, hash_functions=64
        )
        state = protocol.rounds()
        which = np.random.default_rng(seed + 10).integers(0, 4, size=values.size)
        for r in range(4):
            spec = state.spec
            sent = spec.replace(epsilon=epsilon_of_reports)
            reports = sent.randomize(values[which == r], rng=seed)
            counts = sent.aggregate(reports).counts
            state.next_candidates(spec.empty_stats().__class__(spec, len(reports), counts=counts))
        hh = state.result()
        planted = [i for i, s in enumerate(hh.items) if s in _PLANTED]
        truth = np.array([np.mean(values == hh.items[i]) for i in planted])
        zs.append((hh.frequencies[planted] - truth) / hh.std_error[planted])
    return np.concatenate(zs)


def test_final_estimates_pooled_over_rounds_are_unbiased():
    z = _final_z(3.0)
    assert z.size >= 12 and np.all(np.abs(z) <= 5.0) and float(np.mean(z**2)) < 2.5, z


def test_final_check_fails_for_a_wrong_epsilon():
    assert np.max(np.abs(_final_z(4.5))) > 6.0


def test_rounds_api_publishes_one_spec_per_length_then_stops():
    protocol = InteractivePEM(epsilon=6.0, max_length=3, top_k=2, keep=3)
    state = protocol.rounds()
    assert isinstance(state, DiscoveryRounds)
    with pytest.raises(ValueError, match="result needs every round's stats"):
        state.result()
    levels = []
    values = ["ab"] * 300 + ["b"] * 200
    while state.spec is not None:
        spec = state.spec
        levels.append(spec.level)
        assert len(spec.survivors) in (0, 3)
        nxt = state.next_candidates(spec.aggregate(spec.randomize(values, rng=len(levels))))
        assert nxt is state.spec
    assert levels == [0, 1, 2]
    assert state.result().items == ("ab", "b")
    with pytest.raises(ValueError, match="stats must belong to an open round"):
        state.next_candidates(spec.empty_stats())
    with pytest.raises(TypeError, match="protocol must be an InteractivePEM"):
        DiscoveryRounds(spec)  # type: ignore[arg-type]


def test_stats_of_another_round_are_refused():
    state = InteractivePEM(epsilon=2.0, max_length=3).rounds()
    other = PEMRound(epsilon=2.0, max_length=3, survivors=((97,),))
    with pytest.raises(ValueError, match="stats"):
        state.next_candidates(other.empty_stats())


def test_an_empty_round_keeps_going():
    state = InteractivePEM(epsilon=8.0, max_length=2, top_k=1).rounds()
    state.next_candidates(state.spec.empty_stats())  # nobody answered round 0
    spec = state.spec
    state.next_candidates(spec.aggregate(spec.randomize(["x"] * 100, rng=0)))
    assert len(state.result().items) <= 1


def test_validation_goes_through_pem():
    with pytest.raises(ValueError, match="max_length must be"):
        InteractivePEM(epsilon=1.0, max_length=0)
    with pytest.raises(ValueError, match="control must be"):
        InteractivePEM(epsilon=1.0, control="x")
    with pytest.raises(ValueError, match="epsilon must be"):
        InteractivePEM(epsilon=-1.0)
    assert InteractivePEM(epsilon=2, keep=np.int64(5)).keep == 5


def test_control_fwer_drops_noise():
    values = _population(40_000, np.random.default_rng(9))
    hh = InteractivePEM(epsilon=3.0, max_length=3, top_k=6, control="fwer").run(values, rng=1)
    assert set(hh.items) <= set(_PLANTED) and len(hh.items) >= 3
    lo, hi = hh.confidence_interval()
    assert np.all(lo <= hi)
