"""Telemetry over time: mergeable per-window statistics and per-window answers with standard errors.

A device reports once per window (a day, an hour, or every n reports) with any mechanism of
the common contract; the collector keeps one :class:`~ldpkit.Stats` per window. Stats are
sums over users, so per-window Stats merge key by key: :class:`WindowedStats` is the
order-aware sufficient statistic of a stream of reports, and it merges like any Stats
(associative, commutative, the empty one is neutral), so several collectors, the HTTP
service or Dask partitions can each hold a part and combine them.

Answers (:func:`window_means`, :func:`window_sums`, :func:`window_frequencies`) apply the
spec's own unbiased ``estimate`` to every window and carry its analytical standard error
(the worst case over the data for the mean mechanisms, the oracle's variance at the estimate
for frequency oracles; see each spec's ``variance``). Windows are independent groups of
users, so their estimates are independent and a sum over windows has the sum of variances.

Privacy over time is *not* handled here: a user who reports in k windows spends k times
epsilon (sequential composition) unless the device memoizes its reports for unchanged values
or spends a budget per period; see :class:`ldpkit.accountant.PrivacyAccountant` and
``docs/howto-telemetry.md``.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, NamedTuple

import numpy as np

from .._validation import MAX_ENTRIES, MAX_MAGNITUDE, check_integer, check_not_masked, check_real
from ..spec import Mechanism, Reports, Stats

__all__ = [
    "WindowedStats",
    "WindowEstimates",
    "window_keys",
    "count_windows",
    "aggregate_windows",
    "check_window_keys",
    "window_means",
    "window_sums",
    "window_frequencies",
]

_UNITS = {"D": "day", "h": "hour", "m": "minute", "W": "week", "M": "month", "Y": "year"}


def _key(value: Any) -> Hashable:
    """Return a window key as a plain, JSON-able, sortable Python value (int or str)."""
    if isinstance(value, (np.integer, int)) and not isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (str, np.str_)):
        return str(value)
    raise TypeError(f"window keys must be integers or strings, got {type(value).__name__}")


def window_keys(times: Any, unit: str = "D") -> np.ndarray:
    """Window of every report from its timestamp: the calendar ``unit`` it falls in.

    Parameters
    ----------
    times : array_like of datetime64 (or ISO strings)
        One timestamp per report.
    unit : {"D", "h", "m", "W", "M", "Y"}
        Day (default), hour, minute, week, month or year.

    Returns
    -------
    ndarray of str
        ISO keys (``"2026-11-23"`` for days, ``"2026-11-23T14"`` for hours), which sort in
        time order.

    Examples
    --------
    >>> window_keys(["2026-11-23T08:15", "2026-11-23T23:59", "2026-11-24T00:01"]).tolist()
    ['2026-11-23', '2026-11-23', '2026-11-24']
    """
    if not isinstance(unit, str) or unit not in _UNITS:
        raise ValueError(f"unit must be one of {sorted(_UNITS)}, got {unit!r}")
    check_not_masked(times, "times")
    if times is None:
        raise TypeError("times must be datetime64 or ISO date strings, got None")
    t = np.asarray(times)
    if t.dtype.kind in "USO":
        try:
            t = t.astype("datetime64[s]")
        except ValueError:
            bad = t.ravel()[:1].tolist()
            raise ValueError(
                f"times must be datetime64 or ISO date strings, got {bad!r:.60}"
            ) from None
    if t.dtype.kind != "M":
        raise TypeError(f"times must be datetime64 or ISO date strings, got dtype {t.dtype}")
    missing = np.isnat(t)
    if missing.any():  # NaT (from None, "NaT" or "") has no window: it would key as "NaT"
        raise ValueError(
            f"times must be datetime64 or ISO date strings (no NaT, None or empty string), "
            f"got {int(missing.sum())} missing timestamp(s)"
        )
    return np.datetime_as_string(t.astype(f"datetime64[{unit}]"))


def count_windows(n: int, size: int, *, start: int = 0) -> np.ndarray:
    """Window index of ``n`` consecutive reports in windows of ``size`` reports.

    ``start`` is the position of the first of them in the stream (so batches can be keyed
    one after another): report ``start + i`` falls in window ``(start + i) // size``.

    Examples
    --------
    >>> count_windows(5, 2, start=3).tolist()
    [1, 2, 2, 3, 3]
    """
    n = check_integer(n, "n", low=0, high=MAX_ENTRIES)
    size = check_integer(size, "size", low=1, high=2**62)
    start = check_integer(start, "start", low=0, high=2**62)
    return (np.arange(start, start + n, dtype=np.int64)) // size


class WindowedStats:
    """Mergeable, order-aware statistics: one :class:`~ldpkit.Stats` of one spec per window.

    Parameters
    ----------
    spec : Mechanism
        The mechanism every report was made with.
    windows : mapping of window key -> Stats, optional
        Window keys are integers (window indices) or strings (e.g. ISO days).

    Notes
    -----
    ``a.merge(b)`` adds the Stats of the windows both hold and keeps the others, so
    merging is associative and commutative with the empty WindowedStats as neutral element,
    whatever windows each part saw.
    """

    __slots__ = ("_spec", "_windows")

    def __init__(self, spec: Mechanism, windows: Mapping[Any, Stats] | None = None) -> None:
        if not isinstance(spec, Mechanism):
            raise TypeError(f"spec must be an ldpkit mechanism spec, got {type(spec).__name__}")
        self._spec = spec
        self._windows: dict[Hashable, Stats] = {}
        if windows is not None and not isinstance(windows, Mapping):
            raise TypeError(f"windows must be a mapping key -> Stats, got {type(windows).__name__}")
        for key, stats in (windows or {}).items():
            self._windows[_key(key)] = spec.check_stats(stats)
        if len({type(k) for k in self._windows}) > 1:
            raise TypeError("window keys must be all integers or all strings")

    @property
    def spec(self) -> Mechanism:
        """The spec every window's Stats were made under."""
        return self._spec

    @property
    def windows(self) -> list[Hashable]:
        """The window keys, sorted (time order for integer indices and ISO strings)."""
        return sorted(self._windows)  # type: ignore[type-var]

    @property
    def n(self) -> int:
        """Reports over all windows."""
        return sum(s.n for s in self._windows.values())

    def __len__(self) -> int:
        """Return the number of windows."""
        return len(self._windows)

    def __contains__(self, key: object) -> bool:
        """Tell whether window ``key`` has Stats."""
        return key in self._windows

    def __getitem__(self, key: Any) -> Stats:
        """Return the Stats of window ``key``; KeyError naming it otherwise."""
        try:
            return self._windows[_key(key)]
        except KeyError:
            raise KeyError(f"no reports in window {key!r}") from None

    def items(self) -> list[tuple[Hashable, Stats]]:
        """``(key, Stats)`` in window order."""
        return [(k, self._windows[k]) for k in self.windows]

    def total(self) -> Stats:
        """All windows merged into one Stats."""
        return self._spec.empty_stats().merge(*self._windows.values())

    def merge(self, *others: WindowedStats) -> WindowedStats:
        """Add the Stats window by window (refuses another spec)."""
        out = dict(self._windows)
        for other in others:
            if not isinstance(other, WindowedStats):
                raise TypeError(f"stats must be WindowedStats, got {type(other).__name__}")
            if other.spec != self._spec:
                raise ValueError(
                    f"stats must come from {self._spec!r} (fingerprint {self._spec.fingerprint}), "
                    f"got {other.spec!r}"
                )
            for key, stats in other._windows.items():
                out[key] = out[key].merge(stats) if key in out else stats
        return WindowedStats(self._spec, out)

    __add__ = merge

    def __eq__(self, other: object) -> bool:
        """Compare spec and windows."""
        if not isinstance(other, WindowedStats):
            return NotImplemented
        return self._spec == other._spec and self._windows == other._windows

    __hash__ = None  # type: ignore[assignment]

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe (exact): the spec and ``[key, stats.to_dict()]`` per window."""
        return {
            "format": "ldpkit.windowed_stats/1",
            "mechanism": self._spec.to_dict(),
            "windows": [[k, s.to_dict()] for k, s in self.items()],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WindowedStats:
        """Inverse of :meth:`to_dict`."""
        from ..spec import spec_from_dict

        spec = spec_from_dict(data["mechanism"])
        return cls(spec, {k: Stats.from_dict(s) for k, s in data["windows"]})

    def __getstate__(self) -> dict[str, Any]:
        """Return the state to pickle."""
        return {"spec": self._spec, "windows": self._windows}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore from a pickled state."""
        self._spec = state["spec"]
        self._windows = dict(state["windows"])

    def __repr__(self) -> str:
        """Return a one-line summary."""
        return f"WindowedStats({self._spec!r}, windows={len(self)}, n={self.n})"


def check_window_keys(windows: Any, n: int) -> np.ndarray:
    """``windows`` as a 1-D array of ``n`` integer or string keys (raises otherwise)."""
    check_not_masked(windows, "windows")
    w = np.asarray(windows)
    if w.ndim != 1 or w.size != n:
        raise ValueError(f"windows must hold one key per report ({n}), got shape {w.shape}")
    if w.dtype.kind not in "iuU":
        raise TypeError(f"windows must be integer or string keys, got dtype {w.dtype}")
    return w


def aggregate_windows(spec: Mechanism, reports: Reports, windows: Any) -> WindowedStats:
    """Aggregate reports into one Stats per window.

    Parameters
    ----------
    spec : Mechanism
        The spec the reports were made with.
    reports : Reports
        A batch of reports.
    windows : array_like of int or str
        The window of every report (same length): day or hour keys from
        :func:`window_keys`, indices from :func:`count_windows`, or your own labels.

    Returns
    -------
    WindowedStats
        Merge it with the statistics of other batches or collectors.
    """
    if not isinstance(spec, Mechanism):
        raise TypeError(f"spec must be an ldpkit mechanism spec, got {type(spec).__name__}")
    reports = spec.check_reports(reports)
    w = check_window_keys(windows, len(reports))
    keys, inverse = np.unique(w, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(keys.size + 1))
    out: dict[Hashable, Stats] = {}
    for i, key in enumerate(keys):  # one aggregate per window, vectorized over its users
        out[_key(key.item() if w.dtype.kind in "iu" else str(key))] = spec.aggregate(
            reports[order[bounds[i] : bounds[i + 1]]]
        )
    return WindowedStats(spec, out)


class WindowEstimates(NamedTuple):
    """Per-window answers.

    ``estimate[k]`` and ``std_error[k]`` for window ``windows[k]`` from ``n[k]`` reports
    (rows: windows; for frequencies a column per item).
    """

    windows: list[Hashable]
    n: np.ndarray
    estimate: np.ndarray
    std_error: np.ndarray

    def to_frame(self) -> Any:
        """Return a pandas DataFrame with one row per window (pandas is imported here)."""
        import pandas as pd

        est = np.asarray(self.estimate)
        if est.ndim == 1:
            data = {"n": self.n, "estimate": est, "std_error": self.std_error}
        else:
            data = {"n": self.n}
            for j in range(est.shape[1]):
                data[f"estimate_{j}"] = est[:, j]
                data[f"std_error_{j}"] = np.asarray(self.std_error)[:, j]
        return pd.DataFrame(data, index=pd.Index(self.windows, name="window"))


def _estimates(wstats: WindowedStats) -> list[tuple[Hashable, int, Any]]:
    if not isinstance(wstats, WindowedStats):
        raise TypeError(f"wstats must be WindowedStats, got {type(wstats).__name__}")
    return [(k, s.n, wstats.spec.estimate(s)) for k, s in wstats.items() if s.n > 0]


def window_means(wstats: WindowedStats) -> WindowEstimates:
    """Unbiased mean of every window with its standard error (mean mechanisms: PM, HM, SR).

    The standard error is the spec's worst-case ``sqrt(variance(n))`` (data-independent,
    so never an under-statement).
    """
    rows = _estimates(wstats)
    if rows and not hasattr(rows[0][2], "mean"):
        raise TypeError(
            f"stats must come from a mean mechanism (PM, HM, SR), got {wstats.spec.name}"
        )
    return WindowEstimates(
        [k for k, _, _ in rows],
        np.array([n for _, n, _ in rows], dtype=np.int64),
        np.array([e.mean for _, _, e in rows], dtype=np.float64),
        np.array([e.std_error for _, _, e in rows], dtype=np.float64),
    )


def _population(value: Any) -> float:
    # bounded: it multiplies a mean of up to MAX_MAGNITUDE (no overflow to inf)
    return check_real(value, "population", low=0.0, high=MAX_MAGNITUDE)


def window_sums(wstats: WindowedStats, population: Any = None) -> WindowEstimates:
    """Unbiased sum of the values of every window with its standard error.

    Parameters
    ----------
    wstats : WindowedStats
        Of a mean mechanism.
    population : float or mapping of window -> float, optional
        The number of users the sum is over. Default: the users who reported
        (``n * mean``, standard error ``n * se``). With a known population N that reported
        in full this is the same; when only a public fraction reported, N scales up.
    """
    means = window_means(wstats)
    if population is None:
        scale = means.n.astype(np.float64)
    elif isinstance(population, Mapping):
        scale = np.array([_population(population[k]) for k in means.windows])
    else:
        scale = np.full(means.n.size, _population(population))
    return WindowEstimates(means.windows, means.n, scale * means.estimate, scale * means.std_error)


def window_frequencies(wstats: WindowedStats, *, counts: bool = False) -> WindowEstimates:
    """Estimate the frequency of every item in every window, with standard errors.

    Unbiased; for frequency oracles: GRR, OLH, OUE, ....

    ``counts=True`` gives estimated numbers of users (``n f``, standard error ``n se``),
    e.g. daily active users from a yes/no question.
    """
    rows = _estimates(wstats)
    if rows and not hasattr(rows[0][2], "frequencies"):
        raise TypeError(f"stats must come from a frequency oracle, got {wstats.spec.name}")
    n = np.array([k for _, k, _ in rows], dtype=np.int64)
    d = rows[0][2].frequencies.size if rows else 0
    est = np.array([e.frequencies for _, _, e in rows], dtype=np.float64).reshape(len(rows), d)
    se = np.array([e.std_error for _, _, e in rows], dtype=np.float64).reshape(len(rows), d)
    if counts:
        est, se = est * n[:, None], se * n[:, None]
    return WindowEstimates([k for k, _, _ in rows], n, est, se)
