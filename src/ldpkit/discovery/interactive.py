"""Interactive prefix discovery: devices answer about the server's published candidates.

The one-round specs (:mod:`ldpkit.discovery.prefix`) ask group ``l`` about its prefix of
length ``l + 1`` whatever it is; the server then tests a few candidates against hashes that
every other string of the population also lands in. Here the users are split into rounds
(one per prefix length, as PEM's groups) and the rounds run one after the other: after
round ``r`` the server publishes the survivors (the ``keep`` largest prefixes of length
``r + 1``), and round ``r + 1``'s devices answer only about their extensions:

* the **domain** of round ``r`` is public and finite: every survivor of round ``r - 1``
  extended by every symbol (an ended survivor, whose last symbol is the padding, only by
  the padding), plus one symbol "none of these";
* a device holding a candidate reports it with OLH over the round's ``H`` public hash
  functions (a value-blind hash index ``j``, then generalized randomized response over
  ``[g]`` of ``h_{r,j}`` of its key, exact integer weights); any other device reports
  "none of these": a uniform value in ``[g]``, i.e. the average of the GRR rows, so every
  ratio of report probabilities stays within ``w_keep / w_other <= e^eps``. A report
  depends only on the device's own string and the public round state;
* "none" is what a fresh random hash would give, so the users outside the candidates add
  no collision bias to any candidate (in one round they do, through the fixed family), and
  the server knows every candidate whose collisions it must correct (those estimated
  significantly above zero; the rest keep the untested-collision term of
  :mod:`ldpkit.discovery._search`, bounded there by the untested mass, "none" included).

This follows the adaptive prefix-tree protocols that publish the next candidates between
rounds of users (PrivTrie: Wang, Li, Jha, Xiao, Lin, "PrivTrie: Effective Frequent Term
Discovery under Local Differential Privacy", ICDE 2018, section IV; PEM's grouping by
prefix length: Wang, Li, Jha, IEEE TDSC 2021, section 4); the "none of these" symbol and
the exact-domain collision correction are ldpkit's choices.

A collector drives it with :meth:`InteractivePEM.rounds`: publish ``state.spec`` (a
:class:`PEMRound`, a regular :class:`~ldpkit.spec.Mechanism`), collect that round's
reports, then ``state.next_candidates(stats)`` and publish the next ``state.spec``; after
the last round ``state.result()`` is the :class:`~ldpkit.discovery.HeavyHitters`.
:meth:`InteractivePEM.run` simulates the whole protocol.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np

from .._constraints import Alternatives, Check, Integer, Size
from .._exact import RR_MAX_EPSILON
from .._rng import RNGLike, as_generator
from .._validation import _show, check_epsilon
from ..frequency.grr import grr_sample
from ..spec import Mechanism, Reports, Stats, StatsField
from ._strings import (
    ALPHABET,
    empty_key,
    encode_strings,
    extend_keys,
    family_seeds,
    hash_keys,
    level_keys,
)
from .prefix import PEM, HashedPrefixLaw, _uint_dtype

__all__ = ["PEMRound", "RoundEstimate", "InteractivePEM", "DiscoveryRounds"]

#: Candidates a round may publish: survivors x symbols (bounded: the device builds them).
MAX_CANDIDATES = 1 << 20


def _survivor_rows(survivors: Any, name: str = "survivors") -> tuple[tuple[int, ...], ...]:
    """Return ``survivors`` as rows of ints (their lengths and symbols checked by the spec)."""
    if not isinstance(survivors, (tuple, list)):
        raise TypeError(
            f"survivors must be a tuple of symbol rows (tuples of ints), got {_show(survivors)}"
        )
    rows: list[tuple[int, ...]] = []
    for row in survivors:
        if not isinstance(row, (tuple, list)) or not all(
            isinstance(s, (int, np.integer)) and not isinstance(s, (bool, np.bool_)) for s in row
        ):
            raise TypeError(
                f"survivors must be a tuple of symbol rows (tuples of ints), got a row {_show(row)}"
            )
        rows.append(tuple(int(s) for s in row))
    return tuple(rows)


def _check_survivors(survivors: Any, symbols: int, max_length: int) -> tuple[tuple[int, ...], ...]:
    """Canonical survivors: distinct rows of one length < max_length, symbols in [0, A)."""
    rows = _survivor_rows(survivors)
    if not rows or all(len(r) == 0 for r in rows):
        return ()
    length = len(rows[0])
    if any(len(r) != length for r in rows) or not 1 <= length < max_length:
        raise ValueError(
            f"survivors must be rows of one length in [1, max_length - 1 = {max_length - 1}], "
            f"got lengths {sorted({len(r) for r in rows})[:5]}"
        )
    grid = np.array(rows, dtype=np.int64)
    if grid.min() < 0 or grid.max() >= symbols:
        raise ValueError(f"survivors must hold symbols in [0, {symbols}), got others")
    ended = np.cumsum(grid == 0, axis=1) > 0
    if np.any(ended & (grid != 0)):
        raise ValueError("survivors must pad only at the end (a 0 symbol is followed by 0s)")
    if len(set(rows)) != len(rows):
        raise ValueError("survivors must be distinct rows, got repeated ones")
    if len(rows) * symbols > MAX_CANDIDATES:
        raise ValueError(
            f"survivors must extend to at most {MAX_CANDIDATES} candidates, "
            f"got {len(rows)} x {symbols} symbols"
        )
    return tuple(rows)


@dataclasses.dataclass(frozen=True, kw_only=True)
class PEMRound(HashedPrefixLaw, Mechanism):
    """One round of interactive prefix discovery: OLH over the published candidates.

    Round ``level`` (its prefixes have ``level + 1`` symbols; ``level = len`` of each
    survivor row) asks about the survivors of the previous round extended by one symbol.
    A device whose prefix of ``level + 1`` symbols is a candidate reports ``(hashes,
    values)``: a value-blind hash index ``j`` in ``[H]``, then generalized randomized
    response over ``[g]`` of ``h_{level,j}`` of the prefix's 64-bit key (OLH: Wang,
    Blocki, Li, Jha, USENIX Security 2017, section 4.4); every other device reports a
    uniform value in ``[g]`` ("none of these"; module docstring for the protocol).

    Parameters
    ----------
    epsilon : float
        Privacy budget of the one report, in ``[1e-6, 40]``.
    survivors : tuple of tuple of int
        The public round state: the previous round's survivors as symbol rows (UTF-8 bytes,
        or ``1 + index`` in ``alphabet``; 0 pads the end of a string that ended), all of one
        length ``level`` in ``[1, max_length - 1]``; ``()`` (default) is the first round,
        whose candidates are the ``A`` prefixes of one symbol.
    max_length, alphabet, hash_range, hash_functions
        As :class:`ldpkit.discovery.PEM` (symbols per string, alphabet, g and H; None: OLH's
        optimum g capped at 4096 and ``H = 2^14 // g`` in ``[16, 256]``).

    Examples
    --------
    >>> first = PEMRound(epsilon=4.0, max_length=4)
    >>> first.level, first.candidate_count
    (0, 256)
    >>> est = first.run(["ab"] * 300 + ["b"] * 100, rng=0)
    >>> top = est.prefixes[est.frequencies.argmax()]  # candidates in survivors' order
    >>> bytes(top.astype("uint8")).decode()
    'a'
    """

    survivors: tuple[tuple[int, ...], ...] = ()
    max_length: int = 12
    alphabet: str | None = None
    hash_range: int | None = None
    hash_functions: int | None = None
    max_epsilon: ClassVar[float] = RR_MAX_EPSILON

    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "survivors": [
            Check(
                _survivor_rows,
                "a tuple of equal-length rows of symbol ids (ints), shorter than max_length",
                hostile_values=["ab", ((0.5,),)],
            )
        ],
        "max_length": [Size(1, 64, small=3)],
        "alphabet": [ALPHABET, None],
        "hash_range": [Size(2, 1 << 16), None],
        "hash_functions": [Integer(1, 4096), None],
    }

    def _validate(self) -> None:
        # Symbols and length bound the rows: checked once both fields are known.
        self._set("survivors", _check_survivors(self.survivors, self.symbols, self.max_length))

    # -- constants -----------------------------------------------------------------------
    @property
    def level(self) -> int:
        """0-based round: the candidates have ``level + 1`` symbols."""
        return len(self.survivors[0]) if self.survivors else 0

    # -- the round's public domain ---------------------------------------------------------
    def candidates(self) -> tuple[np.ndarray, np.ndarray]:
        """Return the round's candidates: symbol rows ``(C, level + 1)`` and their 64-bit keys.

        Open survivors are extended by every symbol, ended ones by the padding only, in the
        order of ``survivors`` (the first round: the ``A`` one-symbol prefixes).
        """
        a = self.symbols
        if not self.survivors:
            rows = np.zeros((1, 0), dtype=np.uint16)
        else:
            rows = np.array(self.survivors, dtype=np.uint16)
        ended = rows[:, -1] == 0 if rows.shape[1] else np.zeros(rows.shape[0], dtype=bool)
        open_rows, closed_rows = np.flatnonzero(~ended), np.flatnonzero(ended)
        parent = np.concatenate([np.repeat(open_rows, a), closed_rows])
        symbol = np.concatenate(
            [np.tile(np.arange(a), open_rows.size), np.zeros(closed_rows.size, np.int64)]
        )
        keys = empty_key(rows.shape[0])
        for pos in range(rows.shape[1]):  # a loop over prefix positions, not candidates
            keys = extend_keys(keys, rows[:, pos])
        child = np.hstack([rows[parent], symbol[:, None].astype(np.uint16)])
        return child, extend_keys(keys[parent], symbol)

    @property
    def candidate_count(self) -> int:
        """C: the candidates of this round ("none of these" not counted)."""
        if not self.survivors:
            return self.symbols
        ended = sum(1 for row in self.survivors if row[-1] == 0)
        return (len(self.survivors) - ended) * self.symbols + ended

    # -- client --------------------------------------------------------------------------
    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """One report ``(hashes, values)`` per user's string.

        Examples
        --------
        >>> PEMRound(epsilon=2.0, max_length=4).randomize(["ab", "b"], rng=0).fields
        ('hashes', 'values')
        """
        symbols = encode_strings(values, self.max_length, self.alphabet)
        return self._randomize_symbols(symbols, as_generator(rng))

    def _randomize_symbols(self, symbols: np.ndarray, gen: np.random.Generator) -> Reports:
        n = symbols.shape[0]
        hashes = np.asarray(gen.integers(0, self.family_size, size=n))
        own = level_keys(symbols, np.full(n, self.level, dtype=np.int64))
        _, cand = self.candidates()
        known = np.sort(cand)
        pos = np.minimum(np.searchsorted(known, own), known.size - 1)
        member = known[pos] == own
        seeds = family_seeds(self.level, self.family_size)[hashes]
        hashed = hash_keys(own, seeds, self.range_size)
        y = grr_sample(hashed, self.range_size, self._weights(), gen)
        # "none of these": uniform over [g], the average of the GRR rows (so within e^eps
        # of each), exactly what a fresh random hash would give: no fixed-family collision
        uniform = np.asarray(gen.integers(0, self.range_size, size=n))
        y = np.where(member, y, uniform)
        return Reports(
            self,
            hashes=hashes.astype(_uint_dtype(self.family_size - 1)),
            values=y.astype(_uint_dtype(self.range_size - 1)),
        )

    # -- server --------------------------------------------------------------------------
    def stats_schema(self) -> dict[str, StatsField]:
        """``counts[j, y]``: one report per user, so they sum to n."""
        return {"counts": StatsField((self.family_size, self.range_size), total=1)}

    def empty_stats(self) -> Stats:
        """Return zero counts (the neutral element of merge)."""
        shape = (self.family_size, self.range_size)
        return Stats(self, 0, counts=np.zeros(shape, dtype=np.int64))

    def aggregate(self, reports: Reports) -> Stats:
        """Count the reports per (hash index, value)."""
        reports = self.check_reports(reports)
        if set(reports.fields) != {"hashes", "values"}:
            raise ValueError(
                f"reports must have fields ['hashes', 'values'], got {list(reports.fields)}"
            )
        limits = {"hashes": self.family_size, "values": self.range_size}
        for name, high in limits.items():
            arr = getattr(reports, name)
            if arr.ndim != 1 or (arr.size and int(arr.max()) >= high):
                raise ValueError(f"reports.{name} must be integers in [0, {high}), got others")
        g = self.range_size
        flat = reports.hashes.astype(np.int64) * g + reports.values
        counts = np.bincount(flat, minlength=self.family_size * g).reshape(-1, g)
        return Stats._exact(self, len(reports), {"counts": counts})

    def estimate(self, stats: Stats) -> RoundEstimate:
        """Estimate every candidate and "none" among this round's users.

        OLH's estimate per item (FO17 eq. 2, ``q* = 1/g``; unbiased because a non-member's
        uniform report hits any cell w.p. ``1/g``), corrected for the collisions with every
        other candidate estimated significantly above zero (the correction of
        :mod:`ldpkit.discovery._search`); the standard errors are OLH's at the estimate
        plus that module's family term (see ``docs/design/METHODS.md``).
        """
        from ._search import estimate_level  # server side: loaded by the server only

        stats = self.check_stats(stats, nonempty=True)
        rows, keys = self.candidates()
        # the family term stays for the candidates below the correction's significance cut
        # (counted with the "none" share as untested mass: an upper bound)
        f, std, std0 = estimate_level(self, stats.counts, keys, self.level, stats.n)
        return RoundEstimate(
            prefixes=rows,
            frequencies=f,
            std_error=std,
            null_std_error=std0,
            none_frequency=float(1.0 - f.sum()),
            n=stats.n,
            spec=self,
        )

    # -- contract hooks ------------------------------------------------------------------
    def _contract_check_estimate(self, estimate: Any, stats: Stats) -> None:
        assert isinstance(estimate, RoundEstimate), type(estimate).__name__
        c = self.candidate_count
        assert estimate.prefixes.shape == (c, self.level + 1), estimate.prefixes.shape
        for name in ("frequencies", "std_error", "null_std_error"):
            arr = getattr(estimate, name)
            assert arr.shape == (c,) and arr.dtype == np.float64, name
            assert np.all(np.isfinite(arr)), name
        assert np.isfinite(estimate.none_frequency) and estimate.n == stats.n


@dataclasses.dataclass(frozen=True, eq=False)
class RoundEstimate:
    """A round's estimates: every candidate's share among the round's users.

    Attributes
    ----------
    prefixes : ndarray of shape (C, level + 1)
        The candidates as symbol rows (0 pads an ended string).
    frequencies, std_error, null_std_error : ndarray of shape (C,)
        Estimates (unbiased over the draw of the public hash family), their standard
        errors, and the standard error of a zero frequency (for pruning and p-values).
    none_frequency : float
        Estimated share of the round's users holding no candidate (one minus the sum).
    n : int
        The round's reports.
    spec : PEMRound
        The round's spec.
    """

    prefixes: np.ndarray
    frequencies: np.ndarray
    std_error: np.ndarray
    null_std_error: np.ndarray
    none_frequency: float
    n: int
    spec: Any


@dataclasses.dataclass(frozen=True, kw_only=True)
class InteractivePEM:
    """Interactive PEM: one round of users per prefix length, candidates published between.

    ``max_length`` rounds; round ``r``'s users (a value-blind share ``1 / max_length`` of
    them in :meth:`run`) answer a :class:`PEMRound` about the extensions of round
    ``r - 1``'s ``keep`` largest prefixes. The server's pruning and its result are those
    of :class:`ldpkit.discovery.PEM` (beam of ``keep`` survivors, ended strings pooled
    over every round that counts them, the ``top_k`` largest at the end, optional
    ``control``); see the module docstring for the protocol and its sources.

    Parameters
    ----------
    epsilon : float
        Privacy budget of each user's one report, in ``[1e-6, 40]``.
    max_length, top_k, keep, alphabet, hash_range, hash_functions, control, alpha, pool_ended
        As :class:`ldpkit.discovery.PEM` (``pool_ended`` here pools an ended string over
        the rounds up to the one being pruned, and over all of them for the result).

    Examples
    --------
    >>> strings = ["apple"] * 600 + ["apricot"] * 300 + ["banana"] * 100
    >>> InteractivePEM(epsilon=8.0, max_length=8, top_k=2).run(strings, rng=0).items
    ('apple', 'apricot')
    """

    epsilon: float
    max_length: int = 12
    top_k: int = 20
    name: ClassVar[str] = "InteractivePEM"
    keep: int | None = None
    alphabet: str | None = None
    hash_range: int | None = None
    hash_functions: int | None = None
    control: str | None = None
    alpha: float = 0.05
    pool_ended: bool = True

    def __post_init__(self) -> None:
        """Validate every field through the equivalent one-round :class:`PEM` spec."""
        one = self.one_round()
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon, high=RR_MAX_EPSILON))
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, getattr(one, f.name))

    def one_round(self) -> PEM:
        """Return the one-round :class:`PEM` with the same settings (its search rules)."""
        return PEM(**{f.name: getattr(self, f.name) for f in dataclasses.fields(self)})

    def round_spec(self, survivors: tuple[tuple[int, ...], ...] = ()) -> PEMRound:
        """Return the :class:`PEMRound` that asks about the extensions of ``survivors``."""
        return PEMRound(
            epsilon=self.epsilon,
            survivors=survivors,
            max_length=self.max_length,
            alphabet=self.alphabet,
            hash_range=self.hash_range,
            hash_functions=self.hash_functions,
        )

    def rounds(self) -> DiscoveryRounds:
        """Start the server's state: its ``spec`` is the first round to publish."""
        return DiscoveryRounds(self)

    def run(self, values: Any, *, rng: RNGLike = None) -> Any:
        """Simulate the protocol: split the users into rounds, run them in turn.

        A value-blind uniform coin puts each user in one of the ``max_length`` rounds;
        every round's devices randomize against the state the previous rounds published.
        """
        symbols = encode_strings(values, self.max_length, self.alphabet)
        if symbols.shape[0] == 0:
            raise ValueError("values must hold at least one value to estimate from, got none")
        gen = as_generator(rng)
        which = np.asarray(gen.integers(0, self.max_length, size=symbols.shape[0]))
        state = self.rounds()
        for r in range(self.max_length):  # a loop over rounds; users are vectorized
            spec = state.spec
            assert spec is not None  # every round but after the last publishes a spec
            reports = spec._randomize_symbols(symbols[which == r], gen)
            state.next_candidates(spec.aggregate(reports) if len(reports) else spec.empty_stats())
        return state.result()


class DiscoveryRounds:
    """The server's state of an :class:`InteractivePEM` run (see its module docstring).

    ``spec`` is the :class:`PEMRound` to publish now (None once every round is in);
    ``next_candidates(stats)`` consumes that round's Stats and publishes the next;
    ``result()`` returns the :class:`~ldpkit.discovery.HeavyHitters` after the last round.

    Examples
    --------
    >>> state = InteractivePEM(epsilon=8.0, max_length=2, top_k=1).rounds()
    >>> while state.spec is not None:
    ...     spec = state.spec
    ...     _ = state.next_candidates(spec.aggregate(spec.randomize(["hi"] * 500, rng=1)))
    >>> state.result().items
    ('hi',)
    """

    def __init__(self, protocol: InteractivePEM) -> None:
        """Start at the first round of ``protocol``."""
        if not isinstance(protocol, InteractivePEM):
            raise TypeError(f"protocol must be an InteractivePEM, got {_show(protocol)}")
        self.protocol = protocol
        self.spec: PEMRound | None = protocol.round_spec()
        self.round = 0
        self._search = protocol.one_round()
        # ended strings' pooled sums over the rounds so far: row bytes -> (sum n f, sum n)
        self._pool: dict[bytes, tuple[float, int, float]] = {}
        self._z: list[np.ndarray] = []
        self._per_level: list[int] = []
        self._n = 0
        self._final: tuple[np.ndarray, ...] | None = None

    def next_candidates(self, stats: Stats) -> PEMRound | None:
        """Consume the current round's Stats; return (and publish) the next round's spec.

        The current round's candidates are estimated, ended strings pooled with their
        earlier rounds, the ``keep`` largest kept (``top_k`` at the last round); None
        after the last round (then call :meth:`result`).
        """
        if self.spec is None:
            raise ValueError("stats must belong to an open round, got one after the last round")
        spec = self.spec
        stats = spec.check_stats(stats)
        self._n += stats.n
        if stats.n:
            est = spec.estimate(stats)
            rows = est.prefixes
            f, std, std0 = est.frequencies.copy(), est.std_error.copy(), est.null_std_error.copy()
        else:  # nobody in this round: nothing is known about its candidates
            rows, _ = spec.candidates()
            f = np.zeros(rows.shape[0])
            std, std0 = np.full(f.size, np.inf), np.full(f.size, np.inf)
        users = np.full(f.size, stats.n, dtype=np.int64)
        if self.protocol.pool_ended:
            self._pool_ended(rows, f, std, std0, users, stats.n)
        z = np.zeros(f.size)
        finite = np.isfinite(std0)
        z[finite] = f[finite] / std0[finite]
        self._z.append(z)
        self._per_level.append(int(f.size))
        last = self.round == self.protocol.max_length - 1
        keep = self._search._prune(f, std0, last)
        if last:
            self._final = (rows[keep], f[keep], std[keep], z[keep], users[keep])
            self.spec = None
            return None
        self.round += 1
        survivors = tuple(tuple(int(s) for s in row) for row in rows[keep].tolist())
        self.spec = self.protocol.round_spec(survivors)
        return self.spec

    def _pool_ended(
        self,
        rows: np.ndarray,
        f: np.ndarray,
        std: np.ndarray,
        std0: np.ndarray,
        users: np.ndarray,
        n_r: int,
    ) -> None:
        """Average each ended string's estimate over the rounds that counted it (in place).

        Every round from the string's length on counts exactly its users (the string and
        end symbols), so the ``n_r``-weighted mean is one group of all those users.
        """
        ended = np.flatnonzero(rows[:, -1] == 0)
        if ended.size == 0 or n_r == 0:
            return
        spec = self.spec
        assert spec is not None
        g = spec.range_size
        gap = spec.p - 1.0 / g
        null_var = (1.0 / g) * (1.0 - 1.0 / g) / (n_r * gap * gap)  # this round's alone
        for i in ended.tolist():  # ended candidates: at most `keep` + A per round
            key = bytes(np.trim_zeros(rows[i].astype(np.uint16), "b").tobytes())
            family = max(0.0, float(std0[i]) ** 2 - null_var)  # the untested-collision term
            sum_nf, m, fam = self._pool.get(key, (0.0, 0, 0.0))
            sum_nf, m, fam = sum_nf + n_r * float(f[i]), m + n_r, fam + n_r * n_r * family
            self._pool[key] = (sum_nf, m, fam)
            fc = min(max(sum_nf / m, 0.0), 1.0)
            hit = 1.0 / g + fc * gap
            family_var = fam / (m * m)
            f[i], users[i] = sum_nf / m, m
            std[i] = np.sqrt(hit * (1.0 - hit) / (m * gap * gap) + family_var)
            std0[i] = np.sqrt((1.0 / g) * (1.0 - 1.0 / g) / (m * gap * gap) + family_var)

    def result(self) -> Any:
        """Return the :class:`~ldpkit.discovery.HeavyHitters` of the finished search."""
        from ._search import select

        if self._final is None:
            raise ValueError(
                f"result needs every round's stats, got {self.round} of {self.protocol.max_length}"
            )
        rows, f, std, z, users = self._final
        n = max(self._n, 1)
        # each round is a value-blind sample of the n users: add the sampling term
        fc = np.clip(f, 0.0, 1.0)
        m = np.maximum(users, 1)
        std = np.sqrt(std**2 + fc * (1.0 - fc) * np.clip(1.0 - m / n, 0.0, 1.0) / m)
        return select(
            self.protocol, rows, f, std, z, np.concatenate(self._z), self._n, tuple(self._per_level)
        )
