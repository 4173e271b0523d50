"""Shared server machinery of the local-DP stream releases (ToPL and its baselines).

Under local DP every released user sends one report from which the server forms an
unbiased estimate ``x_k`` of the user's (clipped) value; a range sum is the sum of those
estimates, and its noise variance is ``(j - i) sigma^2`` with ``sigma^2`` the per-user
variance. This module owns the store of those estimates and the client/server plumbing that
:class:`~ldpkit.stream.ToPL`, :class:`~ldpkit.stream.SWOnly` and
:class:`~ldpkit.stream.FixedDomainLDP` share.

Store (``block_size = g``)
--------------------------
Per-user estimates are summed into blocks of ``g`` consecutive users, and the server keeps
the float64 prefix sums of the completed blocks (``P[t]`` = sum of blocks ``0..t-1``) plus
the per-user estimates of the one open block. A range ``[i, j)`` is ``S(j) - S(i)`` with

* ``S(p) = P[nb] + (open estimates before p)`` for p in the open block (exact);
* ``S(p) = P[t] + (r / g)(P[t+1] - P[t])`` for ``p = t g + r`` in a completed block: a
  block that a range cuts contributes the covered fraction of its sum.

``g = 1`` (the default) keeps a prefix sum at every position: range sums are exact sums of
per-user estimates, so they are unbiased for the clipped values of exactly that range, in
O(1) per query, at 8 bytes per released user (the paper's n = 2^20 takes 8 MB). ``g > 1``
divides the memory by g (a service that runs for 1e9 users with g = 1024 keeps 8 MB);
ranges that start and stop on block boundaries (or inside the open block) are still exact
and unbiased, a cut block contributes ``(r/g)`` of its sum, which is unbiased for the
range only when the values inside a block are exchangeable (e.g. a shuffled stream), and
otherwise adds an interpolation error that the standard error does not cover.

Standard errors: the noise of the estimate is ``sum_k w_k (x_k - v_k)`` with weight
``w_k = 1`` on the positions of fully covered blocks and of the open block, and the covered
fraction of a cut block on each of its g positions, so its variance is
``sigma^2 sum_k w_k^2``, computed exactly (vectorized, O(1) per range).

Cost: ingesting is O(batch) — a validation pass, the per-user estimates and a running
sum; the prefix array grows by doubling (at most 2x its 8 bytes per block transiently).

Serialization: :meth:`to_dict` holds the prefix sums, the open block, the phase-1
statistics of ToPL and the Generator's state; :meth:`from_dict` continues bit for bit.
"""

from __future__ import annotations

import numbers
from abc import abstractmethod
from typing import Any

import numpy as np

from .._rng import RNGLike, as_generator
from .._validation import (
    check_bound,
    check_epsilon,
    check_integer,
    check_numeric_values,
)
from ..spec import Mechanism, Reports, Stats
from ._release import StreamRelease
from .topl_client import client_randomize
from .windows import (
    WindowedStats,
    WindowEstimates,
    aggregate_windows,
    check_window_keys,
    window_sums,
)

__all__ = ["LocalStreamRelease"]


class LocalStreamRelease(StreamRelease):
    """Base of the local-DP stream releases: reports in, unbiased per-user estimates stored.

    Subclasses provide the perturbation spec (:meth:`client_spec`), the map from reports to
    per-user estimates and the per-user noise variance; ToPL adds a threshold phase.
    """

    def __init__(
        self,
        epsilon: float,
        bound: float,
        *,
        threshold_size: int,
        block_size: int,
        rng: RNGLike,
    ) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.bound = check_bound(bound)
        self.block_size = check_integer(block_size, "block_size", low=1)
        self._spec: Mechanism | None = None  # the perturbation spec, once theta is known
        self._windows: WindowedStats | None = None
        # threshold-phase users per window: [count, sum of their unbiased estimates]
        self._threshold_windows: dict[Any, list[float]] = {}
        self._reset_store()
        super().__init__(threshold_size, rng)
        self._buffer = np.zeros(0)  # local DP: the server never holds raw values

    # ------------------------------------------------------------------ to implement
    @abstractmethod
    def _perturb_spec(self, threshold: float) -> Mechanism:
        """Return the spec released users randomize with, given the threshold."""

    @abstractmethod
    def _estimates(self, reports: Reports) -> np.ndarray:
        """Turn validated reports of the perturbation spec into per-user unbiased estimates."""

    @property
    @abstractmethod
    def per_user_variance(self) -> float | None:
        """``sigma^2``: the noise variance of one user's estimate (None before theta)."""

    def _ingest_threshold_phase(self, data: Reports | Stats) -> None:
        """Phase-1 reports (ToPL overrides; the baselines have no threshold phase)."""
        raise ValueError(
            f"{type(self).__name__} has no threshold phase: reports must come from "
            f"client_spec() once the threshold is set"
        )

    def _select_threshold(self, items: np.ndarray, rng: np.random.Generator) -> float:
        raise ValueError(f"{type(self).__name__} has no threshold phase")

    # ------------------------------------------------------------------ client side
    @property
    def phase(self) -> str:
        """``"threshold"`` while the first m users report, then ``"perturb"``."""
        return "threshold" if self._threshold is None else "perturb"

    def client_spec(self, phase: str | None = None) -> Mechanism:
        """Return the frozen spec users of ``phase`` (default: the current one) randomize with.

        Send ``spec.to_dict()`` to devices; they call
        :func:`ldpkit.stream.client_randomize` and send back the Reports.
        """
        phase = self.phase if phase is None else phase
        if phase != "perturb":
            raise ValueError(f"phase must be 'perturb' for {type(self).__name__}, got {phase!r}")
        if self._spec is None:
            raise ValueError("the perturbation spec is known once the threshold is chosen")
        return self._spec

    # ------------------------------------------------------------------ server side
    def ingest(self, reports: Reports | Stats, *, windows: Any = None) -> LocalStreamRelease:
        """Accept a batch of users' reports (vectorized) and return ``self``.

        Reports must come from :meth:`client_spec` of the current phase. During ToPL's
        threshold phase, aggregated ``Stats`` of the Square Wave spec are accepted too
        (merged from several collectors); released reports must be Reports, since their
        positions in the stream matter.

        ``windows`` (optional, one key per report: a day from
        :func:`ldpkit.stream.window_keys`, an index from :func:`ldpkit.stream.count_windows`)
        also files every released report under its window (:attr:`window_stats`, answered
        by :meth:`window_sums`); threshold-phase reports are counted per window
        (:attr:`threshold_window_counts`), since they only choose theta.
        """
        if windows is not None:
            keys = self._check_windows(reports, windows)
        if self._threshold is None:
            self._ingest_threshold_phase(reports)
            if windows is not None:
                assert isinstance(reports, Reports)
                x = self._threshold_estimates(reports)
                uniq, inverse = np.unique(keys, return_inverse=True)
                counts = np.bincount(inverse, minlength=uniq.size)
                sums = np.bincount(inverse, weights=x, minlength=uniq.size)
                for key, count, total in zip(uniq.tolist(), counts.tolist(), sums.tolist()):
                    slot = self._threshold_windows.setdefault(key, [0, 0.0])
                    slot[0] += count
                    slot[1] += total
            return self
        if not isinstance(reports, Reports):
            raise TypeError(
                f"reports must be ldpkit.Reports of the perturbation spec, got {type(reports).__name__}"
            )
        spec = self.client_spec("perturb")
        if reports.spec != spec:
            raise ValueError(
                f"reports must come from {spec!r} (the {self.phase} phase; fingerprint "
                f"{spec.fingerprint}), got reports from {reports.spec!r}"
            )
        x = self._estimates(reports)
        if windows is not None:
            part = aggregate_windows(spec, reports, keys)
            self._windows = part if self._windows is None else self._windows.merge(part)
        self._store(x)
        self._n_seen += x.size
        return self

    @staticmethod
    def _check_windows(reports: Reports | Stats, windows: Any) -> np.ndarray:
        if not isinstance(reports, Reports):
            raise TypeError("windows need Reports (one key per report), got aggregated Stats")
        return check_window_keys(windows, len(reports))

    # ------------------------------------------------------------------ windows
    @property
    def window_stats(self) -> WindowedStats | None:
        """Released reports filed per window (None until reports arrive with ``windows=``).

        Mergeable per-window Stats of :meth:`client_spec` ``("perturb")``.
        """
        return self._windows

    @property
    def threshold_window_counts(self) -> dict[Any, int]:
        """Return the threshold-phase users per window.

        They choose theta; :meth:`window_sums` counts them through their threshold-phase
        reports.
        """
        return {k: int(v[0]) for k, v in self._threshold_windows.items()}

    def _threshold_estimates(self, reports: Reports) -> np.ndarray:
        """Per-user unbiased estimates of threshold-phase users (ToPL overrides)."""
        raise ValueError(f"{type(self).__name__} has no threshold phase")

    @property
    def threshold_per_user_variance(self) -> float:
        """Worst-case variance of one threshold-phase estimate (ToPL overrides)."""
        raise ValueError(f"{type(self).__name__} has no threshold phase")

    def window_sums(self) -> WindowEstimates:
        """Unbiased sum of the values of every window's users, with standard errors.

        Released users count with their clipped values (:func:`ldpkit.stream.window_sums` of
        :attr:`window_stats`); users of the threshold phase with the unbiased estimate of
        their (unclipped) value from their threshold-phase report, at that report's larger
        worst-case variance. So every user who reported with ``windows=`` is in the answer,
        and the first day of a daily series is not lost to the threshold phase.
        """
        if self._windows is None and not self._threshold_windows:
            raise ValueError("window_sums needs reports ingested with windows=")
        rel = None if self._windows is None else window_sums(self._windows)
        released: dict[Any, tuple[int, float, float]] = {}
        if rel is not None:
            for k, count, e, se in zip(rel.windows, rel.n, rel.estimate, rel.std_error):
                released[k] = (int(count), float(e), float(se * se))
        keys: list[Any] = sorted(set(released) | set(self._threshold_windows))
        n = np.zeros(len(keys), dtype=np.int64)
        est = np.zeros(len(keys))
        var = np.zeros(len(keys))
        for i, k in enumerate(keys):
            if k in released:
                n[i], est[i], var[i] = released[k]
            if k in self._threshold_windows:
                count, total = self._threshold_windows[k]
                n[i] += int(count)
                est[i] += total
                var[i] += count * self.threshold_per_user_variance
        return WindowEstimates(keys, n, est, np.sqrt(var))

    # ------------------------------------------------------------------ simulation
    def _check_items(self, items: Any) -> np.ndarray:
        return check_numeric_values(items, 0.0, self.bound, "values")

    def _release(self, items: np.ndarray, rng: np.random.Generator) -> None:
        """Simulate released users: clip, randomize on the device, ingest the reports."""
        self.ingest(client_randomize(self.client_spec("perturb"), items, rng=rng))

    def _simulate(self, values: Any, gen: np.random.Generator) -> None:
        x = self._check_items(values)
        if self._threshold is None and x.size:
            take = min(self._m - self._threshold_count(), x.size)
            self.ingest(client_randomize(self.client_spec("threshold"), x[:take], rng=gen))
            x = x[take:]
        if x.size:
            self._release(x, gen)

    def _threshold_count(self) -> int:
        return 0

    def update(self, items: Any) -> LocalStreamRelease:
        """Simulate one batch of users with the estimator's own Generator.

        Client randomization + :meth:`ingest`. The values never reach the server's state.
        """
        self._simulate(items, self._rng)
        return self

    def simulate(self, values: Any, *, rng: RNGLike = None) -> LocalStreamRelease:
        """Simulate the clients of ``values`` (one batch, or an iterable of batches) for experiments.

        Each value is one user, in stream order; users of the threshold phase report with
        Square Wave, later users clip and report with the perturbation spec, and the
        server ingests the reports. ``rng`` (default: the estimator's own Generator) is
        the simulated devices' randomness: the same seed and batches give the same output.
        (:meth:`extend` is the base class's: several batches through :meth:`update`.)
        """
        gen = self._rng if rng is None else as_generator(rng)
        if isinstance(values, (np.ndarray, numbers.Real)) or (
            isinstance(values, (list, tuple)) and all(np.ndim(v) == 0 for v in values)
        ):
            batches: Any = [values]
        else:
            batches = values
        for batch in batches:
            self._simulate(batch, gen)
        return self

    # ------------------------------------------------------------------ store
    def _reset_store(self) -> None:
        self._prefix = np.zeros(1024)
        self._n_blocks = 0
        self._open = np.zeros(self.block_size)
        self._open_fill = 0

    def _append_blocks(self, sums: np.ndarray) -> None:
        nb = self._n_blocks
        need = nb + 1 + sums.size
        if need > self._prefix.size:
            grown = np.zeros(max(need, 2 * self._prefix.size))
            grown[: nb + 1] = self._prefix[: nb + 1]
            self._prefix = grown
        # a running sum that continues the previous one term by term: the same bits
        # however the users were batched
        self._prefix[nb:need] = np.cumsum(np.concatenate(([self._prefix[nb]], sums)))
        self._n_blocks += sums.size

    def _store(self, x: np.ndarray) -> None:
        g = self.block_size
        if g == 1:
            self._append_blocks(x)
            return
        if self._open_fill:
            take = min(g - self._open_fill, x.size)
            self._open[self._open_fill : self._open_fill + take] = x[:take]
            self._open_fill += take
            x = x[take:]
            if self._open_fill < g:
                return
            self._append_blocks(self._open.reshape(1, g).sum(axis=1))
            self._open_fill = 0
        k = x.size // g
        if k:
            self._append_blocks(x[: k * g].reshape(k, g).sum(axis=1))
        rest = x[k * g :]
        self._open[: rest.size] = rest
        self._open_fill = rest.size

    @property
    def n_released(self) -> int:
        return self._n_blocks * self.block_size + self._open_fill

    def _prefix_at(self, p: np.ndarray) -> np.ndarray:
        """``S(p)``: estimated sum of released positions ``[0, p)`` (see the module notes)."""
        g, nb = self.block_size, self._n_blocks
        closed = nb * g
        out = np.empty(p.shape)
        in_open = p >= closed
        if np.any(in_open):
            part = np.concatenate(([0.0], np.cumsum(self._open[: self._open_fill])))
            out[in_open] = self._prefix[nb] + part[p[in_open] - closed]
        done = ~in_open
        if np.any(done):
            blk, r = np.divmod(p[done], g)
            lo = self._prefix[blk]
            if g == 1:
                out[done] = lo
            else:
                out[done] = lo + (r / g) * (self._prefix[blk + 1] - lo)
        return out

    def _range_estimates(self, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
        if self.n_released == 0:
            return np.zeros(starts.shape)
        return self._prefix_at(stops) - self._prefix_at(starts)

    def _range_weight_squares(self, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
        """``sum_k w_k^2`` of each range's weights on the per-user estimates (vectorized)."""
        g = self.block_size
        closed = self._n_blocks * g
        i = np.asarray(starts, dtype=np.int64)
        j = np.asarray(stops, dtype=np.int64)
        total = np.maximum(0, j - np.maximum(i, closed)).astype(np.float64)  # open block: w = 1
        b = np.minimum(j, closed)
        has = i < b  # the range covers positions of completed blocks
        ba, ra = np.divmod(i, g)
        bb, rb = np.divmod(b, g)
        ra, rb = ra.astype(np.float64), rb.astype(np.float64)
        cut = (g - ra) ** 2 / g + (bb - ba - 1).astype(np.float64) * g + rb**2 / g
        part = np.where(ba == bb, (rb - ra) ** 2 / g, cut)
        return total + np.where(has, part, 0.0)

    def _range_variances(self, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
        var = self.per_user_variance
        if var is None:
            return np.zeros(np.shape(starts))
        return var * self._range_weight_squares(starts, stops)

    def _range_variance(self, start: int, stop: int) -> float:
        return float(self._range_variances(np.array([start]), np.array([stop]))[0])

    def range_sums(
        self, starts: Any, stops: Any, *, std_error: bool = True
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Answer many range sums at once (a vectorized :meth:`range_sum`).

        ``(estimates, std_errors)`` (``None`` if not asked); O(1) work per range.
        """
        i, j = self._check_range(starts, stops)
        est = self._range_estimates(i, j)
        if not std_error:
            return est, None
        return est, np.sqrt(self._range_variances(i, j))

    # ------------------------------------------------------------------ state
    def _start_release(self, threshold: float) -> None:
        self._spec = self._perturb_spec(threshold)
        self._reset_store()

    def _store_state(self) -> dict[str, Any]:
        return {
            "prefix": self._prefix[: self._n_blocks + 1].copy(),
            "open": self._open[: self._open_fill].copy(),
        }

    def _load_store(self, state: dict[str, Any]) -> None:
        prefix = np.asarray(state["prefix"], dtype=np.float64).reshape(-1)
        opened = np.asarray(state["open"], dtype=np.float64).reshape(-1)
        if prefix.size < 1 or opened.size >= self.block_size:
            raise ValueError(
                "state must hold >= 1 prefix sum and fewer open estimates than block_size"
            )
        self._prefix = np.zeros(max(1024, 2 * prefix.size))
        self._prefix[: prefix.size] = prefix
        self._n_blocks = prefix.size - 1
        self._open[: opened.size] = opened
        self._open_fill = opened.size

    def _state(self) -> dict[str, Any]:
        return self._store_state()

    def _load_state(self, state: dict[str, Any]) -> None:
        self._load_store(state)

    def to_dict(self) -> dict[str, Any]:
        """Parameters, the store (and ToPL's phase-1 statistics) and the Generator's state."""
        out = super().to_dict()
        out["state"] = self._state()  # phase-1 statistics too, unlike the central-DP streams
        out["windows"] = None if self._windows is None else self._windows.to_dict()
        out["threshold_windows"] = [
            [k, int(v[0]), v[1]] for k, v in self._threshold_windows.items()
        ]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StreamRelease:
        obj = super().from_dict(data)
        assert isinstance(obj, LocalStreamRelease)
        if obj._threshold is None:
            obj._load_state(data["state"])
        if data.get("windows") is not None:
            obj._windows = WindowedStats.from_dict(data["windows"])
        obj._threshold_windows = {
            k: [int(n), float(total)] for k, n, total in data.get("threshold_windows", [])
        }
        return obj

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(epsilon={self.epsilon}, bound={self.bound}, "
            f"threshold={self._threshold}, n_released={self.n_released})"
        )
