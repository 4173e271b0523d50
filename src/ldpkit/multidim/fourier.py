"""The Fourier baseline for k-way marginals (Cormode, Kulkarni, Srivastava, SIGMOD 2018).

Every attribute is written in ``b_a = ceil(log2 k_a)`` bits; a ``way``-way marginal over
attributes A is the distribution of their ``L = sum_{a in A} b_a`` bits, which is fixed by the
Hadamard (Fourier) coefficients ``theta_S = E[(-1)^{<x, S>}]`` of the non-empty bit sets
``S`` inside those bits: ``P[x_A = z] = 2^-L sum_{S} theta_S (-1)^{<z, S>}`` (theta of the
empty set = 1). Each user draws one coefficient of the needed set ``T`` uniformly (public)
and sends the parity ``<x, S> mod 2`` through binary randomized response at the whole budget
(the paper's InpHT). The server estimates each coefficient from its group and transforms.
Marginals that share bits share coefficients (their bit-level tables agree; the cells of
codes beyond an attribute's k_a, whose true mass is 0, are dropped from each table).
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, ClassVar

import numpy as np

from .._constraints import Alternatives, Integer, Ref
from .._exact import RR_MAX_EPSILON, coin, ratio_loss, rr_probabilities, rr_weights
from .._rng import RNGLike, as_generator
from .._validation import check_integer
from ..frequency._base import index_dtype
from ..frequency.hadamard import fwht
from ..spec import Reports, Stats, StatsField
from ._base import MultiAttributeMechanism
from .marginals import MarginalsEstimate, MarginalTable

__all__ = ["Fourier"]

#: Most coefficients the server tracks (two counts each).
MAX_COEFFICIENTS = 1 << 22


@dataclasses.dataclass(frozen=True, kw_only=True)
class Fourier(MultiAttributeMechanism):
    """Every ``way``-way marginal through Hadamard coefficients (CKS SIGMOD 2018, InpHT).

    Parameters
    ----------
    epsilon : float
        The report's budget (one randomized parity bit).
    domain_sizes : sequence of int
        Items per attribute (at most 62 bits in all).
    way : int
        Order of the marginals (2 to d).

    Notes
    -----
    Reports: ``coefficients`` (the index of the user's bit set in :attr:`coefficient_masks`)
    and ``values`` (the randomized parity, 0 or 1). With ``p = e^eps / (e^eps + 1)``
    (realized by integer weights), ``theta_S = (1 - 2 ones_S / n_S) / (2p - 1)``, unbiased,
    with variance ``(1 - (2p-1)^2) / (n_S (2p-1)^2) + (1 - theta^2)(n - n_S)/(n_S (n - 1))``
    (the parity's flips, then the group's sampling). Every cell of a marginal over L bits
    has variance ``4^-L sum_S Var(theta_S)`` (independent groups); cells of codes beyond
    ``k_a`` hold no item and are dropped.

    References
    ----------
    G. Cormode, T. Kulkarni, D. Srivastava. Marginal Release Under Local Differential
    Privacy. SIGMOD 2018, sections 4.2-4.3 (InpHT).

    Examples
    --------
    >>> fourier = Fourier(epsilon=2.0, domain_sizes=(3, 4, 2))
    >>> len(fourier.coefficient_masks)  # every non-empty bit set of each pair's bits
    22
    """

    way: int = 2

    max_epsilon: ClassVar[float] = RR_MAX_EPSILON
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "way": [Integer(2, Ref("attributes"))]
    }

    def _validate(self) -> None:
        super()._validate()
        total_bits = sum(self.bit_widths)
        if total_bits > 62:
            raise ValueError(f"domain_sizes must fit in 62 bits in all, got {total_bits}")
        count = 0
        for attrs in itertools.combinations(range(self.attributes), self.way):
            count += 2 ** sum(self.bit_widths[a] for a in attrs)
            if count > MAX_COEFFICIENTS:
                raise ValueError(
                    f"domain_sizes and way must need at most {MAX_COEFFICIENTS} coefficients, "
                    f"got more for way = {self.way}"
                )

    @property
    def bit_widths(self) -> tuple[int, ...]:
        """Bits per attribute (at least 1)."""
        return tuple(max(1, (k - 1).bit_length()) for k in self.domain_sizes)

    @property
    def bit_offsets(self) -> tuple[int, ...]:
        """First bit of each attribute in the concatenated code."""
        return tuple(int(v) for v in np.concatenate([[0], np.cumsum(self.bit_widths)[:-1]]))

    @property
    def marginal_sets(self) -> tuple[tuple[int, ...], ...]:
        """Every set of ``way`` attributes, in lexicographic order."""
        return tuple(itertools.combinations(range(self.attributes), self.way))

    def _local_masks(self, attrs: tuple[int, ...]) -> np.ndarray:
        """Global bit mask of every subset (by local index) of the attributes' bits."""
        positions = [self.bit_offsets[a] + t for a in attrs for t in range(self.bit_widths[a])]
        local = np.arange(1 << len(positions), dtype=np.int64)
        masks = np.zeros_like(local)
        for t, pos in enumerate(positions):
            masks |= ((local >> t) & 1) << pos
        return masks

    @property
    def coefficient_masks(self) -> np.ndarray:
        """The needed bit sets, sorted (global masks over the concatenated bits)."""
        masks = np.unique(np.concatenate([self._local_masks(a) for a in self.marginal_sets]))
        return masks[masks != 0]

    def _weights(self) -> tuple[int, int]:
        return rr_weights(self.epsilon, 1)

    @property
    def p(self) -> float:
        """Realized P[the parity is sent unflipped]."""
        return rr_probabilities(self.epsilon, 1)[0]

    def _codes(self, x: np.ndarray) -> np.ndarray:
        code = np.zeros(x.shape[0], dtype=np.int64)
        for a, off in enumerate(self.bit_offsets):
            code |= x[:, a] << off
        return code

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Draw one bit set per user and send her parity on it by randomized response."""
        x = self.check_values(values)
        gen = as_generator(rng)
        masks = self.coefficient_masks
        which = np.asarray(gen.integers(0, masks.size, size=x.shape[0], dtype=np.int64))
        parity = np.bitwise_count(self._codes(x) & masks[which]) & 1
        w_keep, w_other = self._weights()
        flip = coin(gen, x.shape[0], w_other, w_keep + w_other)
        return Reports(
            self,
            coefficients=which.astype(index_dtype(masks.size)),
            values=(parity ^ flip).astype(np.uint8),
        )

    def stats_schema(self) -> dict[str, StatsField]:
        """``ones``: reports of parity 1 per bit set; ``sizes``: reports per bit set."""
        t = int(self.coefficient_masks.size)
        return {"ones": StatsField((t,)), "sizes": StatsField((t,), total=1)}

    def aggregate(self, reports: Reports) -> Stats:
        """Reduce the reports to their mergeable Stats: sums and counts per coefficient."""
        r = self.check_reports(reports)
        t = int(self.coefficient_masks.size)
        which, y = r.coefficients, r.values
        if which.ndim != 1 or (which.size and int(which.max()) >= t):
            raise ValueError(f"reports.coefficients must be indices in [0, {t})")
        if y.ndim != 1 or (y.size and int(y.max()) > 1):
            raise ValueError("reports.values must be parities, 0 or 1")
        w = which.astype(np.int64)
        ones = np.bincount(w[y.astype(bool)], minlength=t)
        return Stats(self, len(r), ones=ones, sizes=np.bincount(w, minlength=t))

    def coefficients(self, stats: Stats) -> tuple[np.ndarray, np.ndarray]:
        """Estimate ``theta_S`` of every needed bit set (unbiased) and its variance.

        A bit set with no report: 0 with variance 1, a bound on its squared error, since
        |theta| <= 1.
        """
        stats = self.check_stats(stats, nonempty=True)
        sizes = stats.sizes.astype(np.float64)
        empty = sizes == 0
        sizes[empty] = 1.0  # (placeholders: set below)
        n = stats.n
        gain = 2.0 * self.p - 1.0
        theta = (1.0 - 2.0 * stats.ones / sizes) / gain
        tc = np.clip(theta, -1.0, 1.0)
        var = (1.0 - gain**2) / (sizes * gain**2) + (1.0 - tc**2) * (n - sizes) / (
            sizes * max(n - 1, 1)
        )
        # a bit set nobody drew: theta = 0 with variance 1, the most its error can square to
        theta[empty], var[empty] = 0.0, 1.0
        return theta, var

    def estimate(self, stats: Stats) -> MarginalsEstimate:
        """Every ``way``-way marginal by the inverse Hadamard transform of its coefficients."""
        theta, var = self.coefficients(stats)
        masks = self.coefficient_masks
        tables = []
        for attrs in self.marginal_sets:
            local = self._local_masks(attrs)
            idx = np.searchsorted(masks, local[1:])
            coef = np.concatenate([[1.0], theta[idx]])
            bits = sum(self.bit_widths[a] for a in attrs)
            probs = fwht(coef) / (1 << bits)
            # local code z = x_first + x_second 2^b_first + ...: axes reversed in C order
            shaped = probs.reshape([1 << self.bit_widths[a] for a in reversed(attrs)])
            table = np.transpose(shaped, list(reversed(range(len(attrs)))))
            table = table[tuple(slice(0, self.domain_sizes[a]) for a in attrs)]
            cell_var = float(var[idx].sum()) / 4.0**bits
            tables.append(MarginalTable(attrs, table, np.full(table.shape, cell_var), stats.n))
        return MarginalsEstimate(tuple(tables), stats.n, spec=self)

    def variance(self, n: int) -> np.ndarray:
        """Var of one coefficient from n reports (``n / |T|`` per coefficient, theta = 0)."""
        n = check_integer(n, "n", low=1)
        gain = 2.0 * self.p - 1.0
        t = self.coefficient_masks.size
        return np.full(t, t * (1.0 - gain**2) / (n * gain**2))

    def privacy_loss(self) -> float:
        """Return the exact epsilon of one report, from the integer weights."""
        return ratio_loss(*reversed(self._weights()))

    def transition_matrix(self) -> np.ndarray:
        """P[(bit set, parity) | tuple] (columns ``2 * index + parity``), small domains."""
        tuples = self._tuples()
        masks = self.coefficient_masks
        parity = np.bitwise_count(self._codes(tuples)[:, None] & masks[None, :]) & 1
        p = self.p
        out = np.empty((tuples.shape[0], 2 * masks.size))
        out[:, 0::2] = np.where(parity == 0, p, 1.0 - p) / masks.size
        out[:, 1::2] = np.where(parity == 1, p, 1.0 - p) / masks.size
        return out

    def output_index(self, reports: Reports) -> np.ndarray:
        """Return the column of :meth:`transition_matrix` that each report is."""
        r = self.check_reports(reports)
        return 2 * r.coefficients.astype(np.int64) + r.values.astype(np.int64)

    def _contract_check_estimate(self, estimate: Any, stats: Stats) -> None:
        assert isinstance(estimate, MarginalsEstimate), type(estimate).__name__
        for t, attrs in zip(estimate.tables, self.marginal_sets, strict=True):
            assert t.table.shape == tuple(self.domain_sizes[a] for a in attrs)
            assert np.all(np.isfinite(t.table)) and np.all(t.variance >= 0)
