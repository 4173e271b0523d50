"""A stateful convenience wrapper over the stateless flow: add report batches, estimate."""

from __future__ import annotations

from typing import Any

from .spec import Mechanism, Reports, Stats

__all__ = ["Aggregator"]


class Aggregator:
    """Accumulates report batches (or Stats from other workers) for one spec.

    It only calls ``spec.aggregate`` and ``Stats.merge``; anything it does can be done
    with the stateless API, which is what distributed workers should use.

    Examples
    --------
    >>> from ldpkit import GRR
    >>> spec = GRR(epsilon=1.0, domain_size=3)
    >>> agg = Aggregator(spec)
    >>> agg.add(spec.randomize([0, 1, 2], rng=0)).add(spec.randomize([2, 2], rng=1)).n
    5
    """

    def __init__(self, spec: Mechanism, stats: Stats | None = None) -> None:
        if not isinstance(spec, Mechanism):
            raise TypeError(f"spec must be an ldpkit mechanism spec, got {type(spec).__name__}")
        self.spec = spec
        self._stats = spec.empty_stats() if stats is None else spec.check_stats(stats)

    @property
    def stats(self) -> Stats:
        """The Stats of every report added so far."""
        return self._stats

    @property
    def n(self) -> int:
        """Number of reports added so far."""
        return self._stats.n

    def add(self, reports: Reports) -> Aggregator:
        """Aggregate a batch of reports made under this spec (raises for any other)."""
        self._stats = self._stats.merge(self.spec.aggregate(reports))
        return self

    def add_stats(self, stats: Stats) -> Aggregator:
        """Merge statistics aggregated elsewhere under the same spec."""
        self._stats = self._stats.merge(self.spec.check_stats(stats))
        return self

    def estimate(self, **kwargs: Any) -> Any:
        """Estimate from the Stats so far (``spec.estimate``; keyword arguments pass through)."""
        return self.spec.estimate(self._stats, **kwargs)

    def __repr__(self) -> str:
        """Return a one-line summary."""
        return f"Aggregator({self.spec!r}, n={self.n})"
