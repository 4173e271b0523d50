"""CMS's client coins (:mod:`ldpkit.frequency._cms_sampler`): two streams, exact law.

The compiled kernel and its numpy twin give the same words; CMS reports do not depend on
which one ran; every bit's frequency is its threshold's (z-tests that fail at epsilon x
1.3), and bits settled by the two streams (even and odd words) are independent.
"""

from __future__ import annotations

import numpy as np
import pytest

from ldpkit.frequency import CMS
from ldpkit.frequency._cms_sampler import sample_cms_bits, sample_cms_words_numpy
from ldpkit.frequency.sketch import _cms_thresholds

pytest.importorskip("numba")

_TOP = 2**64 - 1


@pytest.mark.parametrize("width", [2, 3, 8, 63, 64, 65, 75, 128, 200, 1024])
def test_kernel_and_numpy_twin_give_the_same_words(width):
    from ldpkit.frequency._kernels_cms import sample_cms_words

    rng = np.random.default_rng(width)
    n, n_words = 700, -(-width // 64)
    drawn = (int(rng.integers(0, 2**63)) * 2 + 1, int(rng.integers(0, 2**63)))
    for big, small in ((_TOP, 0), (0, _TOP), _cms_thresholds(1.0), _cms_thresholds(8.0), drawn):
        values = rng.integers(0, width, n)
        seeds = rng.integers(0, 2**63, n).astype(np.uint64)
        compiled = np.zeros((n, n_words), dtype=np.uint64)
        twin = np.ones((n, n_words), dtype=np.uint64)
        sample_cms_words(values, seeds, width, big, small, compiled, workers=2)
        sample_cms_words_numpy(values, seeds, width, big, small, twin)
        assert np.array_equal(compiled, twin)
        out = np.full((n, -(-width // 8)), 0xAA, dtype=np.uint8)
        sample_cms_bits(values, seeds, width, big, small, out)
        bits = np.unpackbits(out, axis=1)
        assert not bits[:, width:].any()  # padding
        held = bits[np.arange(n), values]
        if (big, small) == (_TOP, 0):  # a one-hot report
            assert held.all() and (bits.sum(axis=1) == 1).all()
        if (big, small) == (0, _TOP):
            assert not held.any() and (bits.sum(axis=1) == width - 1).all()


def test_cms_reports_are_the_same_on_both_paths(monkeypatch):
    from ldpkit import _parallel

    spec = CMS(epsilon=2.0, width=200, depth=8)
    values = [f"w{i % 40}" for i in range(3000)]
    compiled = spec.randomize(values, rng=4)
    monkeypatch.setattr(_parallel, "use_compiled", lambda work, least: False)
    twin = spec.randomize(values, rng=4)
    assert np.array_equal(compiled.bits, twin.bits) and np.array_equal(compiled.rows, twin.rows)


def _bit_z(bits: np.ndarray, prob: float) -> np.ndarray:
    n = bits.shape[0]
    return (bits.sum(axis=0) - n * prob) / np.sqrt(n * prob * (1 - prob))


@pytest.mark.parametrize("epsilon", [1.0, 6.0])
def test_every_bit_has_its_thresholds_probability(epsilon):
    width, n = 128, 40_000  # two words: stream A's and stream B's lanes
    big, small = _cms_thresholds(epsilon)
    rng = np.random.default_rng(int(epsilon))
    values = np.full(n, 70)  # the held bit in stream B's word
    seeds = rng.integers(0, 2**63, n).astype(np.uint64)
    out = np.empty((n, width // 8), dtype=np.uint8)
    sample_cms_bits(values, seeds, width, big, small, out)  # either path: the same bytes
    bits = np.unpackbits(out, axis=1).astype(np.int64)
    others = np.delete(bits, 70, axis=1)
    p, q = big / 2**64, small / 2**64
    assert np.abs(_bit_z(others, q)).max() <= 5.0
    assert abs(_bit_z(bits[:, [70]], p)[0]) <= 5.0
    # the same check fails for the thresholds of epsilon x 1.3
    small13 = _cms_thresholds(epsilon * 1.3)[1]
    assert np.abs(_bit_z(others, small13 / 2**64)).max() > 6.0
    # bits of the two streams' words, and of one word, are independent: joint frequency q^2
    for i, j in ((3, 64 + 3), (0, 126), (5, 6)):
        both = (others[:, i] & others[:, j])[:, None]
        assert abs(_bit_z(both, q * q)[0]) <= 5.0


def test_compiled_law_at_a_large_batch():
    # 20,000 reports of 1024 bits (>= COMPILED_MIN_BITS): the compiled kernel runs
    width, n = 1024, 20_000
    big, small = _cms_thresholds(4.0)
    rng = np.random.default_rng(9)
    values = rng.integers(0, width, n)
    seeds = rng.integers(0, 2**63, n).astype(np.uint64)
    out = np.empty((n, width // 8), dtype=np.uint8)
    sample_cms_bits(values, seeds, width, big, small, out)
    bits = np.unpackbits(out, axis=1).astype(np.int64)
    held = bits[np.arange(n), values]
    bits[np.arange(n), values] = 0
    q = small / 2**64
    n_other = n * (width - 1)
    z_other = (bits.sum() - n_other * q) / np.sqrt(n_other * q * (1 - q))
    p = big / 2**64
    z_held = (held.sum() - n * p) / np.sqrt(n * p * (1 - p))
    assert abs(z_other) <= 5.0 and abs(z_held) <= 5.0
    q13 = _cms_thresholds(5.2)[1] / 2**64
    assert abs((bits.sum() - n_other * q13) / np.sqrt(n_other * q13 * (1 - q13))) > 6.0


@pytest.mark.parametrize("width", [64, 192, 1024])
def test_server_carry_save_kernel_counts_every_bit(width):
    # the server's kernel (whole 64-bit words) against numpy, its count of sixteens expanded
    # every 3 steps of a row (instead of 2^16 - 2) so that the expansion runs many times;
    # rows of < 16, of a multiple of 16 and of other counts, and an empty row
    from ldpkit.frequency._kernels_sketch import _WORD_BIT, _row_bits_csa, row_bit_counts

    rng = np.random.default_rng(width)
    spec = CMS(epsilon=0.5, width=width, depth=6)
    rows = np.repeat(np.arange(5), [7, 16, 160, 999, 1500])
    rng.shuffle(rows)
    reports = spec.randomize(rng.integers(0, 50, rows.size), rng=2)
    expect = spec._row_counts_numpy(rows, reports.bits)
    assert not expect[5].any()
    words = reports.bits.view(np.uint64)
    for flush in (1, 3, 2**16 - 2):
        got = _row_bits_csa(rows, words, 6, _WORD_BIT, 0, rows.size, flush)
        assert np.array_equal(got[:, :width], expect)
    assert np.array_equal(row_bit_counts(rows, reports.bits, 6, width), expect)
    part = _row_bits_csa(rows, words, 6, _WORD_BIT, 100, 2000, 3)  # a block of the rows
    assert np.array_equal(part, spec._row_counts_numpy(rows[100:2000], reports.bits[100:2000]))


@pytest.mark.parametrize("epsilon", [4.0, 8.0])
def test_lockstep_kernel_law_per_bit_and_per_place_in_the_group(epsilon):
    # the compiled kernel draws GROUP reports in lockstep: every bit, and every place of a
    # report in its group (a last partial group included), has its threshold's frequency;
    # the same checks fail with p and q swapped
    from ldpkit.frequency._kernels_cms import GROUP, sample_cms_words

    width, n = 192, 40 * GROUP * 41 + 7  # three words (an odd last one: stream A alone)
    big, small = _cms_thresholds(epsilon)
    rng = np.random.default_rng(int(epsilon))
    values = rng.integers(0, width, n)
    seeds = rng.integers(0, 2**63, n).astype(np.uint64)
    words = np.empty((n, width // 64), dtype=np.uint64)
    sample_cms_words(values, seeds, width, big, small, words)
    bits = np.unpackbits(words.astype("<u8").view(np.uint8), axis=1).astype(np.int64)
    held = np.zeros_like(bits, dtype=bool)
    held[np.arange(n), values] = True
    p, q = big / 2**64, small / 2**64

    def z(ones: np.ndarray, trials: np.ndarray, prob: float) -> np.ndarray:
        return (ones - trials * prob) / np.sqrt(trials * prob * (1 - prob))

    other_ones, other_n = (bits * ~held).sum(axis=0), (~held).sum(axis=0)
    held_ones, held_n = (bits * held).sum(axis=0), held.sum(axis=0)
    place = np.arange(n) % GROUP  # each report's place in its group of the kernel
    place_ones = np.bincount(place, (bits * ~held).sum(axis=1), minlength=GROUP)
    place_n = np.bincount(place, minlength=GROUP) * (width - 1)
    assert np.abs(z(other_ones, other_n, q)).max() <= 5.0
    assert np.abs(z(held_ones, held_n, p)).max() <= 5.0
    assert np.abs(z(place_ones, place_n, q)).max() <= 5.0
    # swapped thresholds: far outside the same bounds
    assert np.abs(z(other_ones, other_n, p)).min() > 6.0
    assert np.abs(z(held_ones, held_n, q)).min() > 6.0
    assert np.abs(z(place_ones, place_n, p)).min() > 6.0


def test_lockstep_kernel_words_do_not_depend_on_where_a_group_starts():
    # a report's words are its own draws: the same alone, in a block cut at any row
    from ldpkit.frequency._kernels_cms import GROUP, _sample_rows

    width, n = 1000, 3 * GROUP + 5
    big, small = (np.uint64(x) for x in _cms_thresholds(6.0))
    rng = np.random.default_rng(1)
    values = rng.integers(0, width, n)
    seeds = rng.integers(0, 2**63, n).astype(np.uint64)
    whole = np.empty((n, 16), dtype=np.uint64)
    _sample_rows(values, seeds, width, big, small, whole)
    for cut in (1, 7, GROUP - 1, GROUP + 3):
        parts = np.empty_like(whole)
        _sample_rows(values[:cut], seeds[:cut], width, big, small, parts[:cut])
        _sample_rows(values[cut:], seeds[cut:], width, big, small, parts[cut:])
        assert np.array_equal(parts, whole)
    alone = np.empty((1, 16), dtype=np.uint64)
    _sample_rows(values[5:6], seeds[5:6], width, big, small, alone)
    assert np.array_equal(alone[0], whole[5])


@pytest.mark.parametrize("width", [1024, 1000])  # words in place, and copied into bytes
def test_coins_drawn_while_the_items_are_hashed_give_the_same_reports(width):
    # from _OVERLAP_MIN_USERS users (a list or a 1-D array), CMS.randomize starts the
    # compiled draws on threads before it computes the item keys; the reports are those of
    # the sequential path (keys first), for a list of str, a U array and int64s
    from ldpkit.frequency.sketch import _OVERLAP_MIN_USERS

    n = _OVERLAP_MIN_USERS + 5
    spec = CMS(epsilon=6.0, width=width, depth=16)
    words = np.array([f"w{i % 300}" for i in range(n)])
    for values in (words.tolist(), words, np.arange(n) % 77):
        got = spec.randomize(values, rng=11)
        expect = spec._randomize_keys(spec.item_keys(values), 11)
        assert np.array_equal(got.bits, expect.bits) and np.array_equal(got.rows, expect.rows)
    gen_a, gen_b = np.random.default_rng(5), np.random.default_rng(5)
    got = spec.randomize(words, rng=gen_a)
    expect = spec._randomize_keys(spec.item_keys(words), gen_b)
    assert np.array_equal(got.bits, expect.bits)
    # the generators were advanced alike: the next batch agrees as well
    assert np.array_equal(
        spec.randomize(words, rng=gen_a).bits, spec.randomize(words, rng=gen_b).bits
    )


def test_one_allowed_thread_draws_after_the_keys_with_the_same_reports(monkeypatch):
    from ldpkit import _parallel
    from ldpkit.frequency import sketch

    n = sketch._OVERLAP_MIN_USERS
    spec = CMS(epsilon=3.0, width=128, depth=8)
    values = [f"w{i % 50}" for i in range(n)]
    overlapped = spec.randomize(values, rng=2)
    monkeypatch.setattr(_parallel, "WORKERS", 1)
    started = []
    monkeypatch.setattr(sketch, "start_cms_bits", lambda *a: started.append(a))
    alone = spec.randomize(values, rng=2)
    assert not started and np.array_equal(alone.bits, overlapped.bits)


def test_refused_items_after_the_draws_started_raise_the_usual_error():
    from ldpkit.frequency.sketch import _OVERLAP_MIN_USERS

    spec = CMS(epsilon=4.0, width=256, depth=4)
    bad = [f"w{i}" for i in range(_OVERLAP_MIN_USERS)] + [1.5]
    with pytest.raises(TypeError, match="values must be"):
        spec.randomize(bad, rng=0)
    fine = spec.randomize(bad[:-1], rng=0)  # the kernel's threads were waited for
    assert fine.bits.shape == (_OVERLAP_MIN_USERS, 32)
