"""Shared base of the open-domain frequency oracles (CMS, HCMS, FLH): items of any size.

A spec of this kind never enumerates its domain: users' items (strings or integers of any
size) become 64-bit keys (:mod:`._items`), the Stats are a sketch of a size fixed by the
spec, and the estimate answers any list of candidates after the fact.
"""

from __future__ import annotations

import dataclasses
from abc import abstractmethod
from typing import Any, ClassVar

import numpy as np

from .._constraints import Alternatives, Size
from .._rng import RNGLike
from .._validation import check_array, check_integer, check_work
from ..estimate import FrequencyEstimate
from ..spec import Mechanism, Stats
from ._items import candidate_list, item_keys, keys_of, row_hash

__all__ = ["OpenDomainOracle"]

#: Candidates hashed per block when estimating (bounds the (rows x candidates) temporaries).
_BLOCK_ENTRIES = 1 << 22


@dataclasses.dataclass(frozen=True, kw_only=True)
class OpenDomainOracle(Mechanism):
    """A frequency oracle over an open domain of strings and integers (abstract).

    Parameters
    ----------
    epsilon : float
        Privacy budget of one report.
    domain_size : int or None
        None (default): an open domain; users hold strings or integers of any size, and
        :meth:`estimate` needs ``candidates``. An int d: a closed domain, the integers
        ``0 .. d - 1`` (inputs are checked against it), which :meth:`estimate` answers for
        when no candidates are given.
    """

    domain_size: int | None = None

    #: ``privacy_loss()`` equals epsilon (up to the sampler's integer quantization).
    exact_epsilon: ClassVar[bool] = True
    # int64 item indices (integers beyond it are items of an open-domain spec)
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "domain_size": [Size(2, 2**62, small=6), None]
    }

    def _check_domain_work(self) -> None:
        """Bound the closed domain's estimate, which hashes every item under every row.

        About 16 word operations per hash (the multiply-add and mix64's rounds). Called by
        the subclasses once their row count is validated.
        """
        if self.domain_size is not None:
            check_work(
                16.0 * float(self.domain_size) * self._rows,
                f"domain_size={self.domain_size} at {self._rows} hash rows",
                f"{self.name}.estimate",
            )

    def item_keys(self, values: Any) -> np.ndarray:
        """Each user's 64-bit item key (format ``ldpkit.item/1``, :mod:`._items`)."""
        return item_keys(values, "values", self.domain_size)

    @property
    @abstractmethod
    def _rows(self) -> int:
        """Number of public hash functions (sketch rows)."""

    @property
    @abstractmethod
    def _width(self) -> int:
        """Range of each hash function."""

    def candidate_buckets(self, keys: np.ndarray) -> np.ndarray:
        """``h_j(key)`` for every row j and key: int64 array of shape (rows, len(keys))."""
        return row_hash(np.arange(self._rows)[:, None], keys[None, :], self._width)

    def _row_sums(self, table: np.ndarray, keys: np.ndarray) -> np.ndarray:
        """``sum_j table[j, h_j(key)]`` for every key (blocks of keys, exact in int64)."""
        rows = np.arange(self._rows)[:, None]
        out = np.empty(keys.shape[0], dtype=table.dtype)
        step = max(1, _BLOCK_ENTRIES // self._rows)
        for start in range(0, keys.shape[0], step):  # blocks of candidates, not users
            block = keys[start : start + step]
            out[start : start + step] = table[rows, self.candidate_buckets(block)].sum(axis=0)
        return out

    @abstractmethod
    def _frequencies(self, stats: Stats, keys: np.ndarray) -> np.ndarray:
        """Unbiased frequency estimates of the items with these keys."""

    @abstractmethod
    def variance(self, n: int, f: Any = None) -> Any:
        """Variance of one candidate's frequency estimate from n reports (at frequency f)."""

    def _check_variance_args(self, n: Any, f: Any) -> tuple[int, Any]:
        n = check_integer(n, "n", low=1)
        if f is None:
            return n, 0.0
        arr = check_array(f, "f", ndim=(0, 1), low=0.0, high=1.0)
        return n, arr

    def estimate(self, stats: Stats, candidates: Any = None) -> FrequencyEstimate:
        """Unbiased frequencies of the candidates, with their variance.

        Parameters
        ----------
        stats : Stats
            Aggregated reports of this spec (merged from any number of batches).
        candidates : sequence of str or int, optional
            The items to estimate, in any number and order, chosen after the collection
            (distinct). Default: the closed domain ``0 .. domain_size - 1``; an open-domain
            spec (``domain_size=None``) needs them.

        Returns
        -------
        FrequencyEstimate
            One frequency per candidate (``labels`` = the candidates when given), unbiased
            over the draw of the public hash family, with the plug-in variance
            :meth:`variance` at the clipped estimate. ``spec`` is attached unless a closed
            domain is estimated over a candidate list of another length (FrequencyEstimate
            ties a spec's ``domain_size`` to its length); ``variance_null`` then falls back
            to the plug-in variance.
        """
        stats = self.check_stats(stats, nonempty=True)
        items = candidate_list(candidates, self.domain_size)
        freq = self._frequencies(stats, keys_of(items))
        var = self.variance(stats.n, np.clip(freq, 0.0, 1.0))
        labels = None if candidates is None else items
        keep_spec = self.domain_size is None or len(items) == self.domain_size
        return FrequencyEstimate(
            freq, var, stats.n, spec=self if keep_spec else None, labels=labels
        )

    def run(self, values: Any, *, rng: RNGLike = None, candidates: Any = None) -> Any:
        """Randomize, aggregate and estimate ``candidates`` (see :meth:`estimate`)."""
        reports = self.randomize(values, rng=rng)
        if len(reports) == 0:
            raise ValueError("values must hold at least one value to estimate from, got none")
        return self.estimate(self.aggregate(reports), candidates=candidates)

    # -- hooks of ldpkit.testing.check_mechanism (inputs that are strings or big integers) ---
    def _contract_values(self, n: int, gen: np.random.Generator) -> np.ndarray:
        if self.domain_size is not None:
            items = gen.integers(0, self.domain_size, n)
            items[:2] = [0, self.domain_size - 1]  # both ends of the domain
            return items
        pool = np.array(["a", "b", "zoë", "", 0, -1, 2**64, -(2**80)], dtype=object)
        return pool[gen.integers(0, pool.size, n)]

    def _contract_bad_values(self) -> tuple[list[Any], list[Any]]:
        two_d = np.array([["a", "b"], ["c", "d"]])
        if self.domain_size is not None:
            d = self.domain_size
            return [[0, d], [-1, 0], np.zeros((2, 2), dtype=np.int64)], [
                [0.0, float("nan")],
                ["a", "b"],
            ]
        return [two_d, ["\ud800"]], [[0.5, 1.5], [None, "a"], [True, "a"], [b"a"]]

    def _check_rows(self, rows: Any, name: str = "reports.rows") -> np.ndarray:
        if not isinstance(rows, np.ndarray) or rows.ndim != 1 or rows.dtype.kind not in "iu":
            raise ValueError(f"{name} must be a 1-D array of row indices in [0, {self._rows})")
        if rows.size and (int(rows.min()) < 0 or int(rows.max()) >= self._rows):
            raise ValueError(f"{name} must be row indices in [0, {self._rows})")
        return rows.astype(np.int64, copy=False)

    def _check_row_arg(self, row: Any) -> int:
        if row is None:
            raise NotImplementedError(
                f"{self.name} outputs carry a public row index drawn independently of the "
                "item; pass row= for the matrix of the rest of the output given that row"
            )
        if self.domain_size is None:
            raise NotImplementedError(f"{self.name} enumerates inputs only for a closed domain")
        return check_integer(row, "row", low=0, high=self._rows - 1)
