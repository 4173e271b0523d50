"""Fast local hashing (FLH): OLH with a fixed public family of hash functions.

G. Cormode, S. Maddock, C. Maple. Frequency Estimation under Local Differential Privacy.
PVLDB 14(11), 2021, section 4 ("Fast Local Hashing"). OLH draws a fresh hash function per
user, so its server must hash every candidate under every report's function
(``O(n d)``). FLH fixes a public family of ``num_hashes`` functions ``h_j: items -> [g]``
(:mod:`._items`); each user draws ``j`` uniformly, hashes her item and applies generalized
randomized response over ``[g]``. The server keeps the ``num_hashes x g`` table of
(row, value) counts (independent of n) and estimates any candidate from it in
``O(num_hashes)``.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from .. import _parallel
from .._constraints import Alternatives, Size
from .._exact import RR_MAX_EPSILON, ratio_loss, rr_probabilities, rr_weights
from .._rng import RNGLike, as_generator, independent_streams
from ..spec import Reports, Stats, StatsField
from ._base import MAX_DENSE_OUTPUTS, index_dtype
from ._items import batch_length, item_codes, row_hash
from ._open import OpenDomainOracle
from .grr import grr_sample
from .hashing import MAX_HASH_RANGE, _optimal_hash_range, hash_parameters

__all__ = ["FLH"]

#: Largest public family of FLH.
MAX_HASHES = 1 << 20
#: Cap of the default hash range (OLH's optimum e^eps + 1 passes it at eps ~ 8.3): the
#: server's table is num_hashes x g, and past it the per-user variance is already < 1/4000.
DEFAULT_MAX_RANGE = 1 << 12
#: From this many users (a list or a 1-D array) the client draws on threads beside the
#: item keys and hashes and randomizes in one compiled pass (the threads' start-up,
#: ~0.1 ms, is paid back many times).
_FUSED_MIN_USERS = 1 << 16


class _Beside:
    """Run one numpy draw on a thread while the caller's thread does other work.

    The thread signals just before it calls ``draw``; the caller waits for that signal,
    so the thread is inside numpy's fill (which releases the GIL) before the caller
    starts a long call that holds the GIL (joining a list of strings). The draw's result
    does not depend on the thread: each stream is drawn by one thread only.
    """

    def __init__(self, draw: Callable[[], np.ndarray]) -> None:
        self._out: list[np.ndarray] = []
        self._error: list[BaseException] = []
        started = threading.Event()

        def run() -> None:
            started.set()
            try:
                self._out.append(draw())
            except BaseException as exc:  # handed to the caller by result()
                self._error.append(exc)

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        started.wait()

    def result(self) -> np.ndarray:
        """Wait for the draw and return it (or raise its error)."""
        self._thread.join()
        if self._error:
            raise self._error[0]
        return self._out[0]


@dataclasses.dataclass(frozen=True, kw_only=True)
class FLH(OpenDomainOracle):
    """Fast local hashing over an open domain (Cormode, Maddock, Maple, VLDB 2021).

    Parameters
    ----------
    epsilon : float
        Privacy budget, in ``[1e-6, 40]``.
    num_hashes : int
        k, the size of the public hash family, in ``[1, 2^20]``. Default 1024.
    hash_range : int or None
        g, in ``[2, 2^32]``; None (default) is OLH's variance-optimal integer near
        ``e^eps + 1`` (:func:`ldpkit.frequency.hashing.optimal_hash_range`), capped at
        4096 (the server's table is ``num_hashes x g``).
    domain_size : int or None
        None: open domain (estimate needs candidates); d: the integers ``0 .. d - 1``.

    Notes
    -----
    A report is ``(rows, values)``: the row j and ``y``, GRR over ``[g]`` of ``h_j(v)``
    with exact integer weights (keep ``p = e^eps / (e^eps + g - 1)``, each other value
    ``q' = 1 / (e^eps + g - 1)``). j is drawn independently of v, so the loss is GRR's,
    ``log(w_keep / w_other) <= eps`` (``privacy_loss()``).

    The server's support count of candidate v is ``C_v = sum_j counts[j, h_j(v)]``; over
    the draw of the family a user holding another item supports v with probability
    ``q* = 1/g``, so ``f~_v = (C_v / n - 1/g) / (p - 1/g)`` is unbiased and its variance is
    OLH's, ``(q* (1 - q*) + f (p - q*)(1 - p - q*)) / (n (p - q*)^2)`` (Wang et al.,
    USENIX Security 2017, eq. 2 and 10; Cormode et al. 2021, section 4). Users holding the
    same item share its k hash values: heavy items add a fixed offset of mean zero over
    families, of standard deviation about ``sqrt(sum_u f_u^2 / (k g)) / (p - 1/g)``, which
    a larger ``num_hashes`` shrinks.

    References
    ----------
    G. Cormode, S. Maddock, C. Maple. Frequency Estimation under Local Differential
    Privacy. PVLDB 14(11): 2046-2058, 2021.

    Examples
    --------
    >>> flh = FLH(epsilon=2.0, num_hashes=64)
    >>> flh.range_size
    8
    >>> reports = flh.randomize(["a", "b", "a", 2**70], rng=0)
    >>> reports.fields
    ('rows', 'values')
    >>> flh.estimate(flh.aggregate(reports), candidates=["a", 2**70]).labels
    ['a', 1180591620717411303424]
    """

    num_hashes: int = 1024
    hash_range: int | None = None
    max_epsilon: ClassVar[float] = RR_MAX_EPSILON
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "num_hashes": [Size(1, MAX_HASHES)],
        "hash_range": [Size(2, MAX_HASH_RANGE), None],
    }

    def _validate(self) -> None:
        super()._validate()
        self._check_domain_work()

    @property
    def range_size(self) -> int:
        """g, the hash range in use."""
        if self.hash_range is None:
            return min(_optimal_hash_range(self.epsilon), DEFAULT_MAX_RANGE)
        return self.hash_range

    @property
    def _rows(self) -> int:
        return self.num_hashes

    @property
    def _width(self) -> int:
        return self.range_size

    def _weights(self) -> tuple[int, int]:
        return rr_weights(self.epsilon, self.range_size - 1)

    @property
    def p(self) -> float:
        """Realized P[y = h_j(v) | v]: ``w_keep / T``."""
        return rr_probabilities(self.epsilon, self.range_size - 1)[0]

    @property
    def q(self) -> float:
        """``q* = 1/g``: P[a report supports v] for a user holding another item."""
        return 1.0 / self.range_size

    def privacy_loss(self) -> float:
        """``log(w_keep / w_other)`` of the realized GRR over ``[g]``."""
        w_keep, w_other = self._weights()
        return ratio_loss(w_other, w_keep)

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Return the public row index ``rows`` and the randomized hash ``values`` of each user.

        The row indices and the GRR coins come from two independent streams of ``rng``
        (the row stream's ``integers(0, num_hashes)``, the coin stream's one integer in
        ``[0, T)`` per user, :func:`ldpkit.frequency.grr.grr_sample`). From 2^16 users
        they are drawn on threads while the items are keyed, and a compiled pass hashes
        and randomizes (the same draws, so the same bytes); a ``Generator`` passed as
        ``rng`` then has its streams split off even when ``values`` is refused.
        """
        g = self.range_size
        n = batch_length(values)
        if (
            n is not None
            and n >= _FUSED_MIN_USERS
            and 4 * n >= self.num_hashes
            and _parallel.use_compiled(n, _FUSED_MIN_USERS)
        ):
            return self._randomize_fused(values, n, as_generator(rng))
        keys = self.item_keys(values)
        row_stream, coin_stream = independent_streams(as_generator(rng), 2)
        rows = row_stream.integers(0, self.num_hashes, size=keys.shape[0])
        y = grr_sample(row_hash(rows, keys, g), g, self._weights(), coin_stream)
        return Reports(
            self, rows=rows.astype(index_dtype(self.num_hashes)), values=y.astype(index_dtype(g))
        )

    def _randomize_fused(self, values: Any, n: int, gen: np.random.Generator) -> Reports:
        """:meth:`randomize` of ``n`` users: draws beside the keys, one compiled pass."""
        g = self.range_size
        w_keep, w_other = self._weights()
        total = w_keep + (g - 1) * w_other
        row_stream, coin_stream = independent_streams(gen, 2)
        rows = _Beside(lambda: row_stream.integers(0, self.num_hashes, size=n))
        coins = _Beside(lambda: coin_stream.integers(0, total, size=n, dtype=np.int64))
        try:
            keys, inverse = item_codes(values, "values", self.domain_size)
        finally:  # refused items: the draws end before the error leaves
            drawn_rows, drawn_coins = rows.result(), coins.result()
        from ._kernels_hashing import hashed_grr  # numba: loaded on first use

        out_rows, y = hashed_grr(
            keys,
            inverse,
            drawn_rows,
            drawn_coins,
            hash_parameters(np.arange(self.num_hashes, dtype=np.uint64)),
            g,
            (w_keep, w_other),
            (index_dtype(self.num_hashes), index_dtype(g)),
        )
        return Reports(self, rows=out_rows, values=y)

    def stats_schema(self) -> dict[str, StatsField]:
        """``counts[j, y]``: reports of row j with value y (one per report: sum n)."""
        return {"counts": StatsField((self.num_hashes, self.range_size), total=1)}

    def empty_stats(self) -> Stats:
        """Return the Stats of no report (zero arrays): the neutral element of merge."""
        shape = (self.num_hashes, self.range_size)
        return Stats(self, 0, counts=np.zeros(shape, dtype=np.int64))

    def aggregate(self, reports: Reports) -> Stats:
        """Reduce the reports to their mergeable Stats: counts per (row, hash value)."""
        reports = self.check_reports(reports)
        arrays = reports.arrays
        if set(arrays) != {"rows", "values"}:
            raise ValueError(f"reports must have fields ('rows', 'values'), got {reports.fields}")
        rows = self._check_rows(arrays["rows"])
        y, g = arrays["values"], self.range_size
        if y.ndim != 1 or (y.size and (int(y.min()) < 0 or int(y.max()) >= g)):
            raise ValueError(f"reports.values must be hashed values in [0, {g})")
        flat = rows * g + y.astype(np.int64)
        counts = np.bincount(flat, minlength=self.num_hashes * g).reshape(self.num_hashes, g)
        return Stats(self, rows.shape[0], counts=counts)

    def _frequencies(self, stats: Stats, keys: np.ndarray) -> np.ndarray:
        support = self._row_sums(stats.counts, keys)
        return (support / stats.n - self.q) / (self.p - self.q)

    def variance(self, n: int, f: Any = None) -> Any:
        """OLH's variance at this p and ``q* = 1/g`` (class Notes; f=None: FO17's Var*).

        Examples
        --------
        >>> from ldpkit.frequency import OLH
        >>> flh = FLH(epsilon=2.0)
        >>> bool(abs(flh.variance(100) - OLH(epsilon=2.0, domain_size=9).variance(100)) < 1e-15)
        True
        """
        n, f = self._check_variance_args(n, f)
        p, q = self.p, self.q
        return (q * (1.0 - q) + f * (p - q) * (1.0 - p - q)) / (n * (p - q) ** 2)

    def transition_matrix(self, row: int | None = None) -> np.ndarray:
        """Return the exact ``P[y | v, row]`` of a closed domain, shape (d, g).

        ``P[(row, y) | v]`` is this over ``num_hashes`` (the row is independent of v).
        """
        row = self._check_row_arg(row)
        g, d = self.range_size, int(self.domain_size or 0)
        if d * g > MAX_DENSE_OUTPUTS:
            raise ValueError(
                f"domain_size * hash range must be <= {MAX_DENSE_OUTPUTS} for a dense "
                f"matrix, got {d} * {g}"
            )
        hashed = row_hash(np.full(d, row), self.item_keys(np.arange(d)), g)
        w_keep, w_other = self._weights()
        total = w_keep + (g - 1) * w_other
        matrix = np.full((d, g), w_other / total)
        matrix[np.arange(d), hashed] = w_keep / total
        return matrix
