"""Building blocks of the WAV25 reproduction (``ldpkit reproduce wav25``).

Everything here is picklable (module-level dataclasses), so grids run in worker processes
under any start method.

- :class:`Bench`: a data set on [0, 1] with the bucket count its histogram competitors use;
  :func:`bench_truth` gives the :class:`Truth` metrics compare to.
- :class:`WaveletMethod` (WAV25's Haar wavelet at the paper's J, at an offset from it, or at
  a fixed J) and :class:`CompetitorMethod` (any other distribution mechanism, run end to end).
- :class:`GridMetric`: WAV25 section 6.1's metrics. W1 and KS compare the estimated CDF
  with the empirical CDF of the raw values at the M = 256 grid points i / 256 (i = 1..256):
  W1 = mean absolute difference, KS = maximum (:func:`grid_errors`); range queries are the
  mean absolute error of ``F^(b) - F^(a)`` against the exact fraction of values in [a, b],
  b = a + alpha, a uniform in [0, 1 - alpha] (eq. 93).
- Reading results: :func:`verdict` / :func:`verdict_table` (where a method beats, ties or
  loses to the best competitor), :func:`ratio_table`, :func:`j_sweep_table` (the W1-vs-J
  check of WAV25 section 6.3), :func:`save_metric_figures`, :func:`plot_w1_vs_j`.

CDF convention (documented in the report): the truth at a grid point x < 1 is the fraction
of values *below* x, ``P[X < x]``, and 1 at x = 1. Every estimate here is a histogram whose
bucket ``[x, x + w)`` holds a value equal to x (the encoders put a value on a bucket edge
into the bucket to its right), so its CDF at x estimates ``P[X < x]``. With ``P[X <= x]``
a point mass sitting exactly on a grid point (weeks worked 26 = 0.5 of its range) would
count its whole mass as KS error for every method alike, and the mass at the top of the
domain (52 weeks: 18.5 % of the mothers) would be an error at x = 1 under the other
convention. Range queries have a continuous uniform start, so which end is closed does not
matter (probability 0 of hitting a point mass).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..experiments.grid import summarize
from ..experiments.plots import plot_error_vs_epsilon
from ..numeric import Distribution, HaarWavelet
from ..numeric.wavelet import MAX_LEVEL, default_max_level

__all__ = [
    "GRID_POINTS",
    "cdf_grid",
    "empirical_cdf",
    "grid_errors",
    "Bench",
    "Truth",
    "bench_truth",
    "binning_oracle",
    "WaveletMethod",
    "CompetitorMethod",
    "GridMetric",
    "verdict",
    "verdict_table",
    "ratio_table",
    "wasserstein_bound",
    "theory_level",
    "j_sweep_table",
    "j_sweep_markdown",
    "save_metric_figures",
    "plot_w1_vs_j",
]

#: M, the number of grid points of WAV25's W1 and KS (section 6.1).
GRID_POINTS = 256


# ---- metrics on the CDF grid -----------------------------------------------------------------
def cdf_grid(points: int = GRID_POINTS) -> np.ndarray:
    """The grid ``i / points`` for i = 1..points (WAV25 section 6.1; x = 0 adds nothing)."""
    return np.arange(1, points + 1, dtype=np.float64) / points


def empirical_cdf(sorted_values: np.ndarray, x: Any, high: float = 1.0) -> np.ndarray:
    """``P[X < x]`` of the values (sorted ascending) for x < high, and 1 for x >= high.

    Examples
    --------
    >>> empirical_cdf(np.array([0.0, 0.5, 0.5, 1.0]), [0.25, 0.5, 0.75, 1.0]).tolist()
    [0.25, 0.25, 0.75, 1.0]
    """
    xs = np.asarray(x, dtype=np.float64)
    below = np.searchsorted(sorted_values, xs, side="left") / max(sorted_values.size, 1)
    return np.where(xs >= high, 1.0, below)


def grid_errors(
    estimate: Distribution, sorted_values: np.ndarray, points: int = GRID_POINTS
) -> tuple[float, float]:
    """WAV25's (W1, KS) of ``estimate`` (on [0, 1]) against the raw values (sorted).

    Both compare ``estimate.cdf`` with :func:`empirical_cdf` at :func:`cdf_grid` points:
    W1 is the mean absolute difference (the integral of ``|F^ - F|`` by the right Riemann
    sum), KS the largest.

    Examples
    --------
    >>> values = np.sort(np.random.default_rng(0).random(10_000))
    >>> w1, ks = grid_errors(Distribution.uniform(buckets=64), values)
    >>> bool(w1 < ks < 0.02)
    True
    """
    grid = cdf_grid(points)
    gap = np.abs(np.asarray(estimate.cdf(grid)) - empirical_cdf(sorted_values, grid))
    return float(gap.mean()), float(gap.max())


# ---- data ------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False)
class Bench:
    """One data set of the comparison: values on [0, 1] and how to treat it.

    Attributes
    ----------
    values : ndarray
        One value per user, in [0, 1].
    buckets : int
        Histogram resolution of the competitors with a free resolution (SW, HH; SW20's
        256 for Beta(5, 2) and 1024 for real data). The wavelet returns its own 2^(J+1).
    smooth : bool
        Whether the data set counts as smooth (True) or spiky (False) in the verdict.
    note : str
        How the data were prepared.
    """

    values: np.ndarray
    buckets: int
    smooth: bool
    note: str = ""

    def __post_init__(self) -> None:
        v = np.array(self.values, dtype=np.float64)
        if v.ndim != 1 or v.size == 0 or not np.all((v >= 0.0) & (v <= 1.0)):
            raise ValueError("values must be a non-empty 1-D array of numbers in [0, 1]")
        v.flags.writeable = False
        object.__setattr__(self, "values", v)
        if int(self.buckets) < 2:
            raise ValueError(f"buckets must be an integer >= 2, got {self.buckets!r}")

    @property
    def n(self) -> int:
        return int(self.values.size)

    @property
    def rule_level(self) -> int:
        """WAV25's ``J = ceil(log2(n) / 2)`` for this data set's n."""
        return default_max_level(self.n)


@dataclasses.dataclass(frozen=True, eq=False)
class Truth:
    """The sorted raw values and their :func:`empirical_cdf` on the grid."""

    sorted_values: np.ndarray
    grid_cdf: np.ndarray

    def range_fraction(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Exact fraction of values in ``[a, b]`` (WAV25 eq. 93's ground truth)."""
        s = self.sorted_values
        return (np.searchsorted(s, b, side="right") - np.searchsorted(s, a, side="left")) / s.size


def bench_truth(bench: Bench) -> Truth:
    """The :class:`Truth` of a :class:`Bench` (``Grid(truth=bench_truth)``)."""
    s = np.sort(bench.values)
    return Truth(sorted_values=s, grid_cdf=empirical_cdf(s, cdf_grid()))


# ---- methods ---------------------------------------------------------------------------------
def binning_oracle(epsilon: float, bins: int) -> str:
    """WAV25 section 6.1's oracle for binning: kRR (GRR) if ``d < 3 e^eps + 2``, else OUE.

    Examples
    --------
    >>> binning_oracle(1.0, 8), binning_oracle(1.0, 16), binning_oracle(4.0, 64)
    ('GRR', 'OUE', 'GRR')
    """
    return "GRR" if epsilon > 50.0 or bins < 3.0 * math.exp(epsilon) + 2.0 else "OUE"


@dataclasses.dataclass(frozen=True, eq=False)
class WaveletMethod:
    """WAV25's Haar wavelet as a grid method.

    ``max_level`` fixes J; otherwise J is the paper's ``ceil(log2(n) / 2)`` plus
    ``level_offset`` (clamped to [0, 20]). Users draw their level independently
    (``assignment="random"``, what separate clients do).
    """

    level_offset: int = 0
    max_level: int | None = None

    def level(self, n: int) -> int:
        if self.max_level is not None:
            return self.max_level
        return min(MAX_LEVEL, max(0, default_max_level(n) + self.level_offset))

    def __call__(self, data: Bench, epsilon: float, rng: np.random.Generator) -> Distribution:
        spec = HaarWavelet(epsilon=epsilon, max_level=self.level(data.n))
        return spec.estimate(spec.aggregate(spec.randomize(data.values, rng=rng)))


@dataclasses.dataclass(frozen=True, eq=False)
class CompetitorMethod:
    """``mechanism(epsilon=, low=0, high=1, **params)`` run end to end on a :class:`Bench`.

    ``bench_buckets`` passes ``buckets=bench.buckets``; ``wav25_oracle`` (binning) passes
    ``oracle=binning_oracle(epsilon, params["buckets"])``. ``estimate_params`` go to
    ``spec.estimate``.
    """

    mechanism: type
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    estimate_params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    bench_buckets: bool = False
    wav25_oracle: bool = False

    def spec(self, data: Bench, epsilon: float) -> Any:
        kwargs: dict[str, Any] = {"epsilon": epsilon, "low": 0.0, "high": 1.0, **self.params}
        if self.bench_buckets:
            kwargs["buckets"] = data.buckets
        if self.wav25_oracle:
            kwargs["oracle"] = binning_oracle(epsilon, int(self.params["buckets"]))
        return self.mechanism(**kwargs)

    def __call__(self, data: Bench, epsilon: float, rng: np.random.Generator) -> Distribution:
        spec = self.spec(data, epsilon)
        stats = spec.aggregate(spec.randomize(data.values, rng=rng))
        return spec.estimate(stats, **self.estimate_params)  # type: ignore[no-any-return]


# ---- metrics ---------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class GridMetric:
    """One WAV25 metric, ``metric(result, truth) -> float`` (see the module docstring).

    Parameters
    ----------
    kind : {"w1", "ks", "range"}
    alpha : float
        Range width (``kind="range"``).
    n_queries : int
        Number of random range queries.
    seed : int
        Seed of the query starts: every cell is scored on the same queries.
    """

    kind: str
    alpha: float = 0.2
    n_queries: int = 1000
    seed: int = 0

    def __post_init__(self) -> None:
        if self.kind not in ("w1", "ks", "range"):
            raise ValueError(f"kind must be one of 'w1', 'ks', 'range', got {self.kind!r}")
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must be a number in (0, 1), got {self.alpha!r}")

    def queries(self) -> tuple[np.ndarray, np.ndarray]:
        """The query ranges ``(a, a + alpha)``; a from a stream keyed by seed and alpha."""
        key = round(self.alpha * 1e6)
        gen = np.random.default_rng(np.random.SeedSequence(self.seed, spawn_key=(25, key)))
        a = gen.random(self.n_queries) * (1.0 - self.alpha)
        return a, np.minimum(a + self.alpha, 1.0)

    def __call__(self, result: Distribution, truth: Truth) -> float:
        if not isinstance(result, Distribution):
            raise TypeError(f"result must be a Distribution, got {type(result).__name__}")
        if self.kind == "range":
            a, b = self.queries()
            return float(np.mean(np.abs(result.range(a, b) - truth.range_fraction(a, b))))
        gap = np.abs(np.asarray(result.cdf(cdf_grid())) - truth.grid_cdf)
        return float(gap.mean() if self.kind == "w1" else gap.max())


# ---- reading the results ---------------------------------------------------------------------
def verdict(
    records: pd.DataFrame, method: str, competitors: Sequence[str], *, z: float = 2.0
) -> pd.DataFrame:
    """``method`` against the best of ``competitors``, per (data set, metric, epsilon).

    The best competitor is the one with the lowest mean error. Outcome ``"win"`` if
    ``method``'s mean is lower by more than ``z`` combined standard errors
    ``sqrt(sem_a^2 + sem_b^2)``, ``"loss"`` if higher by more than that, else ``"tie"``.
    ``ratio`` = best competitor's error / method's error (> 1: the method is better).
    """
    summary = summarize(records)
    rows = []
    for (dataset, metric, eps), group in summary.groupby(
        ["dataset", "metric", "epsilon"], sort=False
    ):
        mine = group[group["method"] == method]
        others = group[group["method"].isin(list(competitors))]
        if mine.empty or others.empty:
            continue
        err, sem = float(mine["mean"].iloc[0]), float(np.nan_to_num(mine["sem"].iloc[0]))
        top = others.loc[others["mean"].idxmin()]
        best, best_sem = float(top["mean"]), float(np.nan_to_num(top["sem"]))
        margin = z * math.hypot(sem, best_sem)
        outcome = "win" if err < best - margin else ("loss" if err > best + margin else "tie")
        ratio = best / err if err > 0 else math.inf
        rows.append((dataset, metric, float(eps), outcome, err, str(top["method"]), best, ratio))
    return pd.DataFrame(
        rows,
        columns=["dataset", "metric", "epsilon", "outcome", "error", "best", "best_error", "ratio"],
    )


def verdict_table(cells: pd.DataFrame, method: str) -> str:
    """Markdown: per data set and metric, the epsilons where ``method`` wins, ties, loses."""
    lines = [
        f"| data set | metric | {method} wins at ε (×) | tie at ε | loses at ε (to, ×) |",
        "|---|---|---|---|---|",
    ]
    for (dataset, metric), g in cells.groupby(["dataset", "metric"], sort=False):
        wins = g[g["outcome"] == "win"]
        won = ", ".join(f"{r.epsilon:g} ({r.ratio:.2f})" for r in wins.itertuples()) or "-"
        tied = ", ".join(f"{e:g}" for e in g[g["outcome"] == "tie"]["epsilon"]) or "-"
        losses = g[g["outcome"] == "loss"]
        lost = (
            ", ".join(f"{r.epsilon:g} ({r.best}, {1 / r.ratio:.2f})" for r in losses.itertuples())
            or "-"
        )
        lines.append(f"| {dataset} | {metric} | {won} | {tied} | {lost} |")
    counts = cells["outcome"].value_counts()
    lines += [
        "",
        f"{method}: wins {counts.get('win', 0)}, ties {counts.get('tie', 0)}, loses "
        f"{counts.get('loss', 0)} of {len(cells)} (data set, metric, ε) cells. × = how many "
        "times larger the loser's mean error is.",
    ]
    return "\n".join(lines)


def ratio_table(records: pd.DataFrame, method: str, other: str, metrics: Sequence[str]) -> str:
    """Markdown: ``other``'s mean error / ``method``'s, per data set (rows) and metric x
    epsilon (columns); > 1 where ``method`` is better."""
    summary = summarize(records)
    mean = summary.set_index(["dataset", "metric", "epsilon", "method"])["mean"]
    epsilons = sorted(set(summary["epsilon"]))
    head = [f"{m} ε={e:g}" for m in metrics for e in epsilons]
    lines = ["| data set | " + " | ".join(head) + " |", "|---" * (len(head) + 1) + "|"]
    for dataset in dict.fromkeys(summary["dataset"]):
        cells = []
        for m in metrics:
            for e in epsilons:
                try:
                    cells.append(
                        f"{mean[(dataset, m, e, other)] / mean[(dataset, m, e, method)]:.2f}"
                    )
                except KeyError:
                    cells.append("")
        lines.append(f"| {dataset} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def wasserstein_bound(epsilon: float, n: int, max_level: int) -> float:
    """WAV25's bound on E[W1] without the O(): Lemma 5's bias ``2^-(J+1)`` plus Lemma 6's
    ``sqrt(sum_j 2^-(2j+2) V_j / n_j)`` with the allocation of eq. 83 (``n_j = w_j n``).

    This is what section 6.3 minimizes for its "theoretical" J (Figure 4, green). The bias
    term is the worst case over all distributions, so on smooth data the bound's J is too
    fine; the variance term is exact up to the 2q correction (see HaarWavelet).

    Examples
    --------
    >>> [theory_level(1.0, n) for n in (10_000, 100_000, 1_000_000)]
    [6, 7, 9]
    """
    spec = HaarWavelet(epsilon=epsilon, max_level=max_level)
    j = np.arange(max_level + 1)
    variance = np.sum(2.0 ** (-2.0 * j - 2.0) * spec.level_variances / (n * spec.allocation))
    return float(2.0 ** -(max_level + 1) + math.sqrt(variance))


@functools.lru_cache(maxsize=1024)
def theory_level(
    epsilon: float, n: int, levels: tuple[int, ...] = tuple(range(MAX_LEVEL + 1))
) -> int:
    """The J among ``levels`` minimizing :func:`wasserstein_bound` (smallest on ties)."""
    bounds = [wasserstein_bound(epsilon, n, j) for j in levels]
    return int(levels[int(np.argmin(bounds))])


def _level_of(method: str) -> int:
    return int(method.split("=", 1)[1])


def j_sweep_table(
    records: pd.DataFrame, sizes: Mapping[str, int], metric: str = "W1"
) -> pd.DataFrame:
    """Per (data set, epsilon) of a J sweep (methods named ``"J=<j>"``; ``sizes`` maps each
    data set to its n): the rule's J ``ceil(log2(n)/2)``, the J minimizing
    :func:`wasserstein_bound` (``theory_J``), the best measured J, their mean errors, the
    error at the rule's J - 2, and the ratios ``rule_over_best`` and ``rule_over_minus2``
    (> 1: the rule's J is worse)."""
    summary = summarize(records[records["metric"] == metric])
    summary = summary.assign(level=[_level_of(m) for m in summary["method"]])
    rows = []
    for (dataset, eps), g in summary.groupby(["dataset", "epsilon"], sort=False):
        err = g.set_index("level")["mean"]
        n = int(sizes[dataset])
        rule = default_max_level(n)
        theory = theory_level(float(eps), n)
        best = int(err.idxmin())
        rule_err = float(err.get(rule, math.nan))
        minus2 = float(err.get(rule - 2, math.nan))
        rows.append(
            {
                "dataset": dataset,
                "n": n,
                "epsilon": float(eps),
                "rule_J": rule,
                "rule_error": rule_err,
                "theory_J": theory,
                "theory_error": float(err.get(theory, math.nan)),
                "best_J": best,
                "best_error": float(err[best]),
                "minus2_error": minus2,
                "rule_over_best": rule_err / float(err[best]) if err[best] > 0 else math.nan,
                "rule_over_minus2": rule_err / minus2 if minus2 > 0 else math.nan,
            }
        )
    return pd.DataFrame(rows)


def j_sweep_markdown(table: pd.DataFrame, metric: str = "W1") -> str:
    """The :func:`j_sweep_table` as Markdown."""
    lines = [
        f"| data set | ε | rule J | {metric} at rule J | bound's J | {metric} at bound's J | best J | "
        f"{metric} at best J | {metric} at rule J - 2 | rule / best | rule / (J-2) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table.itertuples(index=False):
        lines.append(
            f"| {r.dataset} | {r.epsilon:g} | {r.rule_J} | {r.rule_error:.4g} | {r.theory_J} | "
            f"{r.theory_error:.4g} | {r.best_J} | {r.best_error:.4g} | {r.minus2_error:.4g} | "
            f"{r.rule_over_best:.2f} | {r.rule_over_minus2:.2f} |"
        )
    return "\n".join(lines)


# tab10 plus two dark colours: each method keeps its colour in every figure
_COLOURS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
    "#000000",
    "#6b8e23",
)


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-." else "-" for ch in text.lower()).strip("-")


def save_metric_figures(
    records: pd.DataFrame, outdir: Path, stem: str, titles: Mapping[str, str] | None = None
) -> dict[str, Path]:
    """One PNG per metric (``<stem>-<metric>.png``): a panel per data set, a line per
    method, log error vs epsilon with standard-error bars, legend on the right."""
    from cycler import cycler
    from matplotlib import rc_context

    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    methods = list(dict.fromkeys(records["method"]))
    colours = [_COLOURS[i % len(_COLOURS)] for i in range(len(methods))]
    paths: dict[str, Path] = {}
    for metric in dict.fromkeys(records["metric"]):
        sub = records[records["metric"] == metric]
        with rc_context({"axes.prop_cycle": cycler(color=colours)}):
            fig = plot_error_vs_epsilon(
                sub, metric=metric, title=(titles or {}).get(metric, metric)
            )
        first = fig.get_axes()[0]
        handles, labels = first.get_legend_handles_labels()
        legend = first.get_legend()
        if legend is not None:
            legend.remove()
        w, h = fig.get_size_inches()
        extra = 1.5
        fig.set_size_inches(w + extra, h)
        fig.tight_layout(rect=(0.0, 0.0, w / (w + extra), 1.0))
        fig.legend(handles, labels, loc="center right", fontsize=8, frameon=False)
        path = outdir / f"{stem}-{_slug(metric)}.png"
        fig.savefig(path, dpi=120)
        paths[metric] = path
    return paths


def plot_w1_vs_j(
    records: pd.DataFrame,
    sizes: Mapping[str, int],
    path: Path,
    *,
    metric: str = "W1",
    title: str | None = None,
) -> Path:
    """WAV25 Figure 4's check: error vs J, a panel per data set, a line per epsilon (log
    scale, standard-error bars); a dashed vertical line at the rule's J, a star on each
    line's best J, a diamond on each line's :func:`theory_level`."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    summary = summarize(records[records["metric"] == metric])
    summary = summary.assign(level=[_level_of(m) for m in summary["method"]])
    datasets = list(dict.fromkeys(summary["dataset"]))
    cols = min(4, len(datasets))
    rows = math.ceil(len(datasets) / cols)
    fig = Figure(figsize=(3.8 * cols, 3.2 * rows + (0.4 if title else 0.0)))
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols, squeeze=False)
    for i, dataset in enumerate(datasets):
        ax = axes[i // cols][i % cols]
        sub = summary[summary["dataset"] == dataset]
        for k, eps in enumerate(sorted(set(sub["epsilon"]))):
            line = sub[sub["epsilon"] == eps].sort_values("level")
            x = line["level"].to_numpy()
            y = line["mean"].to_numpy(dtype=np.float64)
            err = np.nan_to_num(line["sem"].to_numpy(dtype=np.float64))
            colour = _COLOURS[k % len(_COLOURS)]
            ax.errorbar(
                x,
                y,
                yerr=np.vstack([np.minimum(err, 0.99 * y), err]),
                marker="o",
                markersize=3,
                capsize=2,
                linewidth=1.1,
                color=colour,
                label=f"ε={eps:g}",
            )
            best = int(np.argmin(y))
            ax.plot(
                [x[best]],
                [y[best]],
                marker="*",
                markersize=12,
                color=colour,
                markeredgecolor="black",
                linestyle="none",
            )
            theory = np.flatnonzero(x == theory_level(float(eps), int(sizes[dataset])))
            if theory.size:
                ax.plot(
                    x[theory],
                    y[theory],
                    marker="D",
                    markersize=6,
                    markerfacecolor="none",
                    markeredgecolor=colour,
                    markeredgewidth=1.5,
                    linestyle="none",
                )
        rule = default_max_level(int(sizes[dataset]))
        ax.axvline(rule, color="grey", linestyle="--", linewidth=1.0, label=f"rule J={rule}")
        ax.set_yscale("log")
        ax.set_xlabel("J")
        ax.set_ylabel(metric)
        ax.set_title(dataset, fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, frameon=False)
    for j in range(len(datasets), rows * cols):
        axes[j // cols][j % cols].set_visible(False)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return path
