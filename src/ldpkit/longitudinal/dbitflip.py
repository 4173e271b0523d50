"""dBitFlipPM: d sampled bits with permanent memoization (Ding, Kulkarni, Yekhanin 2017).

Each device samples ``sampled_bits`` = d distinct buckets out of the k = ``domain_size`` once
(kept for good), and reports, for each sampled bucket j, one bit: 1 with probability ``p =
e^(eps/2) / (e^(eps/2) + 1)`` if its value is in bucket j, else with ``q = 1 - p``. With
memoization (the "PM" of multi-freq-ldpy, Ding et al. section 3's permanent memoization) the
report depends only on which sampled bucket (if any) holds the value: at most d + 1
different reports per device, each drawn once and repeated (so identical reports across days
are a stable identifier of the device; Ding et al. discuss output perturbation for that).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Any, ClassVar

import numpy as np

from .. import _crmath
from .._constraints import Alternatives, Integer, Ref
from .._rng import RNGLike, as_generator, derive_seeds, independent_streams, is_secure
from .._validation import check_frequencies, check_integer, check_memory
from ..estimate import FrequencyEstimate
from ..frequency._base import FrequencyOracle, index_dtype, postprocess_method
from ..frequency.unary import unary_integer_probabilities, unary_privacy_loss
from ..spec import Reports, Stats, StatsField
from . import _dbitflip_sampler as _streamed

__all__ = ["DBitFlipPM"]

_SCALE = 1 << 64
_U64_MAX = _SCALE - 1
#: Largest output space ``C(k, d) 2^d`` that transition_matrix() enumerates.
MAX_ENUMERABLE_OUTPUTS = 4096


#: Up to this many sampled buckets, per-row membership is tested column by column.
_FEW_COLUMNS = 16


@dataclasses.dataclass(frozen=True, kw_only=True)
class DBitFlipPM(FrequencyOracle):
    """dBitFlip (Ding, Kulkarni, Yekhanin, NeurIPS 2017) with permanent memoization.

    Report: ``reports.buckets`` (the d sampled buckets, ascending) and ``reports.bits`` (one
    0/1 per sampled bucket). Bits are exact: a uniform 64-bit word against the integer
    thresholds of SUE at epsilon (:func:`ldpkit.frequency.unary.unary_integer_probabilities`).

    Parameters
    ----------
    epsilon : float
        Budget of one report (and of all memoized reports of one value).
    domain_size : int
        Number of buckets k (>= 2); map raw values to buckets with ``ldpkit.Encoder``.
    sampled_bits : int
        d, in ``[1, k]`` (default 1).

    Notes
    -----
    Two values differ in at most two sampled bits, so one report is epsilon-LDP (Ding et al.
    Theorem 1); with d = 1 only one bit is ever sent and the realized loss is
    ``log(p / q) = epsilon / 2`` (``privacy_loss()`` says so). Estimator (Ding et al.
    section 2): ``f_v = k / (n d) * (ones_v - q sampled_v) / (p - q)``, unbiased (a bucket is
    sampled with probability d/k, independently of the value), with ``Var = (f (k/d) (p^3 +
    q^3) / (p - q)^2 - f^2 ... )``: precisely ``(f ((k/d)(p (1-q)^2 + (1-p) q^2)/(p-q)^2 - 1)
    + (1 - f)(k/d) q (1-q)/(p-q)^2) / n``. Memoized, the longitudinal loss of k distinct
    memo keys is ``min(k, d + 1) x privacy_loss()``.

    References
    ----------
    B. Ding, J. Kulkarni, S. Yekhanin. Collecting Telemetry Data Privately. NeurIPS 2017,
    sections 2-3 (dBitFlip, memoization).

    Examples
    --------
    >>> spec = DBitFlipPM(epsilon=1.0, domain_size=32, sampled_bits=4)
    >>> r = spec.randomize([0, 5, 31], rng=0)
    >>> r.buckets.shape, r.bits.shape, round(spec.privacy_loss(), 9)
    ((3, 4), (3, 4), 1.0)
    """

    sampled_bits: int = 1
    max_epsilon: ClassVar[float] = 50.0
    exact_epsilon: ClassVar[bool] = False  # epsilon / 2 when d = 1
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "sampled_bits": [Integer(1, Ref("domain_size"))]
    }

    def _validate(self) -> None:
        super()._validate()
        self._thresholds()

    def _thresholds(self) -> tuple[int, int]:
        t = _crmath.exp(-self.epsilon / 2.0)
        return unary_integer_probabilities(1.0 / (1.0 + t), t / (1.0 + t), self.epsilon)

    @property
    def p(self) -> float:
        """Realized P[bit j = 1 | value in bucket j]."""
        return self._thresholds()[0] / _SCALE

    @property
    def q(self) -> float:
        """Realized P[bit j = 1 | value not in bucket j]."""
        return self._thresholds()[1] / _SCALE

    def privacy_loss(self) -> float:
        """Return the realized loss, from the integer thresholds.

        ``log(p (1-q) / (q (1-p)))`` for d >= 2 (two bits differ), ``log(p / q)`` for d = 1.
        """
        big, small = self._thresholds()
        if self.sampled_bits >= 2:
            return unary_privacy_loss(big, small)
        return _crmath.log1p((big - small) / small)

    def longitudinal_privacy_loss(self, distinct_values: int = 1) -> float:
        """Return ``min(distinct_values, d + 1) x privacy_loss()``.

        The memo holds one report per sampled bucket holding the value, plus one for "none
        of them".
        """
        k = check_integer(distinct_values, "distinct_values", low=1)
        return min(k, self.sampled_bits + 1) * self.privacy_loss()

    def change_privacy_loss(self) -> float:
        """Return what a change to a value with a new memo key costs: one report's loss."""
        return self.privacy_loss()

    # -- sampling ------------------------------------------------------------------------------
    def _sample_buckets(self, n: int, gen: np.random.Generator) -> np.ndarray:
        """Draw d distinct buckets per device, uniform (public: independent of the value).

        Floyd's algorithm, vectorized over devices (a loop over the d draws): for j = k - d
        .. k - 1, draw t uniform in [0, j]; keep t unless already chosen, then j. Every
        d-subset comes out with probability 1 / C(k, d), in O(n d) work.
        """
        k, d = self.domain_size, self.sampled_bits
        check_memory(8.0 * n * d, f"len(values)={n} at sampled_bits={d}", f"{self.name}.randomize")
        chosen = np.empty((d, n), dtype=np.int64)  # one contiguous row per draw
        for i, j in enumerate(range(k - d, k)):
            t = gen.integers(0, j + 1, size=n, dtype=np.int64)
            if i <= _FEW_COLUMNS:  # draw by draw: numpy's reductions over a short axis are slow
                taken = np.zeros(n, dtype=bool)
                for c in range(i):
                    taken |= chosen[c] == t
            else:
                taken = (chosen[:i] == t[None, :]).any(axis=0)
            chosen[i] = np.where(taken, j, t)
        small = chosen.astype(index_dtype(k))
        if d > _FEW_COLUMNS:
            return np.sort(np.ascontiguousarray(small.T), axis=1)
        # odd-even transposition network over the draws: np.sort's per-row calls dominate
        # a few columns; d rounds of compare-exchange give the same ascending rows
        cols = list(small)
        for r in range(d):
            for c in range(r % 2, d - 1, 2):
                lo, hi = np.minimum(cols[c], cols[c + 1]), np.maximum(cols[c], cols[c + 1])
                cols[c], cols[c + 1] = lo, hi
        return np.stack(cols, axis=1)

    def _bits(self, buckets: np.ndarray, keys: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        """Bit i of each row: p where the memo key is i (the value is in sampled bucket i)."""
        big, small = self._thresholds()
        u = gen.integers(0, _U64_MAX, size=buckets.shape, dtype=np.uint64, endpoint=True)
        bits = u < np.uint64(small)
        # then the one bit per row whose bucket holds the value (about d/k of the rows):
        # the same words against the other threshold, without an (n, d) threshold array
        rows = np.flatnonzero(keys < buckets.shape[1])
        cols = keys[rows]
        bits[rows, cols] = u[rows, cols] < np.uint64(big)
        return bits.view(np.uint8)

    def _memo_keys(self, values: np.ndarray, state: np.ndarray | None) -> np.ndarray:
        """Position of each value among the sampled buckets, d when not sampled."""
        assert state is not None
        buckets = np.asarray(state).reshape(-1)
        where = buckets[None, :] == np.asarray(values)[:, None]
        return np.where(where.any(axis=1), where.argmax(axis=1), buckets.size)

    def _device_state(self, gen: np.random.Generator) -> np.ndarray:
        return self._sample_buckets(1, gen)[0].astype(np.int64)

    def _device_state_from_words(self, words: Any) -> np.ndarray:
        """Return the device's d sampled buckets (ascending) from 64-bit words.

        Floyd's algorithm as :meth:`_sample_buckets`, one ``t = words.below(j + 1)`` per
        draw: the order in which the JS client (``clients/js/src/longitudinal.js``) consumes
        :class:`ldpkit.device.DerivedWords`, so both derive the same buckets.
        """
        k, d = self.domain_size, self.sampled_bits
        chosen: list[int] = []
        for j in range(k - d, k):
            t = words.below(j + 1)
            chosen.append(j if t in chosen else t)
        return np.asarray(sorted(chosen), dtype=np.int64)

    def _permanent_from_words(self, key: int, words: Any, state: np.ndarray) -> np.ndarray:
        """Return the permanent row (buckets, bits) of memo key ``key`` from 64-bit words.

        One word per sampled bucket, in order: bit i is ``word < Tp`` where ``key == i``
        (the value is in sampled bucket i), else ``word < Tq`` (the JS client's order).
        """
        big, small = self._thresholds()
        bits = [int(words.u64() < (big if i == key else small)) for i in range(self.sampled_bits)]
        return np.concatenate([np.asarray(state, dtype=np.int64), np.asarray(bits, dtype=np.int64)])

    def _permanent_from_keys(
        self, keys: np.ndarray, gen: np.random.Generator, state: np.ndarray | None
    ) -> np.ndarray:
        assert state is not None
        buckets = np.tile(np.asarray(state, dtype=np.int64), (np.asarray(keys).size, 1))
        bits = self._bits(buckets, np.asarray(keys, dtype=np.int64), gen)
        return np.concatenate([buckets, bits.astype(np.int64)], axis=1)

    def _permanent_parts(
        self, values: np.ndarray, gen: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """Return each device's sampled buckets (ascending) and its bits (uint8)."""
        d, k = self.sampled_bits, self.domain_size
        if k <= _streamed.MAX_DOMAIN and d <= _streamed.MAX_BITS and not is_secure(gen):
            # seeded: per-stream xoshiro256** (kernel or numpy twin, the same bytes)
            n = values.shape[0]
            check_memory(
                2.0 * n * d, f"len(values)={n} at sampled_bits={d}", f"{self.name}.randomize"
            )
            seeds = derive_seeds(gen, _streamed.stream_count(n, d))
            buckets = np.empty((n, d), dtype=index_dtype(k))
            bits = np.empty((n, d), dtype=np.uint8)
            big, small = self._thresholds()
            _streamed.sample_dbitflip(values, seeds, k, big, small, buckets, bits)
            return buckets, bits
        bucket_gen, bit_gen = independent_streams(gen, 2)
        buckets = self._sample_buckets(values.shape[0], bucket_gen)
        v = np.asarray(values)
        if d <= _FEW_COLUMNS:  # the bucket holding the value (buckets are distinct), else d
            keys = np.full(v.shape[0], d, dtype=np.int64)
            for c in range(d):
                keys[buckets[:, c] == v] = c
        else:
            where = buckets == v[:, None]
            keys = np.where(where.any(axis=1), where.argmax(axis=1), d)
        return buckets, self._bits(buckets, keys, bit_gen)

    def _permanent_round(self, values: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        buckets, bits = self._permanent_parts(values, gen)
        return np.concatenate([buckets.astype(np.int64), bits.astype(np.int64)], axis=1)

    def _instantaneous_round(self, permanent: np.ndarray, gen: np.random.Generator) -> Reports:
        """No second round: the memoized report itself (``gen`` is not drawn from)."""
        perm = np.asarray(permanent, dtype=np.int64).reshape(-1, 2 * self.sampled_bits)
        d = self.sampled_bits
        return Reports(
            self,
            buckets=perm[:, :d].astype(index_dtype(self.domain_size)),
            bits=perm[:, d:].astype(np.uint8),
        )

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """One fresh report per device (its own sampled buckets and bits)."""
        v = self.check_values(values)
        # the permanent round's draws, without the memo's int64 rows
        buckets, bits = self._permanent_parts(v, as_generator(rng))
        return Reports(self, buckets=buckets, bits=bits)

    # -- the server ----------------------------------------------------------------------------
    def stats_schema(self) -> dict[str, StatsField]:
        """Return the Stats fields: ``ones`` and ``sampled`` per bucket.

        ``ones``: reports with that bucket sampled and its bit 1; ``sampled``: d buckets per
        report, so they sum to d n.
        """
        k, d = self.domain_size, self.sampled_bits
        return {"ones": StatsField((k,)), "sampled": StatsField((k,), total=d)}

    def empty_stats(self) -> Stats:
        """Return the Stats of no report (zero arrays): the neutral element of merge."""
        zeros = np.zeros(self.domain_size, dtype=np.int64)
        return Stats(self, 0, ones=zeros, sampled=zeros.copy())

    def aggregate(self, reports: Reports) -> Stats:
        """Reduce the reports to their mergeable Stats (fields: :meth:`stats_schema`)."""
        reports = self.check_reports(reports)
        k, d = self.domain_size, self.sampled_bits
        buckets, bits = reports._arrays.get("buckets"), reports._arrays.get("bits")
        if buckets is None or bits is None:
            raise ValueError(f"reports must have fields ('buckets', 'bits'), got {reports.fields}")
        if buckets.ndim != 2 or buckets.shape[1] != d or bits.shape != buckets.shape:
            raise ValueError(f"reports.buckets and reports.bits must have shape (n, {d})")
        if buckets.size and (int(buckets.max()) >= k or int(buckets.min()) < 0):
            raise ValueError(f"reports.buckets must be buckets in [0, {k})")
        if np.any(np.diff(buckets.astype(np.int64), axis=1) <= 0):
            raise ValueError("reports.buckets must be distinct and ascending in each report")
        if bits.size and int(bits.max()) > 1:
            raise ValueError("reports.bits must be 0 or 1")
        flat = buckets.astype(np.int64).ravel()
        sampled = np.bincount(flat, minlength=k)
        ones = np.bincount(flat, weights=bits.ravel().astype(np.float64), minlength=k)
        return Stats(self, len(reports), ones=ones.astype(np.int64), sampled=sampled)

    def variance(self, n: int, f: Any = None) -> Any:
        """Var of f_v from n reports at true frequency f (0 when f is None); see Notes."""
        n = check_integer(n, "n", low=1)
        p, q, ratio = self.p, self.q, self.domain_size / self.sampled_bits
        other = ratio * q * (1 - q) / (p - q) ** 2
        own = ratio * (p * (1 - q) ** 2 + (1 - p) * q**2) / (p - q) ** 2 - 1
        if f is None:
            return other / n
        f = check_frequencies(f, self.domain_size)
        return (f * own + (1 - f) * other) / n

    def estimate(self, stats: Stats, *, postprocess: str | None = None) -> FrequencyEstimate:
        """Estimate the bucket frequencies (unbiased) with their variance.

        Parameters
        ----------
        stats : Stats
            The aggregated reports (at least one).
        postprocess : str, optional
            A method of :data:`ldpkit.consistency.METHODS` applied to the unbiased estimate
            and recorded in ``postprocessing`` (the result is no longer unbiased). Those
            that need a pure oracle's ``(p, q)`` (``"ibu"``, ``"mle_apx"``) refuse this
            spec. ``"norm_mul"`` (negatives to 0, then scaled to sum 1) is what
            multi-freq-ldpy's ``dBitFlipPM_Aggregator_MI`` returns; it wins when a
            window has few reports.

        Returns
        -------
        FrequencyEstimate
            Frequencies of the k buckets; ``variance`` that of the unbiased estimate.
        """
        method = postprocess_method(postprocess)
        stats = self.check_stats(stats, nonempty=True)
        scale = self.domain_size / (stats.n * self.sampled_bits)
        freq = scale * (stats.ones - self.q * stats.sampled) / (self.p - self.q)
        var = self.variance(stats.n, np.clip(freq, 0.0, 1.0))
        est = FrequencyEstimate(freq, var, stats.n, spec=self)
        return est if method is None else method(est)

    # -- exact law, for small configurations ------------------------------------------------------
    def _subsets(self) -> list[tuple[int, ...]]:
        k, d = self.domain_size, self.sampled_bits
        if math.comb(k, d) << d > MAX_ENUMERABLE_OUTPUTS:
            raise NotImplementedError(
                f"{self.name} enumerates C(k, d) 2^d <= {MAX_ENUMERABLE_OUTPUTS} outputs, got "
                f"{math.comb(k, d) << d}"
            )
        return list(itertools.combinations(range(k), d))

    def transition_matrix(self) -> np.ndarray:
        """Return P[(buckets, bits) | value], shape (k, C(k, d) 2^d).

        Subset rank x 2^d + bits (first sampled bucket's bit most significant).
        """
        subsets, d, p, q = self._subsets(), self.sampled_bits, self.p, self.q
        k = self.domain_size
        codes = (np.arange(1 << d)[:, None] >> (d - 1 - np.arange(d))[None, :]) & 1
        matrix = np.zeros((k, len(subsets) << d))
        for r, subset in enumerate(subsets):
            for v in range(k):
                ones = np.where(np.asarray(subset) == v, p, q)
                law = np.prod(np.where(codes == 1, ones, 1 - ones), axis=1)
                matrix[v, r << d : (r + 1) << d] = law / len(subsets)
        return matrix

    def output_index(self, reports: Reports) -> np.ndarray:
        """Return the column of :meth:`transition_matrix` that each report is."""
        rank = {s: i for i, s in enumerate(self._subsets())}
        reports = self.check_reports(reports)
        d = self.sampled_bits
        weights = 1 << np.arange(d - 1, -1, -1)
        rows = [tuple(int(x) for x in b) for b in reports.buckets]  # tests only: small n
        subset_index = np.array([rank[r] for r in rows], dtype=np.int64)
        return (subset_index << d) + reports.bits.astype(np.int64) @ weights
