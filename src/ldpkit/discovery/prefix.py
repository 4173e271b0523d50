"""Prefix-tree discovery of frequent strings in one round: PEM and TreeHist.

Both ask each device one question only: a value-blind coin puts the user in group ``l`` (one
group per prefix length ``l + 1``, ``l = 0 .. max_length - 1``) and in one of the group's
``H`` public hash functions ``j``; she reports ``(l, j, y)`` with ``y`` generalized
randomized response over ``[g]`` of ``h_{l,j}(prefix of her string)``
(:mod:`ldpkit.discovery._strings`). The server keeps the table ``counts[l, j, y]``
(``max_length x H x g`` integers, whatever n), from which the frequency of ANY prefix can be
estimated later. Every round of candidate extension then runs on the server
(:mod:`ldpkit.discovery._search`): PEM keeps the ``keep`` largest candidates per level
(Wang, Li, Jha, IEEE TDSC 2021), TreeHist those above a noise threshold (Bassily, Nissim,
Stemmer, Thakurta, NeurIPS 2017).
"""

from __future__ import annotations

import dataclasses
from abc import abstractmethod
from typing import Any, ClassVar

import numpy as np

from .._constraints import Alternatives, Boolean, Integer, Options, Real, Size
from .._exact import RR_MAX_EPSILON, ratio_loss, rr_probabilities, rr_weights
from .._rng import RNGLike, as_generator
from ..frequency.grr import grr_sample
from ..frequency.hashing import optimal_hash_range
from ..spec import Mechanism, Reports, Stats, StatsField
from ._strings import (
    ALPHABET,
    encode_distinct,
    family_seeds,
    hash_keys,
    level_keys,
    prefix_hashes,
    prefix_key_table,
)

__all__ = ["PEM", "TreeHist"]

#: Largest hash range g a discovery spec uses by default (OLH's optimum e^eps + 1 up to
#: eps ~ 8.3; beyond it g stays here and the table stays small).
MAX_DEFAULT_RANGE = 4096
#: Default width ``H g`` of a group's table: H = this // g hash functions, in [16, 256].
TABLE_WIDTH = 1 << 14
_CONTROLS = (None, "fwer", "fdr")
#: PEM.estimate's extension rules: every symbol, or an alphabet learned from the reports.
_EXTENSIONS = ("all", "learned")


def _uint_dtype(high: int) -> Any:
    for dt in (np.uint8, np.uint16, np.uint32):
        if high <= np.iinfo(dt).max:
            return dt
    return np.uint64


class HashedPrefixLaw:
    """The report law PEM, TreeHist and an interactive round share: OLH over [g] of a prefix.

    A value-blind hash index in [H], then GRR over [g] of the hashed prefix with the exact
    integer weights of :func:`ldpkit._exact.rr_weights` (Wang, Li, Jha, IEEE TDSC 2021,
    section 4: PEM's local hashing), and the contract's string inputs. Needs the fields
    ``epsilon``, ``alphabet``, ``hash_range`` and ``hash_functions``.
    """

    epsilon: float
    alphabet: str | None
    hash_range: int | None
    hash_functions: int | None

    @property
    def symbols(self) -> int:
        """A: the padding symbol 0 plus the alphabet (256 for bytes)."""
        return 256 if self.alphabet is None else len(self.alphabet) + 1

    @property
    def range_size(self) -> int:
        """G in use."""
        if self.hash_range is not None:
            return self.hash_range
        return min(optimal_hash_range(self.epsilon), MAX_DEFAULT_RANGE)

    @property
    def family_size(self) -> int:
        """H in use."""
        if self.hash_functions is not None:
            return self.hash_functions
        return int(min(256, max(16, TABLE_WIDTH // self.range_size)))

    def _weights(self) -> tuple[int, int]:
        return rr_weights(self.epsilon, self.range_size - 1)

    @property
    def p(self) -> float:
        """Realized P[y = h(v) | v] (GRR keep probability over [g])."""
        return rr_probabilities(self.epsilon, self.range_size - 1)[0]

    @property
    def q(self) -> float:
        """Realized P[y = y' | v] for each y' != h(v)."""
        return rr_probabilities(self.epsilon, self.range_size - 1)[1]

    def privacy_loss(self) -> float:
        """``log(w_keep / w_other)``: the hash index (and group) are value-blind; y is GRR."""
        return ratio_loss(*reversed(self._weights()))

    # -- contract hooks (strings of the alphabet) ---------------------------------------
    def _contract_values(self, n: int, gen: np.random.Generator) -> np.ndarray:
        pool = ["ab", "abc", "b", "ba", "", "abcdefghijklmnop"]
        if self.alphabet is not None:
            chars = self.alphabet
            pool = [chars[:1], chars[-1:] * 2, (chars * 3)[:5], ""]
        out = np.empty(n, dtype=object)
        out[:] = [pool[i] for i in gen.integers(0, len(pool), n)]
        return out

    def _contract_bad_values(self) -> tuple[list[Any], list[Any]]:
        outside: list[Any] = [np.array([["a", "b"], ["c", "d"]])]
        if self.alphabet is not None:
            outside.append(["\x00\x01 not in it"])
        return outside, [[1, 2], ["a", 3.5], [None]]


@dataclasses.dataclass(frozen=True, kw_only=True)
class PrefixDiscovery(HashedPrefixLaw, Mechanism):
    """Base of the one-round prefix discovery specs (see the module docstring).

    Parameters
    ----------
    epsilon : float
        Privacy budget of the one report, in ``[1e-6, 40]``.
    max_length : int
        Symbols kept per string, in ``[1, 64]``: UTF-8 bytes (cut at the last whole
        character that fits; a longer string is counted under that prefix) or characters
        of ``alphabet``; shorter strings are padded with the end symbol 0.
    top_k : int
        Number of strings to return, in ``[1, 4096]``.
    alphabet : str or None
        None (default): UTF-8 bytes, 256 symbols. A string of distinct characters: those
        characters only (a value using any other is refused).
    hash_range : int or None
        g, in ``[2, 2^16]``; None: OLH's optimum (:func:`ldpkit.frequency.optimal_hash_range`)
        capped at 4096.
    hash_functions : int or None
        H, the public hash functions per group, in ``[1, 4096]``; None: ``2^14 // g``
        clipped to ``[16, 256]``.
    control : {None, "fwer", "fdr"}
        Error control over every candidate prefix the search tests (see
        :class:`ldpkit.discovery.HeavyHitters`): None returns the ``top_k`` largest with
        marginal intervals; ``"fwer"`` only those significant at family-wise level
        ``alpha`` (Bonferroni), with simultaneous intervals; ``"fdr"`` only those
        Benjamini-Hochberg selects at false discovery rate ``alpha``, with FCR intervals.
    alpha : float
        Error level of the control and the default level of the intervals, in (0, 1).
    pool_ended : bool
        True (default): a candidate that already ended (its last symbol is the padding) is
        estimated from every group at its length and beyond, which all count exactly its
        users (consistency across levels; a server-side choice, the reports are the same).
        False: from its own level's group only, as the papers do.
    """

    max_length: int = 12
    top_k: int = 20
    alphabet: str | None = None
    hash_range: int | None = None
    hash_functions: int | None = None
    control: str | None = None
    alpha: float = 0.05
    pool_ended: bool = True
    max_epsilon: ClassVar[float] = RR_MAX_EPSILON
    name: ClassVar[str] = "_PrefixDiscovery"  # a base: out of the public registry
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "max_length": [Size(1, 64, small=3)],
        "top_k": [Integer(1, 4096)],
        "alphabet": [ALPHABET, None],
        "hash_range": [Size(2, 1 << 16), None],
        "hash_functions": [Integer(1, 4096), None],
        "control": [None, Options("fwer", "fdr")],
        "alpha": [Real(0.0, 1.0, low_inclusive=False, high_inclusive=False)],
        "pool_ended": [Boolean()],
    }

    # -- constants -----------------------------------------------------------------------
    @property
    def groups(self) -> int:
        """Number of groups: one per prefix length 1 .. max_length."""
        return self.max_length

    # -- client --------------------------------------------------------------------------
    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """One report ``(groups, hashes, values)`` per user's string.

        Examples
        --------
        >>> pem = PEM(epsilon=2.0, max_length=4, top_k=2)
        >>> reports = pem.randomize(["ab", "abc", "b"], rng=0)
        >>> reports.fields
        ('groups', 'hashes', 'values')
        """
        symbols, inverse = encode_distinct(values, self.max_length, self.alphabet)
        gen = as_generator(rng)
        n = symbols.shape[0] if inverse is None else inverse.shape[0]
        groups = np.asarray(gen.integers(0, self.groups, size=n))
        hashes = np.asarray(gen.integers(0, self.family_size, size=n))
        # every group's seeds in one table (at most max_length x 4096): one lookup per user
        table = np.concatenate([family_seeds(lv, self.family_size) for lv in range(self.groups)])
        if inverse is None:
            seeds = table[groups * self.family_size + hashes]
            hashed = hash_keys(level_keys(symbols, groups), seeds, self.range_size)
        else:  # repeated strings: each distinct string's prefix keys once, gathered
            keys = prefix_key_table(symbols)
            hashed = prefix_hashes(keys, inverse, groups, table, hashes, self.range_size)
        y = grr_sample(hashed, self.range_size, self._weights(), gen)
        return Reports(
            self,
            groups=groups.astype(_uint_dtype(self.groups - 1)),
            hashes=hashes.astype(_uint_dtype(self.family_size - 1)),
            values=y.astype(_uint_dtype(self.range_size - 1)),
        )

    # -- server --------------------------------------------------------------------------
    def stats_schema(self) -> dict[str, StatsField]:
        """``counts[l, j, y]``: one report per user, so they sum to n."""
        return {"counts": StatsField((self.groups, self.family_size, self.range_size), total=1)}

    def empty_stats(self) -> Stats:
        shape = (self.groups, self.family_size, self.range_size)
        return Stats(self, 0, counts=np.zeros(shape, dtype=np.int64))

    def aggregate(self, reports: Reports) -> Stats:
        reports = self.check_reports(reports)
        if set(reports.fields) != {"groups", "hashes", "values"}:
            raise ValueError(
                f"reports must have fields ['groups', 'hashes', 'values'], got {list(reports.fields)}"
            )
        limits = {"groups": self.groups, "hashes": self.family_size, "values": self.range_size}
        for name, high in limits.items():
            arr = getattr(reports, name)
            if arr.ndim != 1 or (arr.size and int(arr.max()) >= high):
                raise ValueError(f"reports.{name} must be integers in [0, {high}), got others")
        h, g = self.family_size, self.range_size
        flat = (reports.groups.astype(np.int64) * h + reports.hashes) * g + reports.values
        counts = np.bincount(flat, minlength=self.groups * h * g).reshape(self.groups, h, g)
        return Stats._exact(self, len(reports), {"counts": counts})

    def estimate(self, stats: Stats) -> Any:
        """Search the prefix tree on the server; a :class:`HeavyHitters` of the top items."""
        from ._search import discover

        stats = self.check_stats(stats, nonempty=True)
        return discover(self, stats)

    @abstractmethod
    def _prune(self, f: np.ndarray, sigma0: np.ndarray, final: bool) -> np.ndarray:
        """Return the indices of the candidates that survive a level (``final``: the last)."""

    # -- contract hooks ------------------------------------------------------------------
    def _contract_check_estimate(self, estimate: Any, stats: Stats) -> None:
        from .result import check_heavy_hitters  # server side: loaded by the check only

        check_heavy_hitters(estimate, self.top_k)


@dataclasses.dataclass(frozen=True, kw_only=True)
class PEM(PrefixDiscovery):
    """Prefix extension method: keep the ``keep`` largest prefixes at every length.

    The defaults are ldpkit's tuned search (a beam of ``8 top_k`` ranked by the evidence
    along each prefix's path, ended strings pooled over their groups,
    :class:`PrefixDiscovery` ``pool_ended``, and a second pass over the symbols the first
    found evidence for, :meth:`estimate` ``extensions``); ``keep=top_k, pool_ended=False``
    is PEM as its paper specifies it.

    The server extends the survivors of length ``l`` by every symbol, estimates the
    extensions from group ``l + 1``'s table and keeps the ``keep`` largest; at the last
    length it returns the ``top_k`` largest (Wang, Li, Jha, "Locally Differentially
    Private Heavy Hitter Identification", IEEE TDSC 2021, section 4, with one symbol per
    step and OLH in every group).

    Parameters
    ----------
    keep : int or None
        Survivors per level, in ``[1, 4096]``; None (default): ``8 top_k`` for the
        ``"learned"`` search (ranked by path score), ``4 top_k`` for ``"all"`` (by
        estimate), capped at 4096, tuned on girls' baby names
        (docs/results/heavy_hitters_discovery.md); the paper keeps ``top_k``.
        ``PEM(keep=top_k, pool_ended=False)`` is the paper's PEM.
    See :class:`PrefixDiscovery` for the others.

    Notes
    -----
    Each group's estimate of a prefix c is OLH's (FO17 section 4.5) over its H public
    functions: ``f = (S_c / n_l - 1/g) / (p - 1/g)``, ``S_c = sum_j counts[l, j,
    h_{l,j}(c)]``; see docs/design/METHODS.md ("Open-vocabulary discovery") for the
    variance and the correction of collisions with the known heavy prefixes.

    Examples
    --------
    >>> strings = ["apple"] * 600 + ["apricot"] * 300 + ["banana"] * 100
    >>> pem = PEM(epsilon=8.0, max_length=8, top_k=2)
    >>> pem.run(strings, rng=0).items
    ('apple', 'apricot')
    """

    keep: int | None = None
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {"keep": [Integer(1, 4096), None]}

    def estimate(self, stats: Stats, *, extensions: str | None = None) -> Any:
        """Search the prefix tree on the server; a :class:`HeavyHitters` of the top items.

        Parameters
        ----------
        stats : Stats
            The aggregated reports.
        extensions : {None, "all", "learned"}
            ``"all"``: every survivor is extended by every symbol (the papers' search).
            ``"learned"``: both searches rank each level's open prefixes by the evidence
            summed along their paths (a decayed sum of capped z-scores); a second search
            extends only by the symbols the first one found evidence for, and the last
            level ranks both searches' candidates together,
            without rows that are no device's string (not UTF-8) and with the selection
            bias of the unended ones taken off (``ldpkit.discovery._learned``;
            docs/design/METHODS.md, open-vocabulary discovery, the moonshot): a lower
            pruning cut where the data use few of the 256 bytes. None (default):
            ``"learned"`` for ldpkit's search (``pool_ended=True``), ``"all"`` for the
            papers' (``pool_ended=False``, so ``PEM(keep=top_k, pool_ended=False)`` stays
            the paper's PEM). The same reports either way; a server-side choice.

        Returns
        -------
        HeavyHitters
            The ``top_k`` strings (fewer under ``control``) with their frequencies.
        """
        if extensions is None:  # tuned on girls' names: equal or better in every cell
            extensions = "learned" if self.pool_ended else "all"
        if extensions not in _EXTENSIONS:
            raise ValueError(f"extensions must be one of {_EXTENSIONS}, got {extensions!r}")
        if extensions == "all":
            return super().estimate(stats)
        from ._learned import discover_learned

        return discover_learned(self, self.check_stats(stats, nonempty=True))

    def _prune(self, f: np.ndarray, sigma0: np.ndarray, final: bool) -> np.ndarray:
        k = self.top_k if final else (self.keep or min(4 * self.top_k, 4096))
        order = np.argsort(-f, kind="stable")
        return order[:k]


@dataclasses.dataclass(frozen=True, kw_only=True)
class TreeHist(PrefixDiscovery):
    """TreeHist: keep every prefix whose estimate clears a noise threshold.

    The server walks the prefix tree one symbol at a time and keeps the extensions whose
    estimate exceeds ``threshold`` standard errors of a zero frequency (at most
    ``max_survivors`` of them, the largest); at the last length it returns the ``top_k``
    largest of those (Bassily, Nissim, Stemmer, Thakurta, "Practical Locally Private
    Heavy Hitters", NeurIPS 2017, section 3: a prefix tree pruned by a threshold of the
    order of the oracle's noise; here with one symbol per level and OLH in every group).

    Parameters
    ----------
    threshold : float
        In standard errors of a zero frequency, in ``(0, 40]``; default 3.
    max_survivors : int
        Cap on the survivors per level, in ``[1, 4096]``; default 64 (bounds the server's
        work when many prefixes clear the threshold).
    See :class:`PrefixDiscovery` for the others.

    Examples
    --------
    >>> strings = ["apple"] * 600 + ["apricot"] * 300 + ["banana"] * 100
    >>> TreeHist(epsilon=8.0, max_length=8, top_k=2).run(strings, rng=0).items
    ('apple', 'apricot')
    """

    threshold: float = 3.0
    max_survivors: int = 64
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "threshold": [Real(0.0, 40.0, low_inclusive=False)],
        "max_survivors": [Integer(1, 4096)],
    }

    def _prune(self, f: np.ndarray, sigma0: np.ndarray, final: bool) -> np.ndarray:
        above = np.flatnonzero(f > self.threshold * sigma0)
        above = above[np.argsort(-f[above], kind="stable")]
        return above[: self.top_k if final else self.max_survivors]
