"""Apple's sequence fragment puzzle (SFP): discovery from fragments tied by a small hash.

Apple Differential Privacy Team, "Learning with Privacy at Scale", Apple Machine Learning
Journal, 2017, section 4 ("Sequence Fragment Puzzle"). Each device sends one report made
of two sketch reports (:class:`ldpkit.frequency.HCMS` by default, or :class:`CMS`):

* a value-blind coin picks a fragment position ``k`` in ``[P]``, ``P = ceil(max_length /
  fragment_length)``; the device sketches the item ``(k, r, fragment_k)`` (encoded as one
  integer), where ``r`` is a ``hash_bits``-bit hash of its whole string and
  ``fragment_k`` the symbols ``k fl .. (k + 1) fl - 1`` of its padded string;
* the whole string (its 64-bit prefix key, :mod:`ldpkit.discovery._strings`) through a
  second sketch.

Budget split (sequential composition): the fragment sketch runs at ``fragment_share *
epsilon``, the whole-string sketch at the rest, so the report is epsilon-LDP
(``privacy_loss()`` adds the two realized losses).

The server estimates every ``(k, r, fragment)`` item of the fragment sketch, keeps the
``keep`` largest per position, assembles the strings whose fragments share a hash ``r``
at every position (and whose own hash is ``r``), and scores these candidates with the
whole-string sketch; the ``top_k`` largest are returned.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, ClassVar

import numpy as np
from scipy import special

from .._constraints import Alternatives, Integer, Options, Real, Size
from .._rng import RNGLike, as_generator, independent_streams
from .._validation import (
    MIN_EPSILON,
    check_epsilon,
)
from ..frequency._items import keys_of
from ..frequency.sketch import CMS, HCMS
from ..spec import Mechanism, Reports, Stats, StatsField
from ._strings import ALPHABET, decode_symbols, encode_distinct, encode_strings, level_keys

__all__ = ["SFP"]

#: Apple's SFP alphabet: lowercase English letters (the fragment search enumerates
#: ``2^hash_bits A^fragment_length`` items per position, which the bytes alphabet makes huge).
LETTERS = "abcdefghijklmnopqrstuvwxyz"
#: Largest number of fragment items the server enumerates (all positions together).
MAX_FRAGMENT_ITEMS = 1 << 22
#: Largest number of whole strings assembled from one hash value.
MAX_PER_HASH = 1024


class _PartHCMS(HCMS):
    """HCMS at a share of an SFP budget; out of the public registry.

    The SFP spec checked the total epsilon; a share may fall below MIN_EPSILON when the
    total sits at it.
    """

    name: ClassVar[str] = "_SFPPartHCMS"

    def __post_init__(self) -> None:
        low = MIN_EPSILON * _MIN_SHARE
        self._set("epsilon", check_epsilon(self.epsilon, high=self.max_epsilon, low=low))
        self._validate()


class _PartCMS(CMS):
    """CMS at a share of an SFP budget (see :class:`_PartHCMS`)."""

    name: ClassVar[str] = "_SFPPartCMS"

    def __post_init__(self) -> None:
        low = MIN_EPSILON * _MIN_SHARE
        self._set("epsilon", check_epsilon(self.epsilon, high=self.max_epsilon, low=low))
        self._validate()


#: Smallest share of epsilon either sketch may get.
_MIN_SHARE = 1e-3
_SKETCHES: dict[str, Any] = {"hcms": _PartHCMS, "cms": _PartCMS}
_CONTROLS = (None, "fwer", "fdr")


@dataclasses.dataclass(frozen=True, kw_only=True)
class SFP(Mechanism):
    """Sequence fragment puzzle (Apple 2017, section 4): one round, two sketches.

    Parameters
    ----------
    epsilon : float
        Privacy budget of the whole report, in ``[1e-6, 40]``.
    max_length : int
        Symbols kept per string, in ``[1, 64]`` (cut and padded as in
        :class:`ldpkit.discovery.PEM`).
    fragment_length : int
        Symbols per fragment, in ``[1, 8]``; default 2 (Apple's).
    top_k : int
        Number of strings to return, in ``[1, 4096]``.
    alphabet : str or None
        Default: the 26 lowercase letters (Apple's). None: UTF-8 bytes (refused when the
        fragment search would exceed ``2^22`` items). A string of distinct characters.
    hash_bits : int
        Bits of the whole-string hash attached to each fragment, in ``[1, 16]``; default 8
        (Apple's).
    sketch : {"hcms", "cms"}
        The frequency oracle of both sketches.
    width, depth : int
        Sketch width m (a power of two for HCMS) and depth; defaults 1024 and 32.
    fragment_share : float
        Share of epsilon spent on the fragment sketch, in ``[0.001, 0.999]``; default 0.5.
    keep : int or None
        Fragment items kept per position, in ``[1, 2^16]``; None: ``32 top_k`` (capped at
        2^16). The whole-string sketch scores what they assemble, so a wide net costs
        little; with ``4 top_k`` a Zipf list of 20 words at n = 2e5, eps = 8 gave 6 of the
        top 10, with ``32 top_k`` all 10.
    control : {None, "fwer", "fdr"}
        Error control over the scored candidates (as :class:`PEM`'s).
    alpha : float
        Error level of the control and default level of the intervals, in (0, 1).

    Notes
    -----
    The frequency of a string v is estimated by the whole-string sketch (unbiased, with
    the sketch's variance: :meth:`CMS.variance` / :meth:`HCMS.variance` at the budget
    ``(1 - fragment_share) epsilon``). A fragment item's estimate from the fragment sketch,
    times P, is unbiased for the share of users whose string has that hash and fragment at
    that position.

    Examples
    --------
    >>> strings = ["pear"] * 6000 + ["kiwi"] * 3000 + ["fig"] * 1000
    >>> sfp = SFP(epsilon=8.0, max_length=4, top_k=2, depth=8)
    >>> sfp.run(strings, rng=0).items
    ('pear', 'kiwi')
    """

    max_length: int = 12
    fragment_length: int = 2
    top_k: int = 20
    alphabet: str | None = LETTERS
    hash_bits: int = 8
    sketch: str = "hcms"
    width: int = 1024
    depth: int = 32
    fragment_share: float = 0.5
    keep: int | None = None
    control: str | None = None
    alpha: float = 0.05
    max_epsilon: ClassVar[float] = 40.0
    name: ClassVar[str] = "SFP"
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "max_length": [Size(1, 64, small=3)],
        "fragment_length": [Integer(1, 8)],
        "top_k": [Integer(1, 4096)],
        "alphabet": [ALPHABET, None],
        "hash_bits": [Integer(1, 16)],
        "sketch": [Options(*_SKETCHES)],
        "width": [Size(2, 1 << 16)],
        "depth": [Size(1, 4096)],
        "fragment_share": [Real(_MIN_SHARE, 1.0 - _MIN_SHARE)],
        "keep": [Integer(1, 1 << 16), None],
        "control": [None, Options("fwer", "fdr")],
        "alpha": [Real(0.0, 1.0, low_inclusive=False, high_inclusive=False)],
    }

    def _validate(self) -> None:
        items = self.positions * self.fragment_items
        if items > MAX_FRAGMENT_ITEMS:
            raise ValueError(
                f"alphabet, max_length, fragment_length and hash_bits must keep "
                f"positions * 2^hash_bits * symbols^fragment_length <= "
                f"{MAX_FRAGMENT_ITEMS} (the server enumerates them), got {items}"
            )
        if self.sketch == "hcms" and self.width & (self.width - 1):  # HCMS's own constraint
            raise ValueError(f"width must be a power of two for sketch='hcms', got {self.width}")
        self._fragment_spec()  # the inner sketches validate their own epsilon and width
        self._word_spec()

    # -- constants -----------------------------------------------------------------------
    @property
    def symbols(self) -> int:
        """A: the padding symbol 0 plus the alphabet (256 for bytes)."""
        return 256 if self.alphabet is None else len(self.alphabet) + 1

    @property
    def positions(self) -> int:
        """P: fragment positions, ``ceil(max_length / fragment_length)``."""
        return -(-self.max_length // self.fragment_length)

    @property
    def fragment_items(self) -> int:
        """``2^hash_bits A^fragment_length``: the fragment items of one position."""
        return (1 << self.hash_bits) * self.symbols**self.fragment_length

    def _fragment_spec(self) -> Any:
        cls = _SKETCHES[self.sketch]
        eps = self.epsilon * self.fragment_share
        return cls(epsilon=eps, width=self.width, depth=self.depth)

    def _word_spec(self) -> Any:
        cls = _SKETCHES[self.sketch]
        eps = self.epsilon * (1.0 - self.fragment_share)
        return cls(epsilon=eps, width=self.width, depth=self.depth)

    def privacy_loss(self) -> float:
        """Return the sum of the two sketches' realized losses (sequential composition)."""
        return float(self._fragment_spec().privacy_loss() + self._word_spec().privacy_loss())

    # -- client --------------------------------------------------------------------------
    def _grid(self, values: Any) -> np.ndarray:
        return self._grid_of(encode_strings(values, self.max_length, self.alphabet))

    def _grid_of(self, symbols: np.ndarray) -> np.ndarray:
        grid = np.zeros((symbols.shape[0], self.positions * self.fragment_length), np.int64)
        grid[:, : self.max_length] = symbols
        return grid

    def _word_items(self, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Whole-string items (int64) and their ``hash_bits``-bit hashes."""
        key = level_keys(grid[:, : self.max_length], np.full(grid.shape[0], self.max_length - 1))
        items = (key >> np.uint64(1)).astype(np.int64)
        hashes = (key >> np.uint64(64 - self.hash_bits)).astype(np.int64)
        return items, hashes

    def _fragment_codes(self, grid: np.ndarray, position: np.ndarray) -> np.ndarray:
        code = np.zeros(grid.shape[0], dtype=np.int64)
        rows = np.arange(grid.shape[0])
        for t in range(self.fragment_length):  # a loop over a fragment's symbols
            code = code * self.symbols + grid[rows, position * self.fragment_length + t]
        return code

    def _fragment_item(self, position: Any, hashes: Any, code: Any) -> Any:
        return (position * (1 << self.hash_bits) + hashes) * (
            self.symbols**self.fragment_length
        ) + code

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """One report per user: ``fragment_*`` and ``word_*`` fields of the two sketches.

        Examples
        --------
        >>> SFP(epsilon=2.0, max_length=4, depth=4).randomize(["ab", "b"], rng=0).fields
        ('fragment_rows', 'fragment_index', 'fragment_bits', 'word_rows', 'word_index', 'word_bits')
        """
        symbols, inverse = encode_distinct(values, self.max_length, self.alphabet)
        grid = self._grid_of(symbols)
        pos_stream, frag_stream, word_stream = independent_streams(as_generator(rng), 3)
        n = grid.shape[0] if inverse is None else inverse.shape[0]
        position = np.asarray(pos_stream.integers(0, self.positions, size=n), dtype=np.int64)
        words, hashes = self._word_items(grid)
        frag_spec, word_spec = self._fragment_spec(), self._word_spec()
        if inverse is None:
            code = self._fragment_codes(grid, position)
            frag_keys = frag_spec.item_keys(self._fragment_item(position, hashes, code))
            word_keys = word_spec.item_keys(words)
        else:  # repeated strings: each distinct string's item keys once, gathered
            rows = grid.shape[0]
            table = np.stack(
                [
                    self._fragment_item(k, hashes, self._fragment_codes(grid, np.full(rows, k)))
                    for k in range(self.positions)
                ],
                axis=1,
            )
            flat = inverse * self.positions + position
            if table.size <= n:  # every distinct (string, position) item hashed once
                frag_keys = frag_spec.item_keys(table.reshape(-1))[flat]
            else:  # many distinct strings: only the users' own items
                frag_keys = frag_spec.item_keys(table.reshape(-1)[flat])
            word_keys = word_spec.item_keys(words)[inverse]
        # the sketches' own randomize, from the keys (item_keys draws nothing: same reports)
        fr = frag_spec._randomize_keys(frag_keys, frag_stream)
        wr = word_spec._randomize_keys(word_keys, word_stream)
        arrays = {f"fragment_{k}": v for k, v in fr.arrays.items()}
        arrays.update({f"word_{k}": v for k, v in wr.arrays.items()})
        return Reports(self, **arrays)

    # -- server --------------------------------------------------------------------------
    def stats_schema(self) -> dict[str, StatsField]:
        """Return the two sketches' tables, ``fragment_*`` and ``word_*``."""
        out = {f"fragment_{k}": v for k, v in self._fragment_spec().stats_schema().items()}
        out.update({f"word_{k}": v for k, v in self._word_spec().stats_schema().items()})
        return out

    def empty_stats(self) -> Stats:
        """Return the Stats of no report (zero arrays): the neutral element of merge."""
        arrays = {k: np.zeros(v.shape, dtype=np.int64) for k, v in self.stats_schema().items()}
        return Stats(self, 0, **arrays)

    def _split(self, arrays: dict[str, Any], part: str) -> dict[str, Any]:
        return {k[len(part) + 1 :]: v for k, v in arrays.items() if k.startswith(part + "_")}

    def aggregate(self, reports: Reports) -> Stats:
        """Reduce the reports to their mergeable Stats (both sketches' fields)."""
        reports = self.check_reports(reports)
        expected = set(self.randomize([], rng=0).fields)
        if set(reports.fields) != expected:
            raise ValueError(
                f"reports must have fields {sorted(expected)}, got {list(reports.fields)}"
            )
        arrays = dict(reports.arrays)
        out: dict[str, np.ndarray] = {}
        for part, spec in (("fragment", self._fragment_spec()), ("word", self._word_spec())):
            inner = spec.aggregate(Reports(spec, **self._split(arrays, part)))
            out.update({f"{part}_{k}": v for k, v in inner.arrays.items()})
        return Stats._exact(self, len(reports), out)

    def _inner_stats(self, stats: Stats, part: str, spec: Any) -> Stats:
        return Stats._exact(spec, stats.n, self._split(dict(stats.arrays), part))

    def fragment_frequencies(self, stats: Stats, position: int) -> np.ndarray:
        """Estimate the share of every ``(hash, fragment)`` item among users at ``position``.

        Shape ``(2^hash_bits, A^fragment_length)``; unbiased: the fragment sketch's
        estimate times P.
        """
        spec = self._fragment_spec()
        inner = self._inner_stats(stats, "fragment", spec)
        items = self._fragment_item(position, 0, 0) + np.arange(self.fragment_items)
        f = spec._frequencies(inner, keys_of(items.tolist()))
        return (f * self.positions).reshape(1 << self.hash_bits, -1)

    def word_frequencies(self, stats: Stats, values: Any) -> np.ndarray:
        """Unbiased frequencies of whole strings from the whole-string sketch."""
        grid = self._grid(values)
        spec = self._word_spec()
        words, _ = self._word_items(grid)
        return spec._frequencies(self._inner_stats(stats, "word", spec), keys_of(words.tolist()))

    def estimate(self, stats: Stats) -> Any:
        """Assemble candidates from the frequent fragments and score them.

        Returns a :class:`HeavyHitters` of the top items.
        """
        from .result import HeavyHitters

        stats = self.check_stats(stats, nonempty=True)
        keep = self.keep or min(32 * self.top_k, 1 << 16)
        fl, a = self.fragment_length, self.symbols
        chosen: list[dict[int, list[int]]] = []
        per_level = []
        for k in range(self.positions):  # a loop over positions
            f = self.fragment_frequencies(stats, k).ravel()
            per_level.append(int(f.size))
            top = np.argsort(-f, kind="stable")[:keep]
            by_hash: dict[int, list[int]] = {}
            for item in top.tolist():  # the kept items only
                by_hash.setdefault(item // a**fl, []).append(item % a**fl)
            chosen.append(by_hash)
        powers = a ** np.arange(fl - 1, -1, -1)
        rows: list[np.ndarray] = []
        tags: list[int] = []
        for r in set.intersection(*(set(c) for c in chosen)):  # hashes seen at every position
            lists = [c[r] for c in chosen]
            while np.prod([len(x) for x in lists], dtype=float) > MAX_PER_HASH:
                longest = max(range(len(lists)), key=lambda i: len(lists[i]))
                lists[longest] = lists[longest][:-1]
            for combo in itertools.product(*lists):  # at most MAX_PER_HASH per hash
                codes = np.asarray(combo, dtype=np.int64)
                rows.append(((codes[:, None] // powers[None, :]) % a).ravel())
                tags.append(r)
        candidates = np.array(rows, dtype=np.int64).reshape(len(rows), -1)
        hashes = np.asarray(tags, dtype=np.int64)
        if candidates.shape[0]:
            # the padding only trails; the string's own hash must be the fragments' one
            started = np.cumsum(candidates == 0, axis=1) > 0
            valid = ~np.any(started & (candidates != 0), axis=1)
            valid &= ~np.any(candidates[:, self.max_length :] != 0, axis=1)
            candidates, hashes = candidates[valid], hashes[valid]
        words, own = self._word_items(candidates)
        candidates = candidates[own == hashes]
        words = words[own == hashes]
        spec = self._word_spec()
        inner = self._inner_stats(stats, "word", spec)
        f = spec._frequencies(inner, keys_of(words.tolist())) if words.size else np.zeros(0)
        std = np.sqrt(spec.variance(stats.n, np.clip(f, 0.0, 1.0))) * np.ones(f.size)
        std0 = float(np.sqrt(spec.variance(stats.n)))
        order = np.argsort(-f, kind="stable")[: self.top_k]
        tested = int(f.size)
        z = f / std0
        if self.control == "fwer" and tested:
            cut = float(-special.ndtri(self.alpha / tested))  # one-sided Bonferroni
            order = order[z[order] > cut]
        elif self.control == "fdr" and tested:
            pvalues = np.sort(special.ndtr(-z))
            passing = np.flatnonzero(pvalues <= self.alpha * np.arange(1, tested + 1) / tested)
            bound = float(pvalues[passing[-1]]) if passing.size else -1.0
            order = order[special.ndtr(-z[order]) <= bound]
        items = tuple(
            decode_symbols(candidates[i, : self.max_length], self.alphabet) for i in order.tolist()
        )
        return HeavyHitters(
            items=items,
            frequencies=np.asarray(f[order], dtype=np.float64),
            std_error=np.asarray(std[order], dtype=np.float64),
            n=stats.n,
            spec=self,
            tested=tested,
            candidates_per_level=tuple(per_level),
        )

    # -- contract hooks ------------------------------------------------------------------
    def _contract_values(self, n: int, gen: np.random.Generator) -> np.ndarray:
        chars = self.alphabet if self.alphabet is not None else "abc"
        pool = [chars[:1], chars[-1:] * 2, (chars * 3)[:5], ""]
        out = np.empty(n, dtype=object)
        out[:] = [pool[i] for i in gen.integers(0, len(pool), n)]
        return out

    def _contract_bad_values(self) -> tuple[list[Any], list[Any]]:
        return [np.array([["a", "b"], ["c", "d"]])], [[1, 2], ["a", 3.5], [None]]

    def _contract_check_estimate(self, estimate: Any, stats: Stats) -> None:
        from .result import check_heavy_hitters  # server side: loaded by the check only

        check_heavy_hitters(estimate, self.top_k)
