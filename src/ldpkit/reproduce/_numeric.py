"""Building blocks for reproducing experiments on numerical distributions (SW20, WAV25).

Grid pieces (all picklable, so they run in worker processes under any start method):

- :class:`Bench`: a data set mapped onto [0, 1] plus the number of histogram buckets the
  paper uses for it; :func:`bench_truth` turns it into the :class:`Truth` metrics compare to.
- :class:`DistributionMethod` (randomize, aggregate, estimate a
  :class:`~ldpkit.numeric.Distribution`) and :class:`MomentMethod` (SR / PM / HM: a mean from
  every user and, in a separate simulated collection, a variance by SW20's two-round scheme).
- :class:`DistributionMetric`: W1, KS, range queries, quantiles, mean and variance as SW20
  section 3 defines them; NaN where a method does not answer the query (SR has no CDF).

Reading results: :func:`verdict` (where a method is the best, tied with the best or beaten,
per data set, metric and epsilon) and :func:`save_metric_figures` (one PNG per metric).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import metrics as _metrics
from ..datasets import Dataset
from ..experiments.grid import summarize
from ..experiments.plots import plot_error_vs_epsilon
from ..numeric import Distribution, estimate_variance

__all__ = [
    "Bench",
    "Truth",
    "bench_truth",
    "Moments",
    "DistributionMethod",
    "MomentMethod",
    "DistributionMetric",
    "METRIC_KINDS",
    "verdict",
    "verdict_table",
    "save_metric_figures",
]


# ---- data ------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False)
class Bench:
    """One data set of an experiment: values on [0, 1] and the estimate's bucket count.

    Attributes
    ----------
    data : Dataset
        Numerical, domain (0, 1) (e.g. ``Dataset.normalized()``).
    buckets : int
        Number d of histogram buckets every method estimates (and the truth is binned on).
    note : str
        How the data were prepared (shown in the report).
    """

    data: Dataset
    buckets: int
    note: str = ""

    def __post_init__(self) -> None:
        if self.data.kind != "numerical" or self.data.domain != (0.0, 1.0):
            raise ValueError(f"data must be numerical on the domain (0, 1), got {self.data!r}")
        if self.buckets < 2:
            raise ValueError(f"buckets must be an integer >= 2, got {self.buckets!r}")

    @property
    def values(self) -> np.ndarray:
        return self.data.values

    @property
    def n(self) -> int:
        return self.data.n


@dataclasses.dataclass(frozen=True, eq=False)
class Truth:
    """What the metrics compare against: the true histogram on the bench's d buckets (SW20's
    convention for W1, KS, range queries and quantiles) and the exact sample mean and
    population variance (ddof = 0) of the raw values."""

    histogram: Distribution
    mean: float
    variance: float


def bench_truth(bench: Bench) -> Truth:
    """The :class:`Truth` of a :class:`Bench` (used as ``Grid(truth=...)``)."""
    v = np.asarray(bench.values, dtype=np.float64)
    return Truth(
        histogram=Distribution.from_values(v, 0.0, 1.0, bench.buckets),
        mean=float(v.mean()),
        variance=float(v.var()),
    )


# ---- methods ---------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Moments:
    """A mean and a variance from a mean-only mechanism (SR, PM, HM)."""

    mean: float
    variance: float


@dataclasses.dataclass(frozen=True, eq=False)
class DistributionMethod:
    """``mechanism(epsilon=, low=0, high=1, buckets=bench.buckets, **params)``, run end to end.

    Returns ``spec.estimate(spec.aggregate(spec.randomize(values)), **estimate_params)``,
    a :class:`~ldpkit.numeric.Distribution` on the bench's d buckets (or on
    ``params["buckets"]``, which overrides the bench's, e.g. CFO binning's c).
    """

    mechanism: type
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    estimate_params: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def spec(self, bench: Bench, epsilon: float) -> Any:
        params = {"buckets": bench.buckets, **self.params}
        return self.mechanism(epsilon=epsilon, low=0.0, high=1.0, **params)

    def __call__(self, data: Bench, epsilon: float, rng: np.random.Generator) -> Distribution:
        spec = self.spec(data, epsilon)
        stats = spec.aggregate(spec.randomize(data.values, rng=rng))
        return spec.estimate(stats, **self.estimate_params)  # type: ignore[no-any-return]


@dataclasses.dataclass(frozen=True, eq=False)
class MomentMethod:
    """SR / PM / HM as SW20 section 6.3 uses them: two separate simulated collections.

    The mean comes from every user reporting her value with the full epsilon; the variance
    from another collection over the same users, SW20's two-round scheme
    (:func:`~ldpkit.numeric.estimate_variance`: half the users estimate the mean, the other
    half report ``(v - mean)^2``). The two are separate experiments, as in the paper (no user
    spends 2 epsilon within one of them).
    """

    mechanism: type

    def __call__(self, data: Bench, epsilon: float, rng: np.random.Generator) -> Moments:
        spec = self.mechanism(epsilon=epsilon, low=0.0, high=1.0)
        mean = spec.run(data.values, rng=rng).mean
        variance = estimate_variance(spec, data.values, rng=rng).variance
        return Moments(mean=float(mean), variance=float(variance))


# ---- metrics ---------------------------------------------------------------------------------
#: Metric kinds of :class:`DistributionMetric` and what they measure (SW20 section 3).
METRIC_KINDS: dict[str, str] = {
    "wasserstein": "Wasserstein-1 distance between the CDFs",
    "ks": "Kolmogorov-Smirnov distance between the CDFs",
    "range": "mean absolute error of random range queries of width alpha",
    "quantile": "mean absolute error of the 10%, 20%, ..., 90% quantiles",
    "mean": "absolute error of the mean",
    "variance": "absolute error of the variance",
}


@dataclasses.dataclass(frozen=True)
class DistributionMetric:
    """One SW20 metric, ``metric(result, truth) -> float``, on the unit scale.

    Parameters
    ----------
    kind : str
        A key of :data:`METRIC_KINDS`.
    alpha : float
        Range width as a fraction of the domain (``kind="range"``).
    n_queries : int
        Random range queries per evaluation.
    seed : int
        Seed of the range queries' starts: the same queries for every cell, so methods are
        compared on identical queries.

    Notes
    -----
    Distribution results are scored against the true d-bucket histogram (W1, KS, ranges,
    quantiles) or the raw values' moments (mean, variance). A :class:`Moments` result
    (SR, PM, HM) has only mean and variance; the other kinds return NaN for it.
    """

    kind: str
    alpha: float = 0.1
    n_queries: int = 1000
    seed: int = 0

    def __post_init__(self) -> None:
        if self.kind not in METRIC_KINDS:
            raise ValueError(f"kind must be one of {list(METRIC_KINDS)}, got {self.kind!r}")

    def __call__(self, result: Any, truth: Truth) -> float:
        if isinstance(result, Moments):
            if self.kind == "mean":
                return abs(result.mean - truth.mean)
            if self.kind == "variance":
                return abs(result.variance - truth.variance)
            return math.nan
        if not isinstance(result, Distribution):
            raise TypeError(
                f"result must be a Distribution or Moments, got {type(result).__name__}"
            )
        hist = truth.histogram
        if self.kind == "wasserstein":
            return _metrics.wasserstein(result, hist)
        if self.kind == "ks":
            return _metrics.ks_distance(result, hist)
        if self.kind == "range":
            rng = np.random.default_rng(self.seed)
            return _metrics.range_query_error(
                result, hist, self.alpha, n_queries=self.n_queries, rng=rng
            )
        if self.kind == "quantile":
            return _metrics.quantile_error(result, hist)
        if self.kind == "mean":
            return abs(result.mean() - truth.mean)
        return abs(result.var() - truth.variance)


# ---- reading the results ---------------------------------------------------------------------
def verdict(records: pd.DataFrame, method: str, *, z: float = 2.0) -> pd.DataFrame:
    """Where ``method`` is the best, tied with the best or beaten, cell by cell.

    For every (data set, metric, epsilon), among the methods with a finite mean error:
    ``"best"`` if ``method`` has the lowest mean; ``"tie"`` if not, but its mean exceeds
    the best by at most ``z`` combined standard errors ``sqrt(sem_a^2 + sem_b^2)``;
    ``"loss"`` otherwise.

    Returns
    -------
    DataFrame
        Columns ``dataset``, ``metric``, ``epsilon``, ``outcome``, ``error`` (the method's
        mean), ``best`` (name of the best other method), ``best_error``, ``ratio``
        (``error / best_error``; < 1 when the method wins).
    """
    summary = summarize(records.dropna(subset=["value"]))
    rows = []
    for (dataset, metric, eps), group in summary.groupby(
        ["dataset", "metric", "epsilon"], sort=False
    ):
        mine = group[group["method"] == method]
        others = group[group["method"] != method]
        if mine.empty or others.empty:
            continue
        err = float(mine["mean"].iloc[0])
        sem = float(np.nan_to_num(mine["sem"].iloc[0]))
        top = others.loc[others["mean"].idxmin()]
        best_err, best_sem = float(top["mean"]), float(np.nan_to_num(top["sem"]))
        if err <= best_err:
            outcome = "best"
        elif err - best_err <= z * math.hypot(sem, best_sem):
            outcome = "tie"
        else:
            outcome = "loss"
        ratio = err / best_err if best_err > 0 else math.inf
        rows.append(
            (dataset, metric, float(eps), outcome, err, str(top["method"]), best_err, ratio)
        )
    return pd.DataFrame(
        rows,
        columns=["dataset", "metric", "epsilon", "outcome", "error", "best", "best_error", "ratio"],
    )


def verdict_table(cells: pd.DataFrame, method: str) -> str:
    """A Markdown table from :func:`verdict`: per data set and metric, the epsilons where
    ``method`` is best, tied, or beaten (and by whom, by which factor)."""
    lines = [
        f"| data set | metric | {method} best at ε | tied at ε | beaten at ε (by, error ratio) |",
        "|---|---|---|---|---|",
    ]
    for (dataset, metric), g in cells.groupby(["dataset", "metric"], sort=False):

        def eps(outcome: str, g: pd.DataFrame = g) -> str:
            sel = g[g["outcome"] == outcome]["epsilon"]
            return ", ".join(f"{e:g}" for e in sel) or "-"

        losses = g[g["outcome"] == "loss"]
        lost = (
            "; ".join(f"{r.epsilon:g} ({r.best}, x{r.ratio:.2f})" for r in losses.itertuples())
            or "-"
        )
        lines.append(f"| {dataset} | {metric} | {eps('best')} | {eps('tie')} | {lost} |")
    counts = cells["outcome"].value_counts()
    total = len(cells)
    lines += [
        "",
        f"{method}: best in {counts.get('best', 0)} of {total} (data set, metric, ε) cells, "
        f"tied with the best in {counts.get('tie', 0)}, beaten in {counts.get('loss', 0)}.",
    ]
    return "\n".join(lines)


def save_metric_figures(
    records: pd.DataFrame,
    outdir: Path,
    stem: str,
    titles: Mapping[str, str] | None = None,
) -> dict[str, Path]:
    """One PNG per metric: one panel per data set, one line per method, log error vs epsilon.

    Drawn by :func:`~ldpkit.experiments.plots.plot_error_vs_epsilon` (standard-error bars);
    rows with a NaN value (a method that does not answer that metric) are left out, so each
    figure shows only the methods that have the metric. Each method keeps its colour in every
    figure (12 distinct colours), and the legend sits to the right of the panels so it hides
    no line. Returns ``{metric: path}``.
    """
    from cycler import cycler
    from matplotlib import rc_context

    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    frame = records.dropna(subset=["value"])
    methods = list(dict.fromkeys(records["method"]))
    colours = {m: _COLOURS[i % len(_COLOURS)] for i, m in enumerate(methods)}
    paths: dict[str, Path] = {}
    for metric in dict.fromkeys(frame["metric"]):
        sub = frame[frame["metric"] == metric]
        present = list(dict.fromkeys(sub["method"]))
        with rc_context({"axes.prop_cycle": cycler(color=[colours[m] for m in present])}):
            fig = plot_error_vs_epsilon(
                sub, metric=metric, title=(titles or {}).get(metric, metric)
            )
        first = fig.get_axes()[0]
        handles, labels = first.get_legend_handles_labels()
        legend = first.get_legend()
        if legend is not None:
            legend.remove()
        w, h = fig.get_size_inches()
        extra = 1.3
        fig.set_size_inches(w + extra, h)
        fig.tight_layout(rect=(0.0, 0.0, w / (w + extra), 1.0))
        fig.legend(handles, labels, loc="center right", fontsize=8, frameon=False)
        path = outdir / f"{stem}-{_slug(metric)}.png"
        fig.savefig(path, dpi=150)
        paths[metric] = path
    return paths


# tab10 plus two dark colours: up to 12 methods without a repeated colour
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
    out = "".join(ch if ch.isalnum() or ch in "-." else "_" for ch in text.lower())
    return out.strip("_") or "metric"
