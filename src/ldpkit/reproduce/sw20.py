"""Reproduce SW20 section 6: numerical distributions, Square Wave + EMS against its competitors.

Li, Wang, Lopuhaä-Zwakenberg, Li, Škorić. Estimating Numerical Distributions under Local
Differential Privacy. SIGMOD 2020. ``ldpkit reproduce sw20 [--quick]``.

What runs (SW20 Table 2 and sections 6.2-6.3):

- methods: SW with EMS and with EM, CFO binning with c = 16, 32, 64 bins, HH (B = 4, constrained
  inference), HH-ADMM, HaarHRR; for mean and variance also SR, PM and HM;
- metrics (SW20 section 3, all on the unit scale): Wasserstein-1 and KS distance (Figure 2),
  range queries with alpha = 0.1 and 0.4 (Figure 3), mean, variance and quantile errors
  (Figure 4);
- data: Beta(5, 2) with 100,000 samples and 256 buckets, as in SW20; three real data sets
  shipped in installable packages, each with 1024 buckets as SW20 uses for real data: the
  departure time of NYC flights (smooth time of day, our stand-in for SW20's taxi pick-up
  times), MLB salaries below 2^24 dollars (heaped on round amounts, our stand-in for SW20's
  spiky income data, which SW20 also cut at a power of two) and weeks worked of the AER
  Fertility data (integers 0..52 with huge spikes at 0 and 52: a spiky data set);
- the full grid: epsilon = 0.5, 1, ..., 4 with 40 repetitions (SW20 ran 100 on data sets
  of about 2 million users; ours have 26 thousand to 330 thousand); ``--quick``:
  epsilon = 0.5, 1, 2, 4 with 4 repetitions.

Written into ``out``: ``sw20.parquet`` (every repetition), ``sw20.md`` (setup, SW20's claims,
the verdict, one table per metric and data set, time per method), ``sw20-<metric>.png`` (one
figure per metric, one panel per data set, one line per method, log error vs epsilon with
standard-error bars; PNG and PDF). The verdict, computed from the results by
:func:`ldpkit.experiments.compare_methods`, says where SW-EMS wins, ties or loses against the
best other method, per data set, metric and epsilon.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from .. import metrics as _metrics
from ..experiments import (
    Grid,
    Method,
    compare_methods,
    comparison_markdown,
    markdown_table,
    timings_markdown,
)
from ..experiments import numeric as _bench
from ..experiments.numeric import (
    Bench,
    BenchConfig,
    DistributionMethod,
    MomentMethod,
    Moments,
    Truth,
    bench_grid,
    bench_truth,
    report_head,
    run_benches,
    save_report,
)
from ..numeric import (
    HHADMM,
    CFOBinning,
    Distribution,
    HaarHRR,
    HierarchicalHistogram,
    HybridMechanism,
    PiecewiseMechanism,
    SquareWave,
    StochasticRounding,
)

__all__ = [
    "DATASETS",
    "METHODS",
    "METRICS",
    "METRIC_KINDS",
    "Config",
    "FULL",
    "QUICK",
    "DistributionMetric",
    "load_bench",
    "make_method",
    "make_metrics",
    "build_grid",
    "run",
]

NAME = "sw20"
TITLE = "SW20: numerical distributions under LDP (Li et al., SIGMOD 2020, section 6)"
REFERENCE = "SW-EMS"

#: Data set name -> what it stands for in SW20.
DATASETS: dict[str, str] = {
    "Beta(5,2)": "SW20's synthetic Beta(5, 2)",
    "flights dep. time": "smooth real data (SW20: taxi pick-up time)",
    "salaries": "heaped real data (SW20: income, spiky on round amounts)",
    "weeks worked": "spiky real data: 53 integer values, 47 % at 0 (SW20's fourth set, retirement, is smoother)",
}

#: Method name -> description (SW20 Table 2).
METHODS: dict[str, str] = {
    "SW-EMS": "Square Wave, EMS post-processing (tolerance 1e-3)",
    "SW-EM": "Square Wave, plain EM (tolerance 1e-3 e^eps)",
    "CFO-16": "CFO binning, 16 bins, GRR or OLH, Norm-Sub",
    "CFO-32": "CFO binning, 32 bins",
    "CFO-64": "CFO binning, 64 bins",
    "HH": "hierarchical histogram, B = 4, constrained inference, monotone-CDF fit",
    "HH-ADMM": "HH reports, ADMM post-processing",
    "HaarHRR": "Haar coefficients through HRR, monotone-CDF fit",
    "SR": "stochastic rounding (mean; variance by SW20's two rounds)",
    "PM": "piecewise mechanism (mean; variance by two rounds)",
    "HM": "hybrid mechanism (mean; variance by two rounds)",
}

#: Metric name -> (kind, alpha, what the figure shows).
METRICS: dict[str, tuple[str, float, str]] = {
    "W1": ("wasserstein", 0.0, "Wasserstein-1 distance (SW20 Fig. 2a-d)"),
    "KS": ("ks", 0.0, "KS distance (SW20 Fig. 2e-h)"),
    "range 0.1": ("range", 0.1, "MAE of range queries, alpha = 0.1 (SW20 Fig. 3, row 1)"),
    "range 0.4": ("range", 0.4, "MAE of range queries, alpha = 0.4 (SW20 Fig. 3, row 2)"),
    "mean": ("mean", 0.0, "absolute error of the mean (SW20 Fig. 4a-d)"),
    "variance": ("variance", 0.0, "absolute error of the variance (SW20 Fig. 4e-h)"),
    "quantiles": ("quantile", 0.0, "MAE of the 10%..90% quantiles (SW20 Fig. 4i-l)"),
}

#: What SW20 reports, paraphrased, per metric (for comparison in the report).
PAPER_CLAIMS: dict[str, str] = {
    "W1": "SW-EMS best in most cases, followed by SW-EM and HH-ADMM; even the best bin count "
    "per data set and epsilon leaves CFO binning behind SW-EMS.",
    "KS": "SW-EMS generally best on Beta, taxi and retirement; on the spiky income data "
    "HH-ADMM beats SW-EM/EMS, especially at larger epsilon.",
    "range 0.1": "SW-EMS best in most cases and better than HH and HaarHRR; CFO-64 is similar "
    "on taxi; HH-ADMM best on income at large epsilon.",
    "range 0.4": "As alpha = 0.1: SW-EMS best in most cases; HH-ADMM best on income at large epsilon.",
    "mean": "SW-EMS comparable to the best of SR and PM; HH-ADMM better than CFO binning but "
    "worse than SW-EMS.",
    "variance": "SR and PM worse than SW-EM/EMS in most cases (they spend half the users on the mean).",
    "quantiles": "SW-EMS best except on the spiky income data, where HH-ADMM is best and CFO "
    "with few bins is 1-2 orders of magnitude worse.",
}

_BETA_BUCKETS = 256
_REAL_BUCKETS = 1024
_DATA_KEY = 2020  # spawn key of the synthetic data's stream (cells use 4-element keys)


@dataclasses.dataclass(frozen=True)
class Config(BenchConfig):
    """The grid (:class:`~ldpkit.experiments.numeric.BenchConfig`).

    ``buckets`` overrides SW20's bucket counts (256 for Beta(5, 2), 1024 for real data) for
    every data set.
    """

    DATASETS: ClassVar[Mapping[str, str]] = DATASETS
    METHODS: ClassVar[Mapping[str, str]] = METHODS

    buckets: int | None = None


FULL = Config(epsilons=(0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0), repetitions=40)
QUICK = Config(epsilons=(0.5, 1.0, 2.0, 4.0), repetitions=4)


# ---- data ------------------------------------------------------------------------------------
#: Explicit post-processing of the plain estimates (SW20's CFO and HH-ADMM use Norm-Sub; the
#: monotone CDF fit is our choice for HH and HaarHRR, see METHODS.md).
NORM_SUB = {"postprocess": "norm_sub"}
CDF_FIT = {"postprocess": "cdf"}


def load_bench(name: str, config: Config, seed: int) -> Bench:
    """Return the data set ``name`` on [0, 1] with SW20's bucket count (or ``config.buckets``).

    Raises DataPackageNotFoundError when a real data set's package is not installed.
    """
    if name not in DATASETS:
        raise ValueError(f"dataset must be one of {list(DATASETS)}, got {name!r}")
    buckets = _BETA_BUCKETS if name == "Beta(5,2)" else _REAL_BUCKETS
    return _bench.load_bench(
        name,
        seed=seed,
        beta_n=config.beta_n,
        beta_key=(_DATA_KEY,),
        buckets=config.buckets or buckets,
    )


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
    """One SW20 metric (section 3), ``metric(result, truth) -> float``, on the unit scale.

    ``kind`` is a key of :data:`METRIC_KINDS`; ``alpha`` the range width (``"range"``),
    ``n_queries`` the number of random range queries, whose starts come from ``seed`` (the
    same queries in every cell). Distributions are scored against the true d-bucket
    histogram (W1, KS, ranges, quantiles) or the raw values' moments; a :class:`Moments`
    result (SR, PM, HM) answers only mean and variance, NaN otherwise.
    """

    kind: str
    alpha: float = 0.1
    n_queries: int = 1000
    seed: int = 0

    def __post_init__(self) -> None:
        """Validate and normalize the fields."""
        if self.kind not in METRIC_KINDS:
            raise ValueError(f"kind must be one of {list(METRIC_KINDS)}, got {self.kind!r}")

    def __call__(self, result: Any, truth: Truth) -> float:
        """Return the metric of ``result`` against ``truth``."""
        if isinstance(result, Moments):
            if self.kind in ("mean", "variance"):
                return abs(getattr(result, self.kind) - getattr(truth, self.kind))
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


# ---- methods and metrics ---------------------------------------------------------------------
def make_method(name: str) -> Method:
    """Return the grid method called ``name`` (a key of :data:`METHODS`)."""
    table: dict[str, Method] = {
        "SW-EMS": DistributionMethod(SquareWave, estimate_params={"method": "ems"}),
        "SW-EM": DistributionMethod(SquareWave, estimate_params={"method": "em"}),
        "CFO-16": DistributionMethod(CFOBinning, {"buckets": 16}, NORM_SUB),
        "CFO-32": DistributionMethod(CFOBinning, {"buckets": 32}, NORM_SUB),
        "CFO-64": DistributionMethod(CFOBinning, {"buckets": 64}, NORM_SUB),
        "HH": DistributionMethod(HierarchicalHistogram, {"branching": 4}, CDF_FIT),
        "HH-ADMM": DistributionMethod(HHADMM, {"branching": 4}, NORM_SUB),
        "HaarHRR": DistributionMethod(HaarHRR, estimate_params=CDF_FIT),
        "SR": MomentMethod(StochasticRounding),
        "PM": MomentMethod(PiecewiseMechanism),
        "HM": MomentMethod(HybridMechanism),
    }
    if name not in table:
        raise ValueError(f"method must be one of {list(table)}, got {name!r}")
    return table[name]


def make_metrics(seed: int, n_queries: int = 1000) -> dict[str, DistributionMetric]:
    """SW20's metrics; range queries drawn from ``seed`` (the same queries in every cell)."""
    return {
        name: DistributionMetric(
            kind, alpha=alpha if kind == "range" else 0.1, n_queries=n_queries, seed=seed
        )
        for name, (kind, alpha, _) in METRICS.items()
    }


def build_grid(config: Config, benches: Mapping[str, Bench], seed: int) -> Grid:
    """Return the experiment grid of ``config`` over the loaded ``benches``.

    The epsilons are listed with a middle one first: :func:`~ldpkit.experiments.run_grid`
    times its pilot cells at the first epsilon, and EM's running time falls with epsilon,
    so the smallest would overstate the total about twofold. Cell seeds are keyed by name,
    so the order changes no number; :func:`run` sorts the records back by epsilon.
    """
    eps = sorted(config.epsilons)
    middle = eps[len(eps) // 2]
    metrics = make_metrics(seed, config.n_queries)
    ordered = [middle, *(e for e in eps if e != middle)]
    return bench_grid(config, benches, make_method, metrics, ordered)


# ---- the report ------------------------------------------------------------------------------
def _setup_text(config: Config, benches: Mapping[str, Bench], seed: int, quick: bool) -> list[str]:
    table = ["| data set | n | buckets d | prepared | stands for |", "|---|---|---|---|---|"]
    table += [
        f"| {k} | {b.n:,} | {b.buckets} | {b.note} | {DATASETS[k]} |" for k, b in benches.items()
    ]
    lines = report_head(TITLE, config, seed, quick, table)
    lines += [
        "- Every data set is mapped onto [0, 1]; every method estimates a d-bucket histogram "
        "(CFO binning spreads each bin's mass uniformly over its buckets).",
        "- W1, KS, range queries and quantiles compare against the true histogram on the same "
        "d buckets (SW20's convention); mean and variance against the raw values (exact sample "
        "mean, population variance), so distribution methods carry a small discretization floor "
        "(reported below).",
        f"- Range queries: {config.n_queries} random starts a in [0, 1 - α], the same for every cell.",
        "- HH and HaarHRR: SW20 scores them only on range queries (their consistent leaves can be "
        "negative). ldpkit turns the leaves into a distribution by a least-squares monotone-CDF fit "
        "(ldpkit's default for them), so they are scored on every metric here.",
        "- SR/PM/HM: the mean from every user with the full ε; the variance from a separate "
        "collection in which half the users estimate the mean and the other half report "
        "(v - mean)^2 (SW20 section 6.3).",
        "",
    ]
    floors = []
    for name, bench in benches.items():
        truth = bench_truth(bench)
        floors.append(
            f"| {name} | {abs(truth.histogram.mean() - truth.mean):.2e} | "
            f"{abs(truth.histogram.var() - truth.variance):.2e} |"
        )
    lines += [
        "Discretization floor (error of the exact d-bucket histogram itself):",
        "",
        "| data set | mean | variance |",
        "|---|---|---|",
        *floors,
        "",
    ]
    return lines


def _in_epsilon_order(records: pd.DataFrame, grid: Grid) -> pd.DataFrame:
    """Sort records by data set, method (grid order), epsilon, repetition.

    Metrics keep their order (stable sort).
    """
    rank_d = {d: i for i, d in enumerate(grid.datasets)}
    rank_m = {m: i for i, m in enumerate(grid.methods)}
    keyed = records.assign(_d=records["dataset"].map(rank_d), _m=records["method"].map(rank_m))
    keyed = keyed.sort_values(["_d", "_m", "epsilon", "repetition"], kind="stable")
    return keyed.drop(columns=["_d", "_m"]).reset_index(drop=True)


def run(config: Config, *, out: Path, seed: int, jobs: int, console: Any) -> Path:
    """Run the SW20 grid, save Parquet + Markdown + one PNG per metric into ``out`` (see :func:`ldpkit.reproduce.run`)."""
    from rich.markdown import Markdown

    quick = config == QUICK
    start = time.perf_counter()

    load = functools.partial(load_bench, config=config, seed=seed)
    build = functools.partial(build_grid, config, seed=seed)
    benches, grid, result = run_benches(
        TITLE, config, load, build, seed=seed, jobs=jobs, console=console
    )
    records = _in_epsilon_order(result.records.dropna(subset=["value"]), grid)
    cells = compare_methods(records, REFERENCE)

    lines = _setup_text(config, benches, seed, quick)
    lines += ["## What SW20 reports", ""]
    lines += [f"- **{m}**: {PAPER_CLAIMS[m]}" for m in METRICS]
    lines += ["", f"## Verdict (computed from these results): where {REFERENCE} wins", ""]
    lines += [
        f"{REFERENCE} against the best other method scored on that metric.",
        "",
        comparison_markdown(cells, REFERENCE),
        "",
        "## Results",
        "",
        markdown_table(records),
        *timings_markdown(
            result.timings,
            "## Time per run (seconds, mean over cells; randomize + aggregate + estimate)",
        ),
    ]
    titles = {m: desc for m, (_, _, desc) in METRICS.items()}

    figures = save_report(out, NAME, records, cells, lines, titles)

    main = records[records["metric"].isin(["W1", "KS"])]
    console.print(Markdown(markdown_table(main)))
    console.print(
        Markdown(
            f"### Where {REFERENCE} wins (computed)\n\n" + comparison_markdown(cells, REFERENCE)
        )
    )
    console.print(
        f"wrote {out / (NAME + '.md')}, {out / (NAME + '.parquet')} and {len(figures)} figures; "
        f"wall time {time.perf_counter() - start:.0f} s"
    )
    return out
