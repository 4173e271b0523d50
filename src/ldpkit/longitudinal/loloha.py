"""LOLOHA: longitudinal local hashing (Arcolezi, Pinzón, Palamidessi, Gambs, EDBT 2023).

A device draws one hash function ``H: [d] -> [g]`` (a seed, kept for good), memoizes a GRR
answer at ``epsilon_inf`` per *hashed* value, and re-randomizes it by GRR over ``[g]`` for every
report (one report: ``epsilon_1``). Values that hash alike share one permanent answer, so
however often the device's value changes, the answers it ever reveals are at most g: the
longitudinal loss is at most ``g epsilon_inf`` (``2 epsilon_inf`` for BiLOLOHA, g = 2),
where memoization per value (L-GRR, L-OSUE, RAPPOR) pays ``epsilon_inf`` per distinct value.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np

from .. import _crmath
from .._constraints import Alternatives, Size
from .._exact import RR_MAX_EPSILON, ratio_loss
from .._rng import independent_streams
from .._validation import check_epsilon, check_integer
from ..frequency._base import index_dtype
from ..frequency.grr import grr_sample
from ..frequency.hashing import (
    MAX_DOMAIN_SIZE,
    _support_kernel,
    hashed_report_arrays,
    local_hash,
)
from ..spec import Reports, Stats
from ._base import LongitudinalOracle
from .grr import LGRR, ChainedGRR

__all__ = ["LOLOHA", "loloha_hash_range"]

_U64_MAX = np.iinfo(np.uint64).max
#: Largest hash range LOLOHA's default searches (the variance is flat well before it).
MAX_SEARCHED_RANGE = 1 << 12


def loloha_hash_range(epsilon_inf: float, epsilon_1: float, domain_size: int) -> int:
    """Return the g in ``[2, min(d, 4096)]`` minimizing LOLOHA's variance at f = 0 (OLOLOHA).

    ``Var* = q (1 - q) / (p* - q)^2`` with ``q = 1/g`` and ``p*`` the chained keep
    probability of L-GRR over ``[g]`` (EDBT'23, section 4: OLOLOHA chooses g this way; we
    minimize over the integers directly instead of rounding the real optimum).
    """
    epsilon_inf = check_epsilon(epsilon_inf, "epsilon_inf", high=RR_MAX_EPSILON)
    epsilon_1 = check_epsilon(epsilon_1, "epsilon_1", high=RR_MAX_EPSILON)
    if not epsilon_1 < epsilon_inf:
        raise ValueError(f"epsilon_1 must be < epsilon_inf = {epsilon_inf!r}, got {epsilon_1!r}")
    domain_size = check_integer(domain_size, "domain_size", low=2, high=MAX_DOMAIN_SIZE)
    a, b = _crmath.exp(epsilon_inf), _crmath.exp(epsilon_1)
    g = np.arange(2, max(3, min(domain_size, MAX_SEARCHED_RANGE) + 1), dtype=np.float64)
    p1, q1 = a / (a + g - 1), 1 / (a + g - 1)
    ratio = (b * (1 - q1) - (1 - p1)) / (p1 - b * q1)
    p2, q2 = ratio / (ratio + g - 1), 1 / (ratio + g - 1)
    keep = p1 * p2 + (1 - p1) * q2
    q = 1 / g
    var = q * (1 - q) / (keep - q) ** 2
    return int(g[int(np.argmin(var))])


@dataclasses.dataclass(frozen=True, kw_only=True, init=False)
class LOLOHA(ChainedGRR, LongitudinalOracle):
    """LOLOHA: local hashing with memoization on the hashed value.

    Report ``(seed, y)``: ``reports.seeds`` names the device's hash function (the same in
    every report of a device: it links them, as any memoized scheme's permanent part may),
    ``reports.values`` is L-GRR over ``[g]`` of the hashed value: a permanent GRR answer at
    ``epsilon_inf`` per hashed value, re-randomized by GRR for each report.

    Parameters
    ----------
    epsilon_inf : float
        Loss of any number of reports of values hashing to one bucket (default ``3
        epsilon_1``).
    epsilon_1 : float
        Loss of one report (alias ``epsilon``), ``< epsilon_inf``.
    domain_size : int
        Number of items d (>= 2).
    hash_range : int, optional
        g (>= 2); default :func:`loloha_hash_range` (OLOLOHA). ``hash_range=2`` is
        BiLOLOHA: at most ``2 epsilon_inf`` however often the value changes.

    Notes
    -----
    Support of a report: ``{v : H_seed(v) = y}``; ``P[v in Support | v] = p*`` (L-GRR's
    chained keep probability over ``[g]``) and ``1/g`` for any other item (universal
    hashing), so ``(C_v/n - 1/g) / (p* - 1/g)`` is unbiased with ``Var = (q (1 - q) + f (p*
    - q)(1 - p* - q)) / (n (p* - q)^2)``, q = 1/g (EDBT'23 eq. of LOLOHA's variance at
    f = 0). ``longitudinal_privacy_loss(k) = min(k, g) epsilon_inf`` for k distinct hashed
    values; ``privacy_loss()`` is L-GRR's over ``[g]``, from the exact integers.

    References
    ----------
    H. H. Arcolezi, C. Pinzón, C. Palamidessi, S. Gambs. Frequency Estimation of Evolving
    Data Under Local Differential Privacy. EDBT 2023 (LOLOHA, BiLOLOHA, OLOLOHA).

    Examples
    --------
    >>> spec = LOLOHA(epsilon_inf=2.0, epsilon_1=1.0, domain_size=100, hash_range=2)
    >>> round(spec.privacy_loss(), 9), round(spec.longitudinal_privacy_loss(50), 9)
    (1.0, 4.0)
    >>> spec.randomize([3, 99], rng=0).fields
    ('seeds', 'values')
    """

    hash_range: int | None = None
    max_epsilon_inf = RR_MAX_EPSILON
    max_epsilon = 30.0
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "domain_size": [Size(2, MAX_DOMAIN_SIZE, small=6)],
        "hash_range": [Size(2, 1 << 32), None],
    }

    def _validate(self) -> None:
        super()._validate()
        if self.hash_range is None:  # the default: the variance-optimal g of the budgets
            assert self.epsilon_inf is not None
            g = loloha_hash_range(self.epsilon_inf, self.epsilon, self.domain_size)
            self._set("hash_range", check_integer(g, "hash_range", low=2, high=1 << 32))

    @property
    def range_size(self) -> int:
        """g, the size of the hash range."""
        assert self.hash_range is not None
        return self.hash_range

    def _rr_size(self) -> int:
        return self.range_size

    @property
    def q(self) -> float:
        """``1/g``: P[v in Support(y)] for a device holding another item."""
        return 1.0 / self.range_size

    def privacy_loss(self) -> float:
        """epsilon_1 as realized: the chained ratio over ``[g]`` from the exact integers."""
        keep, other, _ = self._chained()
        return ratio_loss(other, keep)

    def longitudinal_privacy_loss(self, distinct_values: int = 1) -> float:
        """Return ``min(distinct_values, g) x`` the permanent round's realized loss.

        The memo is per hashed value: at most g permanent answers, however many values.
        """
        k = min(self._check_distinct(distinct_values), self.range_size)
        a, b = self._rounds()[0]
        return k * ratio_loss(b, a)

    def _attack_channel(self, memoized: bool) -> tuple[str, Any] | None:
        """Return the privacy attack's view of this spec's reports, or None for the default.

        Read by :func:`ldpkit.privacy.attack`, which imports no mechanism: it takes
        ``(kind, law)`` from here, else the spec's ``transition_matrix()``. Memoized: ``("hashed", (P1, P2, local_hash))``, L-GRR
        over ``[g]`` of the hashed value with the device's public seed; fresh reports (a new
        seed per report) are not implemented.
        """
        if not memoized:
            raise NotImplementedError(
                "attack on fresh LOLOHA reports (a new hash seed per report) is not implemented"
            )
        grr = LGRR(
            epsilon_inf=self.epsilon_inf, epsilon_1=self.epsilon, domain_size=self.range_size
        )
        return "hashed", (grr.permanent_matrix(), grr.instantaneous_matrix(), local_hash)

    # -- the rounds --------------------------------------------------------------------------
    def _device_state(self, gen: np.random.Generator) -> np.ndarray:
        """Return the device's hash seed (drawn once, kept)."""
        return gen.integers(0, _U64_MAX, size=1, dtype=np.uint64, endpoint=True)

    def _device_state_from_words(self, words: Any) -> np.ndarray:
        """Return the device's hash seed from one 64-bit word.

        The words are :class:`ldpkit.device.DerivedWords` (the JS client's derivation).
        """
        return np.asarray([words.u64()], dtype=np.uint64)

    def _permanent_from_words(self, key: int, words: Any, state: np.ndarray) -> np.ndarray:
        """Return the permanent row ``(seed, answer)`` of one hashed value ``key``.

        L-GRR's permanent GRR over ``[g]`` from ``U = words.below(T)`` (the JS client's
        order).
        """
        a, b = self._rounds()[0]
        u = words.below(a + (self.range_size - 1) * b)
        answer = key if u < a else (u - a) // b + ((u - a) // b >= key)
        return np.asarray([int(state[0]), answer], dtype=np.uint64)

    def _memo_keys(self, values: np.ndarray, state: np.ndarray | None) -> np.ndarray:
        """Return what the permanent answer depends on: the hashed value under the device's seed."""
        assert state is not None
        return local_hash(state[:1], np.asarray(values, dtype=np.int64), self.range_size)

    def _permanent_from_keys(
        self, keys: np.ndarray, gen: np.random.Generator, state: np.ndarray | None
    ) -> np.ndarray:
        assert state is not None
        perm = grr_sample(np.asarray(keys, dtype=np.int64), self.range_size, self._rounds()[0], gen)
        seeds = np.full(perm.shape[0], state[0], dtype=np.uint64)
        return np.stack([seeds, perm.astype(np.uint64)], axis=1)

    def _permanent_round(self, values: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        # fresh devices: one seed each (from its own stream), then the permanent GRR answer
        seed_gen, coin_gen = independent_streams(gen, 2)
        seeds = seed_gen.integers(0, _U64_MAX, size=values.shape[0], dtype=np.uint64, endpoint=True)
        hashed = local_hash(seeds, np.asarray(values, dtype=np.int64), self.range_size)
        perm = grr_sample(hashed, self.range_size, self._rounds()[0], coin_gen)
        return np.stack([seeds, perm.astype(np.uint64)], axis=1)

    def _instantaneous_round(self, permanent: np.ndarray, gen: np.random.Generator) -> Reports:
        perm = np.asarray(permanent, dtype=np.uint64).reshape(-1, 2)
        y = grr_sample(perm[:, 1].astype(np.int64), self.range_size, self._rounds()[1], gen)
        return Reports(self, seeds=perm[:, 0].copy(), values=y.astype(index_dtype(self.range_size)))

    # -- the server ----------------------------------------------------------------------------
    def support_counts(self, reports: Reports) -> np.ndarray:
        """``C_v = #{i : H_{seed_i}(v) = y_i}`` (OLH's compiled kernel)."""
        g = self.range_size
        seeds, y = hashed_report_arrays(reports, g)
        blocks = max(1, min(4, seeds.shape[0] * self.domain_size >> 20))
        counts: np.ndarray = _support_kernel()(seeds, y, g, self.domain_size, blocks)
        return counts

    def empty_stats(self) -> Stats:
        """Return the Stats of no report (zero arrays): the neutral element of merge."""
        return Stats(self, 0, counts=np.zeros(self.domain_size, dtype=np.int64))
