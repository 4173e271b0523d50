"""SPL and SMP: the two classic ways to send a tuple of attributes under one budget.

* :class:`SPL` splits the budget: every user sends every attribute with GRR at
  ``epsilon / d`` (sequential composition).
* :class:`SMP` samples an attribute: every user draws one attribute uniformly and sends it,
  with its index, by GRR at the whole ``epsilon``.

These are :class:`ldpkit.Survey`'s ``split="epsilon"`` and ``split="users"`` for the case
where every question is a categorical attribute with GRR, as one spec: one Reports batch,
one mergeable Stats, and the per-attribute oracle is a :class:`ldpkit.GRR` spec (so every
:mod:`ldpkit.consistency` method, IBU included, applies to each attribute's estimate).
``Survey`` remains the way to mix oracles and numerical questions.

References
----------
T. Wang, J. Blocki, N. Li, S. Jha. Locally Differentially Private Protocols for Frequency
Estimation. USENIX Security 2017, section 6 (multiple attributes).
H. H. Arcolezi, J.-F. Couchot, B. Al Bouna, X. Xiao. Random Sampling Plus Fake Data:
Multidimensional Frequency Estimates With Local Differential Privacy. CIKM 2021, section 3
(Spl and Smp, and their variances).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from .._rng import RNGLike, as_generator
from .._validation import MIN_EPSILON
from ..estimate import FrequencyEstimate
from ..frequency._base import index_dtype, postprocess_method
from ..frequency.grr import GRR, grr_sample
from ..spec import Reports, Stats, StatsField
from ._base import MultiAttributeMechanism, MultiFrequencyEstimate, split_min_epsilon

__all__ = ["SPL", "SMP"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class SPL(MultiAttributeMechanism):
    """Budget splitting: each attribute by GRR at ``epsilon / d`` (Arcolezi et al. sec. 3.1).

    Parameters
    ----------
    epsilon : float
        The whole tuple's budget (in ``[1e-6, 40]``); each attribute gets ``epsilon / d``.
    domain_sizes : sequence of int
        Items per attribute.

    Notes
    -----
    Reports: ``values``, an ``(n, d)`` array of GRR outputs. The estimator of attribute j is
    GRR's, ``(C/n - q_j) / (p_j - q_j)``, unbiased with variance
    ``(q_j(1-q_j) + f (p_j-q_j)(1-p_j-q_j)) / (n (p_j-q_j)^2)`` (FO17 eq. 2) at
    ``epsilon / d``. ``privacy_loss()`` is the sum of the attributes' exact losses (two
    tuples may differ in every attribute).

    Examples
    --------
    >>> spl = SPL(epsilon=2.0, domain_sizes=(3, 4))
    >>> est = spl.run([[0, 1], [2, 3], [1, 1]], rng=0)
    >>> len(est), est[1].frequencies.shape
    (2, (4,))
    """

    max_epsilon = 40.0

    def _validate(self) -> None:
        super()._validate()
        if self.epsilon / self.attributes < MIN_EPSILON:
            raise ValueError(
                f"epsilon must be >= {self.min_epsilon!r} for {self.attributes} attributes "
                f"(each attribute's GRR gets epsilon / d >= {MIN_EPSILON:g}), got {self.epsilon!r}"
            )

    @property
    def min_epsilon(self) -> float:
        """The smallest budget: each of the d attributes needs ``epsilon / d >= 1e-6``."""
        return split_min_epsilon(MIN_EPSILON, self.attributes)

    def oracle(self, j: int) -> GRR:
        """Return the GRR spec that sends attribute j (at ``epsilon / d``)."""
        return GRR(epsilon=self.epsilon / self.attributes, domain_size=self.domain_sizes[j])

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Perturb every attribute of every user; ``reports.values`` is ``(n, d)``."""
        x = self.check_values(values)
        gen = as_generator(rng)
        out = np.empty(x.shape, dtype=index_dtype(max(self.domain_sizes)))
        for j, k in enumerate(self.domain_sizes):  # a loop over attributes, not users
            out[:, j] = grr_sample(x[:, j], k, self.oracle(j)._weights(), gen)
        return Reports(self, values=out)

    def stats_schema(self) -> dict[str, StatsField]:
        """Return the Stats fields: ``counts``, the d per-attribute histograms (sum d n)."""
        return {"counts": StatsField((int(sum(self.domain_sizes)),), total=self.attributes)}

    def aggregate(self, reports: Reports) -> Stats:
        """Reduce the reports to their mergeable Stats: per-attribute histograms."""
        y = self.check_reports(reports).values
        return Stats(self, y.shape[0], counts=self._item_counts(y))

    def estimate(self, stats: Stats, *, postprocess: str | None = None) -> MultiFrequencyEstimate:
        """Estimate every attribute's frequencies by GRR (unbiased unless ``postprocess``).

        ``postprocess``: a consistency method applied to each.
        """
        postprocess_method(postprocess)  # checked before any work
        stats = self.check_stats(stats, nonempty=True)
        o = self.offsets
        ests = []
        for j in range(self.attributes):
            g = self.oracle(j)
            ests.append(g.estimate(Stats(g, stats.n, counts=stats.counts[o[j] : o[j + 1]])))
        out = MultiFrequencyEstimate(tuple(ests), stats.n, spec=self)
        return out if postprocess is None else out.postprocess(postprocess)

    def variance(self, n: int) -> np.ndarray:
        """Var* of every item (f = 0 term, FO17 eq. 3) from n reports, concatenated."""
        return np.concatenate(
            [np.full(k, self.oracle(j).variance(n)) for j, k in enumerate(self.domain_sizes)]
        )

    def privacy_loss(self) -> float:
        """Sum of the attributes' exact GRR losses (the worst pair differs everywhere)."""
        return float(sum(self.oracle(j).privacy_loss() for j in range(self.attributes)))

    def transition_matrix(self) -> np.ndarray:
        """P[output tuple | input tuple] (tuples row-major), for small products of sizes."""
        self._tuples()  # raises NotImplementedError beyond the enumerable size
        m = np.ones((1, 1))
        for j in range(self.attributes):
            m = np.kron(m, self.oracle(j).transition_matrix())
        return m

    def output_index(self, reports: Reports) -> np.ndarray:
        """Return the column of :meth:`transition_matrix` that each report is."""
        return self._tuple_index(self.check_reports(reports).values)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SMP(MultiAttributeMechanism):
    """Attribute sampling.

    One uniform attribute per user, by GRR at the whole budget (Arcolezi et al. sec. 3.2;
    Wang et al. 2017 sec. 6).

    Parameters
    ----------
    epsilon : float
        The whole tuple's budget (in ``[1e-6, 40]``), spent on the one sampled attribute.
    domain_sizes : sequence of int
        Items per attribute.

    Notes
    -----
    Reports: ``attributes`` (the sampled index, public) and ``values`` (its GRR output).
    The estimate of attribute j uses its ``n_j`` reports: GRR's unbiased estimator, with
    variance ``(q(1-q) + f (p-q)(1-p-q)) / (n_j (p-q)^2)`` given ``n_j`` and the sampled
    users, plus their sampling error ``f (1-f) (n - n_j) / (n_j (n - 1))``; with
    ``E[n_j] = n / d`` that is the paper's ``d q(1-q) / (n (p-q)^2)`` at f = 0
    (:meth:`variance`). ``privacy_loss()``: the largest attribute's GRR loss (the
    sampled index does not depend on the tuple).

    Examples
    --------
    >>> smp = SMP(epsilon=2.0, domain_sizes=(3, 4))
    >>> reports = smp.randomize([[0, 1], [2, 3], [1, 1], [0, 0]], rng=0)
    >>> reports.fields
    ('attributes', 'values')
    """

    max_epsilon = 40.0

    def oracle(self, j: int) -> GRR:
        """Return the GRR spec that sends attribute j (at the whole epsilon)."""
        return GRR(epsilon=self.epsilon, domain_size=self.domain_sizes[j])

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Sample one attribute per user and perturb it."""
        x = self.check_values(values)
        gen = as_generator(rng)
        n, d = x.shape
        which = np.asarray(gen.integers(0, d, size=n, dtype=np.int64))  # exactly uniform
        v = x.reshape(-1)[np.arange(0, n * d, d) + which]  # one flat gather
        # Users grouped by attribute, in row order within a group (a stable radix sort of
        # small integers): each attribute's GRR draws one slice, in the same order as a
        # boolean mask per attribute would, without d masks over all users.
        order = np.argsort(which.astype(index_dtype(d)), kind="stable")
        ends = np.cumsum(np.bincount(which, minlength=d))
        grouped_values = v[order]
        grouped = np.empty(n, dtype=np.int64)
        start = 0
        for j, k in enumerate(self.domain_sizes):
            stop = int(ends[j])
            mine = grouped_values[start:stop]
            grouped[start:stop] = grr_sample(mine, k, self.oracle(j)._weights(), gen)
            start = stop
        out = np.empty(n, dtype=index_dtype(max(self.domain_sizes)))
        out[order] = grouped
        return Reports(self, attributes=which.astype(index_dtype(d)), values=out)

    def stats_schema(self) -> dict[str, StatsField]:
        """Return the Stats fields: ``counts``, per-attribute histograms (sum to n)."""
        return {"counts": StatsField((int(sum(self.domain_sizes)),), total=1)}

    def aggregate(self, reports: Reports) -> Stats:
        """Reduce the reports to their mergeable Stats: histograms of the sampled attributes."""
        r = self.check_reports(reports)
        a, y = r.attributes, r.values
        if a.ndim != 1 or y.ndim != 1:
            raise ValueError("reports.attributes and reports.values must be 1-D")
        a64, y64 = a.astype(np.int64), y.astype(np.int64)
        if a.size and int(a64.max()) >= self.attributes:
            raise ValueError(f"reports.attributes must be in [0, {self.attributes})")
        sizes = np.asarray(self.domain_sizes)
        if y.size and np.any(y64 >= sizes[a64]):
            raise ValueError("reports.values must be items in [0, domain_sizes[attribute])")
        counts = np.bincount(self.offsets[a64] + y64, minlength=int(sum(self.domain_sizes)))
        return Stats(self, len(r), counts=counts)

    def estimate(self, stats: Stats, *, postprocess: str | None = None) -> MultiFrequencyEstimate:
        """Every attribute's GRR estimate from its own reports.

        Raises ValueError when some attribute has no report (no estimate from nobody).
        """
        postprocess_method(postprocess)  # checked before any work
        stats = self.check_stats(stats, nonempty=True)
        o = self.offsets
        ests = []
        for j in range(self.attributes):
            c = stats.counts[o[j] : o[j + 1]]
            n_j = int(c.sum())
            if n_j == 0:
                raise ValueError(
                    f"stats must hold at least one report of every attribute, got none of "
                    f"attribute {j}"
                )
            g = self.oracle(j)
            est = g.estimate(Stats(g, n_j, counts=c))
            ests.append(est.replace(variance=est.variance + self._sampling_variance(est, stats.n)))
        out = MultiFrequencyEstimate(tuple(ests), stats.n, spec=self)
        return out if postprocess is None else out.postprocess(postprocess)

    @staticmethod
    def _sampling_variance(est: FrequencyEstimate, n: int) -> np.ndarray:
        """Return the sampling variance of each frequency of one attribute.

        The reporters of an attribute are a uniform sample of ``n_j`` of the n users: their
        own frequencies vary by ``f (1 - f) / n_j (n - n_j) / (n - 1)`` (sampling
        without replacement) around the population's.
        """
        f = np.clip(est.frequencies, 0.0, 1.0)
        n_j = est.n
        return f * (1.0 - f) / n_j * (n - n_j) / max(n - 1, 1)

    def variance(self, n: int) -> np.ndarray:
        """Var* (f = 0) of every item from n reports: GRR's at ``n / d`` reports."""
        d = self.attributes
        return np.concatenate(
            [np.full(k, d * self.oracle(j).variance(n)) for j, k in enumerate(self.domain_sizes)]
        )

    def privacy_loss(self) -> float:
        """Return the largest exact epsilon of the per-attribute oracles."""
        return float(max(self.oracle(j).privacy_loss() for j in range(self.attributes)))

    def transition_matrix(self) -> np.ndarray:
        """P[(attribute, output) | input tuple]: columns are ``offsets[j] + y``."""
        tuples = self._tuples()
        d = self.attributes
        m = np.zeros((tuples.shape[0], int(sum(self.domain_sizes))))
        o = self.offsets
        for j in range(d):
            g = self.oracle(j).transition_matrix()
            m[:, o[j] : o[j + 1]] = g[tuples[:, j]] / d
        return m

    def output_index(self, reports: Reports) -> np.ndarray:
        """Return the column of :meth:`transition_matrix` that each report is."""
        r = self.check_reports(reports)
        return self.offsets[r.attributes.astype(np.int64)] + r.values.astype(np.int64)
