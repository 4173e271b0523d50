"""RS+FD: random sampling plus fake data (Arcolezi, Couchot, Al Bouna, Xiao, CIKM 2021).

Each user samples one attribute uniformly and randomizes its true value with a local
randomizer; for every other attribute she sends *fake data* drawn from what the randomizer
outputs on no information, so the report does not show which attribute was sampled:

* ``protocol="grr"`` (RS+FD[GRR]): the sampled attribute by GRR, the others uniform items;
* ``protocol="oue-z"`` (RS+FD[OUE-z]): the sampled attribute by OUE, the others OUE applied
  to the all-zero vector (every bit 1 with probability q).

**What epsilon means here.** ldpkit's ``epsilon`` is the guarantee for *any two tuples*
(standard LDP of the whole report), and ``privacy_loss()`` is computed from the realized law
over tuples. For RS+FD that loss equals the local randomizer's budget: two tuples that
differ in every attribute change every term of the mixture. The paper's "amplified"
budget ``eps' = ln(d (e^eps - 1) + 1)`` (its Theorem) protects tuples that differ in **one**
attribute at level ``eps``: :meth:`RSFD.attribute_privacy_loss` computes that loss exactly,
and :meth:`RSFD.from_attribute_epsilon` builds the paper's configuration (a spec whose
``epsilon`` is ``eps'``, the honest whole-tuple loss). At one whole-tuple budget RS+FD is
less accurate than :class:`~ldpkit.multidim.SMP` (the fake data only add noise).

Estimators (Arcolezi et al. sec. 4, with the realized p and q): for attribute j with
``k_j`` items and support counts ``C``,

* GRR: ``f = (d C / n - (d - 1) / k_j - q_j) / (p_j - q_j)``;
* OUE-z: ``f = d (C / n - q) / (p - q)``;

both unbiased, with ``Var = d^2 P (1 - P) / (n (p - q)^2)`` where ``P`` is the probability
that a report supports the item (``(q_j + (p_j - q_j) f) / d + (d - 1) / (d k_j)`` for GRR,
``q + (p - q) f / d`` for OUE-z); at f = 0 these are the paper's variance formulas.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar, Literal

import numpy as np

from .. import _crmath
from .._constraints import Alternatives, Options
from .._crmath import log1p as _log1p
from .._exact import RR_MAX_EPSILON, ratio_loss, rr_weights
from .._rng import RNGLike, as_generator
from .._validation import check_epsilon, check_integer
from ..estimate import FrequencyEstimate
from ..frequency import _bits
from ..frequency._base import index_dtype, postprocess_method
from ..frequency.grr import grr_sample
from ..frequency.unary import unary_integer_probabilities, unary_privacy_loss
from ..spec import Reports, Stats, StatsField
from ._base import MultiAttributeMechanism, MultiFrequencyEstimate

__all__ = ["RSFD"]

_SCALE = 1 << 64
#: Rows per chunk of the OUE-z sampler (bounds its n x sum(k) uint64 temporaries).
_CHUNK_ROWS = 1 << 14
#: Largest total of bits for which the OUE-z law is enumerated (transition_matrix()).
_MAX_ENUMERABLE_BITS = 12


@dataclasses.dataclass(frozen=True, kw_only=True)
class RSFD(MultiAttributeMechanism):
    """Random sampling plus fake data over a tuple of categorical attributes.

    Parameters
    ----------
    epsilon : float
        Budget of the local randomizer, which is the exact LDP loss of the whole report for
        any two tuples (in ``[1e-6, 40]``). Use :meth:`from_attribute_epsilon` for the
        paper's per-attribute guarantee.
    domain_sizes : sequence of int
        Items per attribute (at least 2 attributes).
    protocol : {"grr", "oue-z"}
        The local randomizer and its fake data.

    Notes
    -----
    Reports: ``values`` (``(n, d)`` items) for GRR; ``bits`` (the d one-hot blocks of
    ``domain_sizes[j]`` bits, concatenated and packed, ``np.packbits(axis=1)``) for OUE-z.
    Sampling is exact: the attribute and the fake items by uniform integers, GRR by
    :func:`ldpkit.frequency.grr.grr_sample`'s integer weights, each OUE bit by a uniform
    64-bit integer below OUE's integer thresholds.

    References
    ----------
    H. H. Arcolezi, J.-F. Couchot, B. Al Bouna, X. Xiao. Random Sampling Plus Fake Data:
    Multidimensional Frequency Estimates With Local Differential Privacy. CIKM 2021,
    sections 4.1-4.3 (protocol, estimators, variances).

    Examples
    --------
    >>> rsfd = RSFD(epsilon=2.0, domain_sizes=(3, 4))
    >>> round(rsfd.privacy_loss(), 9), round(rsfd.attribute_privacy_loss(), 4)
    (2.0, 1.5022)
    >>> paper = RSFD.from_attribute_epsilon(1.0, domain_sizes=(3, 4), protocol="oue-z")
    >>> round(paper.attribute_privacy_loss(), 9), round(paper.epsilon, 4)
    (1.0, 1.4899)
    """

    protocol: Literal["grr", "oue-z"] = "grr"

    max_epsilon: ClassVar[float] = RR_MAX_EPSILON
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "protocol": [Options("grr", "oue-z")]
    }

    def _validate(self) -> None:
        super()._validate()
        if self.protocol == "oue-z":
            self._thresholds()  # raises for an epsilon too small for 64-bit thresholds

    @classmethod
    def from_attribute_epsilon(
        cls, epsilon: float, *, domain_sizes: Any, protocol: Literal["grr", "oue-z"] = "grr"
    ) -> RSFD:
        """Return the paper's configuration.

        Local budget ``ln(d (e^eps - 1) + 1)`` (CIKM 2021, sec. 4.1), which protects tuples
        differing in one attribute at about ``eps`` (:meth:`attribute_privacy_loss`; exactly
        for OUE-z). The spec's ``epsilon`` is that local budget: the whole-tuple loss.
        """
        epsilon = check_epsilon(epsilon, high=RR_MAX_EPSILON)
        probe = cls(epsilon=1.0, domain_sizes=domain_sizes, protocol=protocol)
        d = probe.attributes
        local = math.log(d * math.expm1(epsilon) + 1.0)
        return cls(
            epsilon=min(local, RR_MAX_EPSILON), domain_sizes=probe.domain_sizes, protocol=protocol
        )

    # -- the law -------------------------------------------------------------------------
    def _grr_weights(self, j: int) -> tuple[int, int]:
        return rr_weights(self.epsilon, self.domain_sizes[j] - 1)

    def _grr_pq(self, j: int) -> tuple[float, float]:
        w_keep, w_other = self._grr_weights(j)
        total = w_keep + (self.domain_sizes[j] - 1) * w_other
        return w_keep / total, w_other / total

    def _thresholds(self) -> tuple[int, int]:
        # OUE's p = 1/2, q = 1/(e^eps + 1), rounded to 2^-64 within epsilon (as ldpkit.OUE)
        # correctly rounded exp: the thresholds are the same on every CPU and in the JS client
        q = 1.0 / (_crmath.exp(self.epsilon) + 1.0)
        return unary_integer_probabilities(0.5, q, self.epsilon)

    def pq(self, j: int) -> tuple[float, float]:
        """Realized (p, q) of attribute j's local randomizer."""
        if self.protocol == "grr":
            return self._grr_pq(j)
        big, small = self._thresholds()
        return big / _SCALE, small / _SCALE

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Sample one attribute per user, randomize it, fake the others."""
        x = self.check_values(values)
        gen = as_generator(rng)
        n, d = x.shape
        which = np.asarray(gen.integers(0, d, size=n, dtype=np.int64))
        if self.protocol == "grr":
            sizes = np.asarray(self.domain_sizes, dtype=np.int64)
            out = np.asarray(gen.integers(0, sizes[None, :], size=(n, d), dtype=np.int64))
            for j, k in enumerate(self.domain_sizes):  # a loop over attributes, not users
                mine = which == j
                out[mine, j] = grr_sample(x[mine, j], k, self._grr_weights(j), gen)
            return Reports(self, values=out.astype(index_dtype(max(self.domain_sizes))))
        total = int(sum(self.domain_sizes))
        big, small = self._thresholds()
        packed = np.empty((n, _bits.packed_width(total)), dtype=np.uint8)
        hot = self.offsets[which] + x[np.arange(n), which]  # the sampled attribute's bit
        for start in range(0, n, _CHUNK_ROWS):
            stop = min(n, start + _CHUNK_ROWS)
            u = gen.integers(
                0, _SCALE - 1, size=(stop - start, total), dtype=np.uint64, endpoint=True
            )
            bits = u < np.uint64(small)
            rows = np.arange(stop - start)
            bits[rows, hot[start:stop]] = u[rows, hot[start:stop]] < np.uint64(big)
            packed[start:stop] = np.packbits(bits, axis=1)
        return Reports(self, bits=packed)

    def stats_schema(self) -> dict[str, StatsField]:
        """Return the Stats fields: ``counts`` of every item of every attribute, concatenated.

        GRR: one item per attribute per report, so they sum to d n.
        """
        shape = (int(sum(self.domain_sizes)),)
        if self.protocol == "grr":
            return {"counts": StatsField(shape, total=self.attributes)}
        return {"counts": StatsField(shape)}

    def aggregate(self, reports: Reports) -> Stats:
        """Reduce the reports to their mergeable Stats: counts of every item of every attribute."""
        r = self.check_reports(reports)
        total = int(sum(self.domain_sizes))
        if self.protocol == "grr":
            return Stats(self, r.values.shape[0], counts=self._item_counts(r.values))
        packed = _bits.check_packed(r.bits, total)
        return Stats(self, packed.shape[0], counts=_bits.column_counts(packed, total))

    def _support_probability(self, j: int, f: Any) -> Any:
        """P[a report supports an item of attribute j | its frequency f]."""
        p, q = self.pq(j)
        d, k = self.attributes, self.domain_sizes[j]
        if self.protocol == "grr":
            return (q + (p - q) * f) / d + (d - 1) / (d * k)
        return q + (p - q) * f / d

    def estimate(self, stats: Stats, *, postprocess: str | None = None) -> MultiFrequencyEstimate:
        """Estimate every attribute's frequencies (unbiased unless ``postprocess``).

        ``postprocess``: a consistency method that needs no oracle spec, e.g.
        ``"norm_sub"``, applied to each.
        """
        postprocess_method(postprocess)  # checked before any work
        stats = self.check_stats(stats, nonempty=True)
        n, d, o = stats.n, self.attributes, self.offsets
        ests = []
        for j, k in enumerate(self.domain_sizes):
            p, q = self.pq(j)
            share = stats.counts[o[j] : o[j + 1]] / n
            if self.protocol == "grr":
                f = (d * share - (d - 1) / k - q) / (p - q)
            else:
                f = d * (share - q) / (p - q)
            ests.append(FrequencyEstimate(f, self.cell_variance(j, n, np.clip(f, 0.0, 1.0)), n))
        out = MultiFrequencyEstimate(tuple(ests), n, spec=self)
        return out if postprocess is None else out.postprocess(postprocess)

    def cell_variance(self, j: int, n: int, f: Any) -> Any:
        """``d^2 P (1 - P) / (n (p - q)^2)`` for attribute j's items at frequency f."""
        n = check_integer(n, "n", low=1)
        p, q = self.pq(j)
        prob = self._support_probability(j, f)
        return self.attributes**2 * prob * (1.0 - prob) / (n * (p - q) ** 2)

    def variance(self, n: int) -> np.ndarray:
        """Return the paper's variance (f = 0) of every item from n reports, concatenated."""
        return np.concatenate(
            [np.full(k, self.cell_variance(j, n, 0.0)) for j, k in enumerate(self.domain_sizes)]
        )

    # -- privacy ---------------------------------------------------------------------------
    def _mixture_ratios(self) -> list[tuple[float, float]]:
        """Return, per attribute, the extreme likelihood ratios of its term of the mixture.

        The mixture is ``P[y | x] = (1/d) sum_j r_j(y_j, x_j) prod_i P_fake(y_i)``.
        """
        out = []
        for j, k in enumerate(self.domain_sizes):
            p, q = self.pq(j)
            if self.protocol == "grr":
                out.append((k * p, k * q))
            else:
                out.append((p / q, (1.0 - p) / (1.0 - q)))
        return out

    def privacy_loss(self) -> float:
        """Return the exact loss for any two tuples.

        ``log(sum_j hi_j / sum_j lo_j)``, every term at its largest under one tuple and its
        smallest under the other (the local loss).
        """
        if self.protocol == "oue-z":
            return unary_privacy_loss(*self._thresholds())
        if len(set(self.domain_sizes)) == 1:  # one ratio w_keep / w_other: exactly
            return ratio_loss(*reversed(self._grr_weights(0)))
        r = self._mixture_ratios()
        hi, lo = sum(a for a, _ in r), sum(b for _, b in r)
        return _log1p((hi - lo) / lo)

    def attribute_privacy_loss(self) -> float:
        """Return the exact loss for two tuples that differ in one attribute (the paper's notion).

        ``max_j log((hi_j + S_j) / (lo_j + S_j))``, ``S_j = sum_{i != j} lo_i``.
        """
        r = self._mixture_ratios()
        lows = sum(b for _, b in r)
        return max(_log1p((a - b) / lows) for a, b in r)

    def transition_matrix(self) -> np.ndarray:
        """Return P[report | input tuple] for small domains.

        GRR: output tuples row-major; OUE-z: the bit vectors as integers, first bit most
        significant.
        """
        tuples = self._tuples()
        d = self.attributes
        if self.protocol == "grr":
            m = np.zeros((tuples.shape[0], tuples.shape[0]))
            for j in range(d):
                p, q = self._grr_pq(j)
                k = self.domain_sizes[j]
                term = np.ones((1, 1))
                for i, ki in enumerate(self.domain_sizes):
                    if i == j:
                        g = np.full((ki, ki), q)
                        np.fill_diagonal(g, p)
                    else:
                        g = np.full((ki, ki), 1.0 / ki)
                    term = np.kron(term, g)
                m += term / d
                del k
            return m
        total = int(sum(self.domain_sizes))
        if total > _MAX_ENUMERABLE_BITS:
            raise NotImplementedError(
                f"RSFD(oue-z) enumerates its 2^{total} outputs only up to "
                f"{_MAX_ENUMERABLE_BITS} bits"
            )
        outputs = np.arange(1 << total)
        bits = (outputs[:, None] >> (total - 1 - np.arange(total))[None, :]) & 1
        p, q = self.pq(0)
        base = np.prod(np.where(bits == 1, q, 1.0 - q), axis=1)  # all bits fake
        m = np.zeros((tuples.shape[0], 1 << total))
        o = self.offsets
        for row, x in enumerate(tuples):
            for j in range(d):
                col = bits[:, o[j] + x[j]]
                ratio = np.where(col == 1, p / q, (1.0 - p) / (1.0 - q))
                m[row] += base * ratio / d
        return m

    def output_index(self, reports: Reports) -> np.ndarray:
        """Return the column of :meth:`transition_matrix` that each report is."""
        r = self.check_reports(reports)
        if self.protocol == "grr":
            return self._tuple_index(r.values)
        total = int(sum(self.domain_sizes))
        packed = _bits.check_packed(r.bits, total)
        index = np.zeros(packed.shape[0], dtype=np.int64)
        for j in range(packed.shape[1]):
            index = (index << 8) | packed[:, j]
        return index >> (8 * packed.shape[1] - total)
