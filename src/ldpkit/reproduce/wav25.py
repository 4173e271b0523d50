"""Reproduce WAV25 section 6: the Haar-wavelet expansion against its competitors.

P. Zhao, Z. Zhang, B. Sun, L. Shen, L. Zhang, S. Wang, Z. Liu. Consistent Estimation of
Numerical Distributions under Local Differential Privacy by Wavelet Expansion, 2025.
``ldpkit reproduce wav25 [--quick]``.

What runs:

- methods (section 6.1): the Haar wavelet with WAV25's ``J = ceil(log2(n)/2)`` ("Wavelet")
  and, as our addition, with ``J - 2`` ("Wavelet J-2"); Square Wave with EMS and with EM;
  binning with 16 and 64 bins through kRR (GRR) or OUE by WAV25's rule, then Norm-Sub; the
  hierarchical histogram HH (B = 4); Fang et al.'s Direct Wiener (DW) and Improved
  Iterative Wiener (IIW) on 64 bins, and IIW on 256 bins (our addition: on spiky data a
  finer binning is what the deconvolution needs);
- metrics (section 6.1 and 6.5): W1 and KS between the estimated CDF and the empirical CDF
  at the 256 grid points i/256; MAE of random range queries of width 0.2 and 0.4;
- data: Beta(5, 2) with 100,000 samples (smooth, as in WAV25), the departure times of NYC
  flights (smooth; stands in for WAV25's taxi pick-up times), and three heaped or spiky
  real data sets standing in for WAV25's retirement and income data: MLB salaries below
  2^24 USD, weeks worked by the mothers of AER's Fertility data, hourly earnings of AER's
  CPSSW8 data;
- the W1-vs-J check (section 6.3): W1 of the wavelet at every J in 1..11, on Beta(5, 2) at
  n = 1e4, 1e5, 1e6 and on the real data sets, at several epsilons; the rule's J and the
  best J are marked, with the J minimizing WAV25's bound (Lemmas 5 and 6 without the O());
- the full grid: epsilon = 0.5, 1, ..., 4 with 30 repetitions (WAV25: 100), J sweep with
  15 (about 9 minutes on two cores, one worker); ``--quick``: epsilon = 0.5, 1, 2, 4 with 3
  repetitions, J = 2..10 on Beta(5, 2) only at epsilon = 1 and 4 (under a minute).

- added parts (``FULL``; ``QUICK`` runs them smaller): WAV25 Fig. 5 (section 6.4), the
  step densities of eq. 92 with h = 1/2 .. 1/16 at n = 100,000; the large-n spiky regime,
  weeks worked and salaries resampled to n = 1e6 (where WAV25 reports the wavelet winning
  KS on spiky data); SW-EM under both stopping rules, SW20's ``1e-3 e^eps`` and
  near-convergence ("SW-EM*"), on the comparison's data sets. These parts also run
  :class:`~ldpkit.numeric.AutoDistribution` ("Auto").

Written into ``out``: ``wav25.parquet`` and ``wav25-jsweep.parquet`` (every repetition),
``wav25.md`` (setup, WAV25's claims, the computed verdict, all tables, timings),
``wav25-verdict.csv``, ``wav25-jsweep.csv``, one figure per metric (``wav25-w1.png``,
``wav25-ks.png``, ``wav25-range-0.2.png``, ``wav25-range-0.4.png``: a panel per data set, a
line per method, log error vs epsilon with standard-error bars) and ``wav25-w1-vs-j.png``; for the added parts ``wav25-fig5.parquet``, ``wav25-large.parquet``,
``wav25-stop.parquet`` and their W1 and KS figures (``wav25-fig5-w1.png`` ...).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from ..experiments import (
    Grid,
    Method,
    compare_methods,
    comparison_markdown,
    markdown_table,
    run_grid,
    timings_markdown,
)
from ..experiments import numeric as _bench
from ..experiments.grid import summarize
from ..experiments.numeric import (
    Bench,
    BenchConfig,
    DistributionMethod,
    GridMetric,
    bench_grid,
    bench_truth,
    report_head,
    run_benches,
    save_report,
)
from ..experiments.plots import errorbar_line, method_styles, save_figure, save_metric_figures
from ..numeric import (
    AutoDistribution,
    CFOBinning,
    Distribution,
    HaarWavelet,
    HierarchicalHistogram,
    SquareWave,
    WienerDeconvolution,
)
from ..numeric.wavelet import MAX_LEVEL, default_max_level

__all__ = [
    "DATASETS",
    "METHODS",
    "METRICS",
    "Config",
    "FULL",
    "QUICK",
    "load_bench",
    "make_method",
    "make_metrics",
    "build_grid",
    "build_j_grid",
    "run",
]

NAME = "wav25"
TITLE = "WAV25: numerical distributions by Haar-wavelet expansion (Zhao et al. 2025, section 6)"
REFERENCE = "Wavelet"
VARIANTS = ("Wavelet", "Wavelet J-2")

#: Data set name -> (smooth?, what it stands for in WAV25).
DATASETS: dict[str, tuple[bool, str]] = {
    "Beta(5,2)": (True, "WAV25's synthetic smooth data"),
    "flights dep. time": (True, "smooth real data (WAV25: taxi pick-up time)"),
    "salaries": (False, "heaped real data (WAV25: income, heaped at round amounts)"),
    "weeks worked": (
        False,
        "spiky real data: 53 integers, 47 % at 0, 18.5 % at 52 (WAV25: retirement)",
    ),
    "CPSSW8 earnings": (False, "heaped real data (WAV25: income)"),
}

#: Method name -> description.
METHODS: dict[str, str] = {
    "Wavelet": "Haar wavelet, J = ceil(log2(n)/2) (WAV25 section 5.4), 2^(J+1) buckets",
    "Wavelet J-2": "Haar wavelet, J = ceil(log2(n)/2) - 2 (our addition, see the J check)",
    "SW-EMS": "Square Wave + EMS (SW20), d buckets",
    "SW-EM": "Square Wave + plain EM (SW20), d buckets",
    "Binning-16": "16 bins, kRR if d < 3e^ε + 2 else OUE, Norm-Sub",
    "Binning-64": "64 bins, kRR or OUE by the same rule, Norm-Sub",
    "HH": "hierarchical histogram, B = 4, d leaves, constrained inference, monotone-CDF fit",
    "DW": "Direct Wiener deconvolution (Fang et al.), 64 bins, kRR or OUE, simplex projection",
    "IIW": "Improved Iterative Wiener deconvolution, 64 bins",
    "IIW-256": "Improved Iterative Wiener deconvolution, 256 bins (our addition)",
}

#: Methods of the added parts only (Fig. 5, the large-n spiky regime, the stopping rules);
#: name -> description.
EXTRA_METHODS: dict[str, str] = {
    "SW-EM*": "Square Wave + plain EM run to near-convergence: |ΔL| < 1e-6 or 20,000 iterations",
    "Binning-8": "8 bins, kRR or OUE by WAV25's rule, Norm-Sub (WAV25 Fig. 5's binning)",
    "Auto": "AutoDistribution: SW reports, smoothing chosen by held-out likelihood (ldpkit)",
}

#: Near-convergence of SW-EM*: absolute log-likelihood tolerance and iteration cap.
NEAR_TOL, NEAR_MAX_ITER = 1e-6, 20_000

#: Metric name -> (GridMetric kind, alpha, figure title).
METRICS: dict[str, tuple[str, float, str]] = {
    "W1": ("w1", 0.2, "Wasserstein-1 on the 256-point grid (WAV25 Fig. 2)"),
    "KS": ("ks", 0.2, "KS distance on the 256-point grid (WAV25 Fig. 3)"),
    "range 0.2": ("range", 0.2, "MAE of range queries, α = 0.2 (WAV25 Fig. 6)"),
    "range 0.4": ("range", 0.4, "MAE of range queries, α = 0.4 (WAV25 Fig. 7)"),
}

#: What WAV25 reports, paraphrased (section 6.2-6.5).
PAPER_CLAIMS: tuple[str, ...] = (
    "W1 (Fig. 2): the wavelet is consistently better than every baseline; the advantage over "
    "SW with EM is largest on the non-smooth data (retirement, income) at larger ε. Binning "
    "is far from optimal whatever d; HH and SW + EM improve on it.",
    "KS (Fig. 3): the wavelet is better than all existing methods; on spiky data the KS of "
    "binning and SW + EM does not converge to 0 as ε grows, the wavelet's does.",
    "J (Fig. 4): the empirical best J is the same as or close to the rule's on Beta(5,2), "
    "retirement and income; on the smooth taxi data the best J is 4, far below the rule's 8.",
    "Range queries (Fig. 6-7): the wavelet is best in most cases; on smooth data SW + EM "
    "performs similarly; on spiky data the wavelet is significantly better.",
)

_BETA_BUCKETS = 256
_REAL_BUCKETS = 1024
_DATA_KEY = 2025  # spawn key of the data streams (cells use 4-element keys)


@dataclasses.dataclass(frozen=True)
class Config(BenchConfig):
    """The comparison (:class:`~ldpkit.experiments.numeric.BenchConfig`) and the W1-vs-J sweep.

    ``max_n``: optional cap on every data set's size (a seeded random subset; for tests);
    ``j_levels``: the J values of the sweep (empty: no sweep); ``j_epsilons``,
    ``j_repetitions``: its epsilons and repetitions; ``j_beta_ns``: sizes of its Beta(5, 2)
    data sets; ``j_real``: whether it also runs on the comparison's real data sets.
    """

    DATASETS: ClassVar[Mapping[str, tuple[bool, str]]] = DATASETS
    METHODS: ClassVar[Mapping[str, str]] = METHODS

    max_n: int | None = None
    j_levels: tuple[int, ...] = tuple(range(1, 12))
    j_epsilons: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0)
    j_repetitions: int = 10
    j_beta_ns: tuple[int, ...] = (10_000, 100_000, 1_000_000)
    j_real: bool = True
    fig5_hs: tuple[float, ...] = ()
    fig5_n: int = 100_000
    fig5_epsilons: tuple[float, ...] = (0.5, 1.0, 2.0, 3.0, 4.0)
    fig5_repetitions: int = 10
    fig5_methods: tuple[str, ...] = (
        "Wavelet",
        "Wavelet J-2",
        "SW-EMS",
        "SW-EM",
        "SW-EM*",
        "Binning-8",
        "HH",
        "Auto",
    )
    large_datasets: tuple[str, ...] = ()
    large_n: int = 1_000_000
    large_epsilons: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0)
    large_repetitions: int = 3
    large_methods: tuple[str, ...] = (
        "Wavelet",
        "Wavelet J-2",
        "SW-EMS",
        "SW-EM",
        "SW-EM*",
        "HH",
        "Auto",
    )
    stop_epsilons: tuple[float, ...] = ()
    stop_repetitions: int = 5

    def __post_init__(self) -> None:
        """Validate and normalize the fields."""
        super().__post_init__()
        if any(not 0 <= j <= 20 for j in self.j_levels):
            raise ValueError(f"j_levels must be levels in [0, 20], got {self.j_levels}")
        allowed = {**METHODS, **EXTRA_METHODS}
        for what in ("fig5_methods", "large_methods"):
            bad = [m for m in getattr(self, what) if m not in allowed]
            if bad:
                raise ValueError(f"{what} must be a subset of {list(allowed)}, got {bad}")
        bad = [d for d in self.large_datasets if d not in DATASETS or d == "Beta(5,2)"]
        if bad:
            real = [d for d in DATASETS if d != "Beta(5,2)"]
            raise ValueError(f"large_datasets must be a subset of {real}, got {bad}")
        if any(not 0.0 < h <= 0.5 or abs(1.0 / h - round(1.0 / h)) > 1e-9 for h in self.fig5_hs):
            raise ValueError(f"fig5_hs must be widths 1/k in (0, 1/2], got {self.fig5_hs}")


FULL = Config(
    epsilons=(0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0),
    repetitions=30,
    j_repetitions=15,
    fig5_hs=(1 / 2, 1 / 4, 1 / 8, 1 / 16),
    large_datasets=("weeks worked", "salaries"),
    stop_epsilons=(0.5, 1.0, 2.0, 4.0),
)
QUICK = Config(
    epsilons=(0.5, 1.0, 2.0, 4.0),
    repetitions=3,
    j_levels=tuple(range(2, 11)),
    j_epsilons=(1.0, 4.0),
    j_repetitions=2,
    j_beta_ns=(100_000,),
    j_real=False,
    fig5_hs=(1 / 2, 1 / 16),
    fig5_epsilons=(1.0, 4.0),
    fig5_repetitions=2,
    large_datasets=("weeks worked",),
    large_n=200_000,
    large_epsilons=(1.0, 4.0),
    large_repetitions=1,
)


# ---- the wavelet and the J check ---------------------------------------------------------------------------------
def binning_oracle(epsilon: float, params: Mapping[str, Any]) -> str:
    """Return WAV25 section 6.1's oracle for binning on ``params["buckets"]`` = d bins.

    KRR (GRR) if ``d < 3 e^eps + 2``, else OUE.

    Examples
    --------
    >>> [binning_oracle(e, {"buckets": d}) for e, d in ((1.0, 8), (1.0, 16), (4.0, 64))]
    ['GRR', 'OUE', 'GRR']
    """
    bins = int(params["buckets"])
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


def wasserstein_bound(epsilon: float, n: int, max_level: int) -> float:
    """Return WAV25's bound on E[W1] without the O().

    Lemma 5's bias ``2^-(J+1)`` plus Lemma 6's ``sqrt(sum_j 2^-(2j+2) V_j / n_j)`` with the
    allocation of eq. 83 (``n_j = w_j n``).

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
    """Return the J among ``levels`` minimizing :func:`wasserstein_bound` (smallest on ties)."""
    bounds = [wasserstein_bound(epsilon, n, j) for j in levels]
    return int(levels[int(np.argmin(bounds))])


def _level_of(method: str) -> int:
    return int(method.split("=", 1)[1])


def j_sweep_table(
    records: pd.DataFrame, sizes: Mapping[str, int], metric: str = "W1"
) -> pd.DataFrame:
    """Tabulate a J sweep per (data set, epsilon).

    Methods are named ``"J=<j>"``; ``sizes`` maps each data set to its n. Columns: the
    rule's J ``ceil(log2(n)/2)``, the J minimizing :func:`wasserstein_bound` (``theory_J``),
    the best measured J, their mean errors, the error at the rule's J - 2, and the ratios
    ``rule_over_best`` and ``rule_over_minus2`` (> 1: the rule's J is worse).
    """
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
    """Return the :func:`j_sweep_table` as Markdown."""
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


def plot_w1_vs_j(
    records: pd.DataFrame,
    sizes: Mapping[str, int],
    path: Path,
    *,
    metric: str = "W1",
    title: str | None = None,
) -> Path:
    """Plot WAV25 Figure 4's check.

    Error vs J, a panel per data set, a line per epsilon (log scale, standard-error bars); a
    dashed vertical line at the rule's J, a star on each line's best J, a hollow diamond on
    each line's :func:`theory_level`. PNG and PDF.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    summary = summarize(records[records["metric"] == metric])
    summary = summary.assign(level=[_level_of(m) for m in summary["method"]])
    datasets = list(dict.fromkeys(summary["dataset"]))
    styles = method_styles([f"ε={e:g}" for e in sorted(set(summary["epsilon"]))])
    cols = min(4, len(datasets))
    rows = math.ceil(len(datasets) / cols)
    fig = Figure(figsize=(3.8 * cols + 1.8, 3.2 * rows + (0.4 if title else 0.0)))
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols, squeeze=False)
    handles: dict[str, Any] = {}
    for i, dataset in enumerate(datasets):
        ax = axes[i // cols][i % cols]
        sub = summary[summary["dataset"] == dataset]
        for eps in sorted(set(sub["epsilon"])):
            line = sub[sub["epsilon"] == eps].sort_values("level")
            x = line["level"].to_numpy()
            y = line["mean"].to_numpy(dtype=np.float64)
            label = f"ε={eps:g}"
            st = styles[label]
            handles[label] = errorbar_line(ax, x, y, line["sem"], st, log=True, size=3.5)
            best = int(np.argmin(y))
            ax.plot(x[best], y[best], marker="*", ms=12, color=st.colour, mec="black", ls="none")
            theory = np.flatnonzero(x == theory_level(float(eps), int(sizes[dataset])))
            ax.plot(x[theory], y[theory], marker="D", ms=7, mfc="none", mec=st.colour, ls="none")
        ax.axvline(default_max_level(int(sizes[dataset])), color="grey", ls="--", lw=1.0)
        ax.set_yscale("log")
        ax.set_xlabel("expansion depth J")
        ax.set_ylabel(f"{metric} (Wasserstein-1)" if metric == "W1" else metric)
        ax.set_title(dataset, fontsize=10)
        ax.grid(True, alpha=0.3)
    for j in range(len(datasets), rows * cols):
        axes[j // cols][j % cols].set_visible(False)
    handles["rule's J"] = Line2D([], [], color="grey", ls="--", lw=1.0)
    handles["best J"] = Line2D([], [], marker="*", ms=10, color="white", mec="black", ls="none")
    handles["bound's J"] = Line2D([], [], marker="D", ms=6, mfc="none", mec="black", ls="none")
    width = 3.8 * cols
    top = 1.0 - 0.45 / fig.get_size_inches()[1] if title else 1.0
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0.0, 0.0, width / (width + 1.8), top))
    fig.legend(
        list(handles.values()),
        list(handles),
        loc="upper left",
        bbox_to_anchor=(width / (width + 1.8), top),
        fontsize=8.5,
        frameon=False,
    )
    return save_figure(fig, path)


# ---- data ------------------------------------------------------------------------------------
def _beta(n: int, seed: int) -> Bench:
    beta_key = (_DATA_KEY, n)
    return _bench.load_bench(
        "Beta(5,2)", seed=seed, beta_n=n, beta_key=beta_key, buckets=_BETA_BUCKETS
    )


def load_bench(name: str, config: Config, seed: int) -> Bench:
    """Return the data set ``name`` on [0, 1], at most ``config.max_n`` values.

    A seeded random subset; raises DataPackageNotFoundError if its package is not
    installed.
    """
    if name not in DATASETS:
        raise ValueError(f"dataset must be one of {list(DATASETS)}, got {name!r}")
    if name == "Beta(5,2)":
        bench = _beta(config.beta_n, seed)
    else:
        bench = _bench.load_bench(name, seed=seed, beta_n=0, beta_key=(), buckets=_REAL_BUCKETS)
    if config.max_n is not None and bench.n > config.max_n:
        gen = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(_DATA_KEY, 1)))
        keep = np.sort(gen.choice(bench.n, size=config.max_n, replace=False))
        bench = dataclasses.replace(
            bench,
            values=bench.values[keep],
            note=bench.note + f"; random subset of {config.max_n:,}",
        )
    return bench


def step_values(h: float, n: int, seed: int) -> np.ndarray:
    """Draw ``n`` values from WAV25's eq. 92 density.

    1.5 on [kh, (k+1)h) for odd k, 0.5 for even k (section 6.4, Fig. 5), seeded by ``seed``
    and ``h``.

    Examples
    --------
    >>> v = step_values(0.5, 100_000, 0)
    >>> bool(abs((v >= 0.5).mean() - 0.75) < 0.01)
    True
    """
    k = round(1.0 / h)
    weight = np.where(np.arange(k) % 2 == 1, 1.5, 0.5)
    gen = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(_DATA_KEY, 92, k)))
    piece = gen.choice(k, size=n, p=weight / weight.sum())
    return np.minimum((piece + gen.random(n)) * h, 1.0)


def fig5_benches(config: Config, seed: int) -> dict[str, Bench]:
    """Return the eq. 92 data sets of WAV25 Fig. 5, one per h (``"eq. 92, h=1/k"``)."""
    n = config.fig5_n if config.max_n is None else min(config.fig5_n, config.max_n)
    out = {}
    for h in config.fig5_hs:
        k = round(1.0 / h)
        out[f"eq. 92, h=1/{k}"] = Bench(
            step_values(h, n, seed),
            _BETA_BUCKETS,
            smooth=False,
            note=f"{n:,} draws from WAV25 eq. 92 with h = 1/{k} (steps 0.5 / 1.5)",
        )
    return out


def large_benches(config: Config, benches: Mapping[str, Bench], seed: int) -> dict[str, Bench]:
    """Return the spiky real data sets resampled with replacement to ``config.large_n`` users."""
    out = {}
    for name in config.large_datasets:
        base = benches[name] if name in benches else load_bench(name, FULL, seed)
        gen = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(_DATA_KEY, 17)))
        values = gen.choice(base.values, size=config.large_n, replace=True)
        out[f"{name} n={config.large_n:,}"] = Bench(
            values,
            base.buckets,
            smooth=False,
            note=f"{name} resampled with replacement to {config.large_n:,}",
        )
    return out


# ---- methods, metrics, grids -----------------------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False)
class AutoMethod:
    """:class:`~ldpkit.numeric.AutoDistribution` with ``expected_n`` = the data's n."""

    def __call__(self, data: Bench, epsilon: float, rng: np.random.Generator) -> Distribution:
        spec = AutoDistribution(epsilon=epsilon, expected_n=data.n)
        return spec.estimate(spec.aggregate(spec.randomize(data.values, rng=rng)))  # type: ignore[no-any-return]


NORM_SUB = {"postprocess": "norm_sub"}  # binning and the Wiener filters end with Norm-Sub
RULE = binning_oracle


def make_method(name: str) -> Method:
    """Return the grid method ``name`` (a key of :data:`METHODS` or :data:`EXTRA_METHODS`)."""
    table: dict[str, Method] = {
        "Wavelet": WaveletMethod(),
        "Wavelet J-2": WaveletMethod(level_offset=-2),
        "SW-EMS": DistributionMethod(SquareWave, estimate_params={"method": "ems"}),
        "SW-EM": DistributionMethod(SquareWave, estimate_params={"method": "em"}),
        "SW-EM*": DistributionMethod(
            SquareWave,
            estimate_params={"method": "em", "tol": NEAR_TOL, "max_iter": NEAR_MAX_ITER},
        ),
        "Binning-8": DistributionMethod(CFOBinning, {"buckets": 8}, NORM_SUB, oracle_rule=RULE),
        "Binning-16": DistributionMethod(CFOBinning, {"buckets": 16}, NORM_SUB, oracle_rule=RULE),
        "Binning-64": DistributionMethod(CFOBinning, {"buckets": 64}, NORM_SUB, oracle_rule=RULE),
        "HH": DistributionMethod(HierarchicalHistogram, {"branching": 4}, {"postprocess": "cdf"}),
        "DW": DistributionMethod(
            WienerDeconvolution, {"buckets": 64}, {"method": "direct", **NORM_SUB}, False
        ),
        "IIW": DistributionMethod(
            WienerDeconvolution, {"buckets": 64}, {"method": "iterative", **NORM_SUB}, False
        ),
        "IIW-256": DistributionMethod(
            WienerDeconvolution, {"buckets": 256}, {"method": "iterative", **NORM_SUB}, False
        ),
        "Auto": AutoMethod(),
    }
    if name not in table:
        raise ValueError(f"method must be one of {list(table)}, got {name!r}")
    return table[name]


def make_metrics(seed: int, n_queries: int = 1000) -> dict[str, GridMetric]:
    """WAV25's metrics; range queries drawn from ``seed`` (the same in every cell)."""
    return {
        name: GridMetric(kind, alpha=alpha, n_queries=n_queries, seed=seed)
        for name, (kind, alpha, _) in METRICS.items()
    }


def build_grid(config: Config, benches: Mapping[str, Bench], seed: int) -> Grid:
    """Return the comparison grid over the loaded ``benches``."""
    return bench_grid(config, benches, make_method, make_metrics(seed, config.n_queries))


def _j_name(name: str, n: int) -> str:
    return f"{name} n={n:,}"


def j_benches(config: Config, benches: Mapping[str, Bench], seed: int) -> dict[str, Bench]:
    """Return the data sets of the J sweep.

    Beta(5, 2) at each of ``j_beta_ns``, then the real data sets of the comparison (if
    ``j_real``).
    """
    out: dict[str, Bench] = {}
    for n in config.j_beta_ns:
        n = min(n, config.max_n) if config.max_n is not None else n
        out[_j_name("Beta(5,2)", n)] = _beta(n, seed)
    if config.j_real:
        for name, bench in benches.items():
            if name != "Beta(5,2)":
                out[_j_name(name, bench.n)] = bench
    return out


def build_j_grid(config: Config, benches: Mapping[str, Bench], seed: int) -> Grid:
    """W1 of the wavelet at each J of ``config.j_levels`` (methods ``"J=<j>"``)."""
    return Grid(
        methods={f"J={j}": WaveletMethod(max_level=j) for j in config.j_levels},
        epsilons=config.j_epsilons,
        datasets=dict(benches),
        metrics={"W1": GridMetric("w1")},
        repetitions=config.j_repetitions,
        truth=bench_truth,
    )


def extra_grid(
    methods: tuple[str, ...],
    benches: Mapping[str, Bench],
    epsilons: tuple[float, ...],
    repetitions: int,
) -> Grid:
    """W1 and KS of ``methods`` on ``benches`` (the added parts)."""
    return Grid(
        methods={m: make_method(m) for m in methods},
        epsilons=epsilons,
        datasets=dict(benches),
        metrics={"W1": GridMetric("w1"), "KS": GridMetric("ks")},
        repetitions=repetitions,
        truth=bench_truth,
    )


def ratio_table(records: pd.DataFrame, method: str, against: str) -> pd.DataFrame:
    """Return the ratio of ``method``'s mean error over ``against``'s, as a wide table.

    Per (data set, metric, epsilon); < 1: ``method`` is better. Rows data set and metric,
    columns epsilon.
    """
    s = summarize(records)
    wide = s.pivot_table(
        index=["dataset", "metric"], columns=["method", "epsilon"], values="mean", sort=False
    )
    return (wide[method] / wide[against]).reset_index()


def ratio_markdown(table: pd.DataFrame) -> str:
    eps = [c for c in table.columns if c not in ("dataset", "metric")]
    lines = [
        "| data set | metric | " + " | ".join(f"ε={e:g}" for e in eps) + " |",
        "|---|---|" + "---|" * len(eps),
    ]
    for r in table.itertuples(index=False):
        lines.append(f"| {r[0]} | {r[1]} | " + " | ".join(f"{x:.2f}" for x in r[2:]) + " |")
    return "\n".join(lines)


# ---- the report ------------------------------------------------------------------------------
def _setup_text(config: Config, benches: Mapping[str, Bench], seed: int, quick: bool) -> list[str]:
    table = [
        "| data set | n | d (SW, HH) | wavelet J (rule) | kind | prepared | stands for |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, b in benches.items():
        kind = "smooth" if b.smooth else "spiky"
        rule = default_max_level(b.n)
        table.append(
            f"| {name} | {b.n:,} | {b.buckets} | {rule} | {kind} | {b.note} | {DATASETS[name][1]} |"
        )
    lines = report_head(TITLE, config, seed, quick, table, note=" (WAV25: 100)")
    lines += [
        "- W1 and KS as WAV25 section 6.1 computes them: the estimated CDF against the empirical CDF "
        "of the raw values at the 256 grid points i/256, i = 1..256; W1 = mean absolute difference, "
        "KS = maximum.",
        "- CDF convention: the truth at a grid point x < 1 is the fraction of values *below* x "
        "(P[X < x]); at x = 1 it is 1. Every estimate is a histogram whose bucket [x, x + w) holds a "
        "value equal to x, so its CDF at x estimates P[X < x]; with P[X <= x], a point mass exactly "
        "on a grid point (weeks worked: 26 weeks = 0.5) would be KS error for every method alike.",
        f"- Range queries (WAV25 eq. 93): {config.n_queries} starts a uniform in [0, 1 - α], b = a + α, "
        "the same for every cell; MAE of F^(b) - F^(a) against the exact fraction of values in [a, b].",
        "- HH: the consistent leaves become a distribution by ldpkit's monotone-CDF fit (its "
        "default; much better than Norm-Sub in W1). Binning and the Wiener filters end with Norm-Sub "
        "(simplex projection). WAV25 plots only the better of DW and IIW; both are listed here.",
        "- Verdict: the wavelet (WAV25's J) against the best competitor (all methods except the "
        "wavelet variants) in each (data set, metric, ε) cell: win / loss if the means differ by more "
        "than two combined standard errors, else tie.",
        "",
    ]
    return lines


def _claim_check(
    cells: pd.DataFrame, benches: Mapping[str, Bench], vs_sw: pd.DataFrame
) -> list[str]:
    """Write sentences: outcome counts per (smooth/spiky, metric), and against SW-EMS."""
    kinds = {name: ("smooth" if b.smooth else "spiky") for name, b in benches.items()}
    cells = cells.assign(kind=cells["dataset"].map(kinds))
    lines = []
    for (kind, metric), g in cells.groupby(["kind", "metric"], sort=False):
        c = g["outcome"].value_counts()
        lo, hi = g["ratio"].min(), g["ratio"].max()
        lines.append(
            f"- {kind} data, {metric}: the wavelet wins {c.get('win', 0)}, ties {c.get('tie', 0)}, "
            f"loses {c.get('loss', 0)} of {len(g)} cells against the best competitor (wavelet's "
            f"error / best competitor's: {lo:.2f} to {hi:.2f})."
        )
    if not vs_sw.empty:
        vs_sw = vs_sw.assign(kind=vs_sw["dataset"].map(kinds))
        for (kind, metric), g in vs_sw.groupby(["kind", "metric"], sort=False):
            better = int(g["lowest"].sum())
            lines.append(
                f"- {kind} data, {metric}, against SW-EMS alone: the wavelet has the lower mean error in "
                f"{better} of {len(g)} cells (wavelet / SW-EMS: {g['ratio'].min():.2f} to {g['ratio'].max():.2f})."
            )
    return lines


def _j_reading(table: pd.DataFrame) -> list[str]:
    """Write sentences on the J sweep from its table."""
    if table.empty:
        return []
    n = len(table)
    gap = table["best_J"] - table["rule_J"]
    minus2 = table["rule_over_minus2"]
    theory_gap = table["best_J"] - table["theory_J"]
    return [
        f"- The best J equals the rule's in {int((gap == 0).sum())} of {n} (data set, ε) cells, is below it "
        f"in {int((gap < 0).sum())} and above it in {int((gap > 0).sum())}; best J - rule J ranges from "
        f"{int(gap.min())} to {int(gap.max())} (median {gap.median():g}).",
        f"- The rule's J costs {table['rule_over_best'].min():.2f}x to {table['rule_over_best'].max():.2f}x "
        f"the best J's W1 (median {table['rule_over_best'].median():.2f}x).",
        f"- J - 2 has lower W1 than the rule's J in {int((minus2 > 1).sum())} of {int(minus2.notna().sum())} "
        f"cells (rule / (J-2): {minus2.min():.2f} to {minus2.max():.2f}, median {minus2.median():.2f}).",
        f"- The bound's J (minimizing Lemma 5 + Lemma 6) is within one of the best J in "
        f"{int((theory_gap.abs() <= 1).sum())} of {n} cells; best J - bound's J ranges from "
        f"{int(theory_gap.min())} to {int(theory_gap.max())}.",
    ]


@dataclasses.dataclass(frozen=True)
class _Part:
    key: str
    records: pd.DataFrame
    lines: list[str]
    titles: dict[str, str]


def _fig5_lines(records: pd.DataFrame, config: Config) -> list[str]:
    """Report section of WAV25 Fig. 5 (eq. 92 step densities)."""
    lines = [
        "## Fig. 5: step densities (WAV25 section 6.4, eq. 92)",
        "",
        f"Density 1.5 on [kh, (k+1)h) for odd k, 0.5 for even k; {config.fig5_n:,} users "
        f"(WAV25 does not state n; its Beta(5,2) size); {config.fig5_repetitions} repetitions; "
        f"d = {_BETA_BUCKETS} for SW and HH. Figures wav25-fig5-w1.png, wav25-fig5-ks.png.",
        "",
        "WAV25: at h = 1/2 the wavelet is slightly better than SW + EM, at 1/4 and 1/8 it "
        "begins to show an advantage, at h = 1/16 it significantly outperforms existing methods.",
        "",
    ]
    if "Wavelet" in config.fig5_methods and "SW-EM" in config.fig5_methods:
        lines += [
            "Wavelet's mean error / SW-EM's (< 1: the wavelet is better):",
            "",
            ratio_markdown(ratio_table(records, "Wavelet", "SW-EM")),
            "",
        ]
    return lines + _against_others_lines(records, config.fig5_methods)


def _against_others_lines(records: pd.DataFrame, methods: Sequence[str]) -> list[str]:
    """Compare the wavelet with the best of the part's other methods, then tabulate.

    The comparison only when both ran.
    """
    others = [m for m in methods if m not in VARIANTS]
    lines: list[str] = []
    if "Wavelet" in methods and len(others) > 0:
        lines += [
            "Wavelet against the best of " + ", ".join(others) + ":",
            "",
            comparison_markdown(compare_methods(records, "Wavelet", others), "Wavelet"),
            "",
        ]
    return [*lines, markdown_table(records), ""]


def _large_lines(records: pd.DataFrame, config: Config) -> list[str]:
    lines = [
        "## The large-n spiky regime",
        "",
        f"{', '.join(config.large_datasets)} resampled with replacement to n = {config.large_n:,} "
        f"(where WAV25 reports the wavelet winning KS on spiky data); {config.large_repetitions} "
        "repetitions; wavelet J by the rule at this n.",
        "",
    ]
    return lines + _against_others_lines(records, config.large_methods)


def _stop_lines(records: pd.DataFrame, config: Config) -> list[str]:
    return [
        "## SW-EM under both stopping rules",
        "",
        f"SW20's rule stops plain EM when the log-likelihood changes by less than 1e-3 e^ε "
        f"(SW-EM); SW-EM* runs on to |ΔL| < {NEAR_TOL:g} or {NEAR_MAX_ITER:,} iterations "
        f"(near-convergence, the maximum-likelihood estimate). {config.stop_repetitions} "
        "repetitions on the comparison's data sets.",
        "",
        "SW-EM*'s mean error / SW-EM's (> 1: running EM to convergence hurts):",
        "",
        ratio_markdown(ratio_table(records, "SW-EM*", "SW-EM")),
        "",
        markdown_table(records),
        "",
    ]


def _run_extra_parts(
    config: Config, benches: Mapping[str, Bench], *, seed: int, jobs: int, console: Any
) -> list[_Part]:
    """Run the parts added to WAV25 section 6.

    Fig. 5, the large-n spiky regime, SW-EM's stopping rules (each only when configured).
    """
    parts: list[_Part] = []
    titles = {m: t for m, (_, _, t) in METRICS.items()}

    def run_part(
        key: str,
        banner: str,
        methods: tuple[str, ...],
        part_benches: Mapping[str, Bench],
        epsilons: tuple[float, ...],
        repetitions: int,
        title: str,
        text: Callable[[pd.DataFrame, Config], list[str]],
    ) -> None:
        # one part: its grid, its records, its report section, its figures' titles
        console.print(banner)
        grid = extra_grid(methods, part_benches, epsilons, repetitions)
        rec = run_grid(grid, seed=seed, n_jobs=jobs, console=console).records
        t = {k: f"{v}{title}" for k, v in titles.items()}
        parts.append(_Part(key, rec, text(rec, config), t))

    if config.fig5_hs:
        run_part(
            "fig5",
            "[bold]Fig. 5[/bold] (eq. 92 step densities)",
            config.fig5_methods,
            fig5_benches(config, seed),
            config.fig5_epsilons,
            config.fig5_repetitions,
            " on eq. 92 step densities (WAV25 Fig. 5)",
            _fig5_lines,
        )
    if config.large_datasets:
        run_part(
            "large",
            f"[bold]large n[/bold] (spiky data at n = {config.large_n:,})",
            config.large_methods,
            large_benches(config, benches, seed),
            config.large_epsilons,
            config.large_repetitions,
            f", spiky data at n = {config.large_n:,}",
            _large_lines,
        )
    if config.stop_epsilons:
        run_part(
            "stop",
            "[bold]SW-EM stopping rules[/bold]",
            ("SW-EM", "SW-EM*"),
            benches,
            config.stop_epsilons,
            config.stop_repetitions,
            ": SW-EM stopping rules",
            _stop_lines,
        )
    return parts


def run(config: Config, *, out: Path, seed: int, jobs: int, console: Any) -> Path:
    """Run the WAV25 comparison and J sweep; save Parquet, Markdown and PNGs into ``out`` (see :func:`ldpkit.reproduce.run`)."""
    from rich.markdown import Markdown

    quick = config == QUICK
    start = time.perf_counter()

    console.print("[bold]1/2 comparison[/bold] (W1, KS, range queries vs ε)")
    load = functools.partial(load_bench, config=config, seed=seed)
    build = functools.partial(build_grid, config, seed=seed)
    benches, _, result = run_benches(
        TITLE, config, load, build, seed=seed, jobs=jobs, console=console
    )
    jb = j_benches(config, benches, seed) if config.j_levels else {}
    records = result.records
    competitors = [m for m in config.methods if m not in VARIANTS]
    cells = (
        compare_methods(records, REFERENCE, competitors)
        if REFERENCE in config.methods
        else pd.DataFrame()
    )
    vs_sw = (
        compare_methods(records, REFERENCE, ["SW-EMS"])
        if {REFERENCE, "SW-EMS"} <= set(config.methods)
        else pd.DataFrame()
    )

    j_records = pd.DataFrame()
    j_table = pd.DataFrame()
    sizes: dict[str, int] = {}
    if jb:
        sizes = {name: b.n for name, b in jb.items()}
        console.print("[bold]2/2 W1 vs J[/bold] (WAV25 section 6.3)")
        j_result = run_grid(build_j_grid(config, jb, seed), seed=seed, n_jobs=jobs, console=console)
        j_records = j_result.records
        j_table = j_sweep_table(j_records, sizes)

    extra = _run_extra_parts(config, benches, seed=seed, jobs=jobs, console=console)

    lines = _setup_text(config, benches, seed, quick)
    lines += ["## What WAV25 reports", ""]
    lines += [f"- {c}" for c in PAPER_CLAIMS]
    if not cells.empty:
        lines += [
            "",
            f"## Verdict (computed from these results): where the {REFERENCE} wins and loses",
            "",
        ]
        lines += [comparison_markdown(cells, REFERENCE), "", "By kind of data:", ""]
        lines += _claim_check(cells, benches, vs_sw)
        if not vs_sw.empty:
            lines += ["", f"### {REFERENCE} against SW-EMS alone", ""]
            lines += [comparison_markdown(vs_sw, REFERENCE), ""]
        if "Wavelet J-2" in config.methods:
            cells2 = compare_methods(records, "Wavelet J-2", competitors)
            lines += [
                "### The same verdict for Wavelet J-2",
                "",
                comparison_markdown(cells2, "Wavelet J-2"),
                "",
            ]
    if not j_table.empty:
        lines += ["", "## W1 vs J (WAV25 section 6.3; figure wav25-w1-vs-j.png)", ""]
        lines += [
            f"J = {config.j_levels[0]}..{config.j_levels[-1]}, {config.j_repetitions} repetitions per cell; "
            "rule J = ceil(log2(n)/2).",
            "",
            j_sweep_markdown(j_table),
            "",
            *_j_reading(j_table),
            "",
        ]
    for part in extra:
        lines += part.lines
    lines += [
        "## Results",
        "",
        markdown_table(records),
        *timings_markdown(
            result.timings,
            "## Time per run (seconds, mean over cells; randomize + aggregate + estimate, one process)",
        ),
    ]

    titles = {m: t for m, (_, _, t) in METRICS.items()}
    figures = save_report(out, NAME, records, cells, lines, titles)
    if not j_records.empty:
        j_records.to_parquet(out / f"{NAME}-jsweep.parquet", index=False)
        j_table.to_csv(out / f"{NAME}-jsweep.csv", index=False)
        plot_w1_vs_j(
            j_records,
            sizes,
            out / f"{NAME}-w1-vs-j.png",
            title="Wavelet W1 vs expansion depth J (WAV25 section 6.3, Figure 4)",
        )

    for part in extra:
        part.records.to_parquet(out / f"{NAME}-{part.key}.parquet", index=False)
        figures.update(
            {
                f"{part.key} {k}": v
                for k, v in save_metric_figures(
                    part.records, out, f"{NAME}-{part.key}", part.titles
                ).items()
            }
        )
        console.print(Markdown("\n".join(part.lines)))
    console.print(Markdown(markdown_table(records[records["metric"].isin(["W1", "KS"])])))
    if not cells.empty:
        console.print(
            Markdown(
                f"### Where the {REFERENCE} wins and loses (computed)\n\n"
                + comparison_markdown(cells, REFERENCE)
            )
        )
        console.print(Markdown("\n".join(_claim_check(cells, benches, vs_sw))))
    if not j_table.empty:
        console.print(
            Markdown(
                "### W1 vs J\n\n"
                + j_sweep_markdown(j_table)
                + "\n\n"
                + "\n".join(_j_reading(j_table))
            )
        )
    console.print(
        f"wrote {out / (NAME + '.md')}, Parquet and {len(figures) + (0 if j_records.empty else 1)} figures; "
        f"wall time {time.perf_counter() - start:.0f} s"
    )
    return out
