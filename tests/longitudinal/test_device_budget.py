"""Device budget: the client refuses a report past its per-question
budget before deriving, storing or sending anything; memoized values stay answerable. And
the word-based permanent derivation (shared with the JS client)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ldpkit import BudgetExceededError, Device
from ldpkit.device import DerivedWords
from ldpkit.frequency import GRR
from ldpkit.longitudinal import LGRR, LOLOHA, LOSUE, LOUE, LSOUE, LSUE

SECRET = bytes(range(32))


def test_budget_refuses_a_new_value_and_answers_memoized_ones(tmp_path: Path) -> None:
    spec = LGRR(epsilon_inf=1.0, epsilon_1=0.5, domain_size=16)
    device = Device(SECRET, tmp_path / "d.json", budget=2.0)
    device.report(spec, [3], rng=0)
    device.report(spec, [5], rng=1)  # two permanent answers: 2 x 1.0 = budget
    assert device.privacy_spent(spec) == pytest.approx(2.0, rel=1e-12)
    file_before = (tmp_path / "d.json").read_bytes()
    with pytest.raises(BudgetExceededError, match="budget must cover"):
        device.report(spec, [7], rng=2)
    with pytest.raises(BudgetExceededError):
        device.report(spec, [3, 9], rng=2)  # one new value in the batch refuses the batch
    assert (tmp_path / "d.json").read_bytes() == file_before  # nothing stored
    assert device.distinct_values(spec) == 2
    for day in range(30):  # memoized values: free, any number of times
        device.report(spec, [3, 5, 3], rng=day)
    assert device.privacy_spent(spec) == pytest.approx(2.0, rel=1e-12)


def test_budget_survives_a_restart_and_is_per_question(tmp_path: Path) -> None:
    spec = LGRR(epsilon_inf=1.0, epsilon_1=0.5, domain_size=16)
    other = LGRR(epsilon_inf=1.0, epsilon_1=0.5, domain_size=8)
    Device(SECRET, tmp_path / "d.json", budget=1.0).report(spec, [3], rng=0)
    again = Device(path=tmp_path / "d.json", budget=1.0)
    with pytest.raises(BudgetExceededError):
        again.report(spec, [4], rng=0)
    again.report(other, [4], rng=0)  # another question has its own budget
    again.report(spec, [3], rng=1)


def test_budget_for_plain_specs_counts_memoized_reports(tmp_path: Path) -> None:
    spec = GRR(epsilon=1.0, domain_size=4)
    device = Device(SECRET, tmp_path / "d.json", budget=1.5)
    first = device.report(spec, [2], rng=0)
    with pytest.raises(BudgetExceededError):
        device.report(spec, [1], rng=0)
    assert np.array_equal(device.report(spec, [2], rng=5).values, first.values)


def test_budget_counts_loloha_hashed_keys(tmp_path: Path) -> None:
    spec = LOLOHA(epsilon_inf=1.0, epsilon_1=0.5, domain_size=64)
    device = Device(SECRET, tmp_path / "d.json", budget=spec.longitudinal_privacy_loss(1))
    device.report(spec, [0], rng=0)
    seen = device.distinct_values(spec)
    refused = 0
    for v in range(1, 64):
        try:
            device.report(spec, [v], rng=v)
        except BudgetExceededError:
            refused += 1
    assert device.distinct_values(spec) == seen == 1
    assert 0 < refused < 63  # values hashing like 0 share its answer; the others are refused


@pytest.mark.parametrize("bad", [-1.0, float("nan"), "1"])
def test_bad_budget(tmp_path: Path, bad: object) -> None:
    with pytest.raises((ValueError, TypeError), match="budget must be"):
        Device(SECRET, tmp_path / "d.json", budget=bad)  # type: ignore[arg-type]


def test_derived_words_are_hmac_counter_mode() -> None:
    import hashlib
    import hmac

    key = bytes(range(32))
    words = DerivedWords(key)
    got = [words.u64() for _ in range(6)]
    d0 = hmac.new(key, (0).to_bytes(8, "big"), hashlib.sha256).digest()
    d1 = hmac.new(key, (1).to_bytes(8, "big"), hashlib.sha256).digest()
    want = [int.from_bytes(d[i : i + 8], "big") for d in (d0, d1) for i in (0, 8, 16, 24)]
    assert got == want[:6]


@pytest.mark.parametrize("cls", [LGRR, LOUE, LOSUE, LSUE, LSOUE])
def test_word_derivation_is_deterministic_and_follows_the_permanent_law(
    tmp_path: Path, cls: type
) -> None:
    spec = cls(epsilon_inf=1.0, epsilon_1=0.5, domain_size=6)
    a = Device(SECRET, tmp_path / "a.json")
    b = Device(SECRET, tmp_path / "b.json")
    assert np.array_equal(a.permanent(spec, 2)["data"], b.permanent(spec, 2)["data"])
    # over many keys, the permanent answer of value 2 follows the permanent law: z-test of
    # P[keep] (L-GRR) or of q1 = P[bit 0 = 1] (unary: OUE's p1 = 1/2 whatever eps_inf)
    n = 3000
    hits = 0
    for i in range(n):
        row = spec._permanent_from_words(2, DerivedWords(i.to_bytes(32, "big")))
        hits += int(row) == 2 if cls is LGRR else int(np.unpackbits(row)[0])

    def z(s: object) -> float:
        p = s.permanent_matrix()[2, 2] if cls is LGRR else s.q1  # type: ignore[attr-defined]
        return float((hits - n * p) / np.sqrt(n * p * (1 - p)))

    assert abs(z(spec)) < 5
    # the same check fails for a wrong law (eps_inf = 3 instead of 1)
    assert abs(z(cls(epsilon_inf=3.0, epsilon_1=0.5, domain_size=6))) > 5


def test_loloha_word_derivation_follows_the_permanent_law(tmp_path: Path) -> None:
    spec = LOLOHA(epsilon_inf=1.0, epsilon_1=0.5, domain_size=20, hash_range=4)
    a = Device(SECRET, tmp_path / "a.json")
    b = Device(SECRET, tmp_path / "b.json")
    assert [a.permanent(spec, v)["data"] for v in range(20)] == [
        b.permanent(spec, v)["data"] for v in range(20)
    ]
    assert len({tuple(a.report(spec, [v], rng=v).seeds) for v in range(20)}) == 1
    n, hits = 3000, 0
    for i in range(n):
        row = spec._permanent_from_words(1, DerivedWords(i.to_bytes(32, "big")), np.uint64([7]))
        assert int(row[0]) == 7
        hits += int(row[1]) == 1

    def z(s: LOLOHA) -> float:
        x, y = s._rounds()[0]
        p = x / (x + (s.range_size - 1) * y)
        return float((hits - n * p) / np.sqrt(n * p * (1 - p)))

    assert abs(z(spec)) < 5
    assert abs(z(spec.replace(epsilon_inf=3.0))) > 5  # type: ignore[arg-type]
