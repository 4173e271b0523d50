"""``ldpkit reproduce tops21``: continuous release of numerical streams (Wang et al., CCS 2021).

Two comparisons of range-sum accuracy, each a grid of :mod:`ldpkit.experiments`:

* **central DP**: ToPS against PAK, NM-E, H^c_16 (``Hc16``) and flat Laplace (``Flat``),
  epsilon from 0.05 to 1 as in STR21 §6 / Figure 3 and Appendix F Figure 10;
* **local DP**: ToPL (corrected threshold objective, METHODS.md §5) and ToPL with the
  authors' objective (``ToPL-authors``, noise over-weighted 16x) against the fixed-domain
  baselines on ``[0, B]``: Square Wave's per-user unbiased estimates (``SW``), the Piecewise
  Mechanism (``PM``) and Stochastic Rounding (``SR``), epsilon from 0.5 to 4. A sixth line,
  ``ToPL-oracle``, is a **non-private diagnostic**: ToPL's corrected objective evaluated on
  the true histogram of the threshold part instead of its Square Wave estimate. It is drawn
  but never ranked; it tells whether a loss of ToPL comes from the objective or from the
  estimate of the distribution.

Streams (:mod:`ldpkit.reproduce._stream`): POS, retail and DNS (the authors' own, with their
public bounds) and the NYC 2013 departure delays ordered by departure time (shifted by a
public 60 minutes, B = 1500; see that module for the choice). For each stream, the first m
values choose the threshold (retail: m = 16,384, others 65,536) and the rest are released;
the baselines without a threshold see only the released values.

Metrics (STR21 App. F): MAE, MSE, MMAE and MMSE over 200 random ranges against the
**unclipped** truth; the same queries for every method and repetition of a stream, so the
error bars (one standard error over repetitions) show the mechanisms' randomness. The chosen
threshold theta is recorded as a fifth column (``theta``) to explain the errors.

Differences from the paper: the streams are shorter than its n = 2^20 (n = stream length -
m), Kosarak and the taxi fares are replaced by retail and the flight delays, the ToPS
threshold uses lambda from the hierarchy actually used (b = 16 and its real height, not the
authors' hard-coded b = 16, h = 6), NM-E uses the binary tree's b and h, PAK uses Nissim et
al.'s beta (see :mod:`ldpkit.stream.baselines`), and ToPL uses the real Hybrid Mechanism
(the authors' code cannot run ToPL and its PM is biased).

Outputs (in ``out``): ``tops21_central.{parquet,md}``, ``tops21_local.{parquet,md}`` (raw
records: one row per cell and metric), ``tops21_<setting>_<metric>.png`` (one figure per
metric, one panel per stream, one line per method, log scales) and ``tops21.md`` (set-up,
where the paper's ordering holds, and every table).
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..experiments import ExperimentResult, Grid, markdown_table, run_grid, save_results, summarize
from ..experiments.plots import plot_error_vs_epsilon
from ._stream import (
    CENTRAL_METHODS,
    DIAGNOSTICS,
    LOCAL_METHODS,
    RANGE_METRICS,
    STREAM_BOUNDS,
    STREAMS,
    StreamCase,
    load_case,
    range_truth,
    threshold_metric,
)

__all__ = ["Tops21Config", "QUICK", "FULL", "ERROR_METRICS", "build_grids", "ordering", "run"]

#: The error metrics (the grids also record ``theta``).
ERROR_METRICS: tuple[str, ...] = tuple(RANGE_METRICS)


@dataclasses.dataclass(frozen=True)
class Tops21Config:
    """What :func:`run` runs.

    Attributes
    ----------
    streams : tuple of str
        Case names (:data:`ldpkit.reproduce._stream.STREAMS`).
    central_methods, local_methods : tuple of str
        Keys of ``CENTRAL_METHODS`` / ``LOCAL_METHODS``; the first of each is the paper's
        proposal (ToPS, ToPL) whose ordering is checked. An empty tuple skips that setting.
    central_epsilons, local_epsilons : tuple of float
    repetitions : int
    queries : int
        Random ranges per stream (STR21: 200).
    length : int, optional
        Truncate every stream to its first ``length`` values (for tests).
    threshold_size : int, optional
        m for every stream (default: the per-stream values of ``THRESHOLD_SIZES``).
    """

    streams: tuple[str, ...] = tuple(STREAMS)
    central_methods: tuple[str, ...] = tuple(CENTRAL_METHODS)
    local_methods: tuple[str, ...] = tuple(LOCAL_METHODS)
    central_epsilons: tuple[float, ...] = (0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0)
    local_epsilons: tuple[float, ...] = (0.5, 1.0, 1.5, 2.0, 3.0, 4.0)
    repetitions: int = 50
    queries: int = 200
    length: int | None = None
    threshold_size: int | None = None

    def __post_init__(self) -> None:
        for name in self.streams:
            if name not in STREAMS:
                raise ValueError(f"streams must be among {sorted(STREAMS)}, got {name!r}")
        for field, table in (
            ("central_methods", CENTRAL_METHODS),
            ("local_methods", LOCAL_METHODS),
        ):
            for name in getattr(self, field):
                if name not in table:
                    raise ValueError(f"{field} must be among {list(table)}, got {name!r}")
        if not self.streams or not (self.central_methods or self.local_methods):
            raise ValueError("a configuration needs at least one stream and one method")


#: ``--quick``: every stream and method, 3 central and 4 local epsilons, 6 repetitions
#: (about 70 s on a loaded 2-core machine).
QUICK = Tops21Config(
    central_epsilons=(0.05, 0.2, 1.0), local_epsilons=(0.5, 1.0, 2.0, 4.0), repetitions=6
)

#: The full grid: 7 central and 6 local epsilons, 50 repetitions (about 9 minutes with one job).
FULL = Tops21Config()


def build_grids(cases: dict[str, StreamCase], config: Tops21Config) -> dict[str, Grid]:
    """``{"central": Grid, "local": Grid}`` (a setting without methods is left out)."""
    # typed loosely: the stream methods name their first argument ``case``, not ``data``
    metrics: dict[str, Any] = {**RANGE_METRICS, "theta": threshold_metric}
    grids: dict[str, Grid] = {}
    for setting, names, table, eps in (
        ("central", config.central_methods, CENTRAL_METHODS, config.central_epsilons),
        ("local", config.local_methods, LOCAL_METHODS, config.local_epsilons),
    ):
        if names:
            methods: dict[str, Any] = {n: table[n] for n in names}
            grids[setting] = Grid(
                methods=methods,
                epsilons=eps,
                datasets=cases,
                metrics=metrics,
                repetitions=config.repetitions,
                truth=range_truth,
            )
    return grids


def _warm_up(grids: dict[str, Grid], seed: int) -> None:
    """Run every method once on a short prefix of one stream, so that one-time costs (loading
    compiled kernels, first imports) do not inflate the pilot timings."""
    for grid in grids.values():
        name, case = next(iter(grid.datasets.items()))
        short = load_case(
            name,
            seed=seed,
            queries=10,
            values=case.values,
            length=min(case.values.size, 20_000),
            threshold_size=min(case.threshold_size, 4_096, case.values.size // 2),
        )
        for method in grid.methods.values():
            method(short, max(grid.epsilons), np.random.default_rng(seed))


def _estimate_seconds(grids: dict[str, Grid], seed: int) -> dict[str, float]:
    """Serial seconds of each grid, from one pilot cell per (stream, method) at the smallest
    and the largest epsilon (their mean times the number of cells of that pair)."""
    _warm_up(grids, seed)
    out = {}
    for setting, grid in grids.items():
        eps = sorted({min(grid.epsilons), max(grid.epsilons)})
        pilot = Grid(
            methods=grid.methods,
            epsilons=eps,
            datasets=grid.datasets,
            metrics=grid.metrics,
            repetitions=1,
            truth=grid.truth,
        )
        timings = run_grid(pilot, seed=seed, progress=False, estimate=False).timings
        per_cell = timings.groupby(["dataset", "method"])["seconds"].mean()
        out[setting] = float(per_cell.sum()) * len(grid.epsilons) * grid.repetitions
    return out


def _seconds(s: float) -> str:
    return f"{s:.0f} s" if s < 90 else f"{s / 60:.1f} min"


# ---- where the paper's ordering holds ---------------------------------------------------------
def ordering(
    summary: pd.DataFrame, proposed: str, *, metrics: tuple[str, ...] = ERROR_METRICS
) -> pd.DataFrame:
    """Is ``proposed`` the most accurate method of each (metric, stream, epsilon)?

    Parameters
    ----------
    summary : DataFrame
        :func:`ldpkit.experiments.summarize` output (``mean``, ``sem`` per group).
    proposed : str
        The method the paper proposes; every other method of ``summary`` competes.
    metrics : tuple of str
        Metrics to check (lower is better).

    Returns
    -------
    DataFrame
        One row per (metric, dataset, epsilon): ``proposed_mean``, ``best_other`` (the most
        accurate competitor), ``best_other_mean``, ``ratio`` (``proposed_mean /
        best_other_mean``), ``holds`` (proposed has the lowest mean error) and ``clear``
        (the gap exceeds two standard errors of the difference, so the verdict is not
        repetition noise).

    Examples
    --------
    >>> s = pd.DataFrame({"dataset": "d", "epsilon": 1.0, "metric": "MSE",
    ...                   "method": ["A", "B", "C"], "mean": [1.0, 3.0, 2.0], "sem": 0.1})
    >>> row = ordering(s, "A", metrics=("MSE",)).iloc[0]
    >>> row.best_other, bool(row.holds), bool(row.clear), float(row.ratio)
    ('C', True, True, 0.5)
    """
    rows = []
    sub = summary[summary["metric"].isin(metrics)]
    for (metric, dataset, eps), group in sub.groupby(["metric", "dataset", "epsilon"], sort=False):
        mine = group[group["method"] == proposed]
        others = group[group["method"] != proposed]
        if mine.empty or others.empty:
            continue
        best = others.loc[others["mean"].idxmin()]
        m, s = float(mine["mean"].iloc[0]), float(mine["sem"].iloc[0])
        gap_se = math.sqrt(np.nan_to_num(s) ** 2 + np.nan_to_num(float(best["sem"])) ** 2)
        rows.append(
            {
                "metric": metric,
                "dataset": dataset,
                "epsilon": float(eps),
                "proposed": proposed,
                "proposed_mean": m,
                "best_other": str(best["method"]),
                "best_other_mean": float(best["mean"]),
                "ratio": m / float(best["mean"]) if float(best["mean"]) > 0 else math.inf,
                "holds": m < float(best["mean"]),
                "clear": abs(m - float(best["mean"])) > 2 * gap_se,
            }
        )
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    # metrics in the order asked, streams in order of appearance, epsilons ascending
    rank = {
        "metric": {m: i for i, m in enumerate(metrics)},
        "dataset": {d: i for i, d in enumerate(dict.fromkeys(summary["dataset"]))},
    }
    keys = pd.DataFrame({c: frame[c].map(rank[c]) for c in rank} | {"epsilon": frame["epsilon"]})
    return frame.loc[
        keys.sort_values(["metric", "dataset", "epsilon"], kind="stable").index
    ].reset_index(drop=True)


def _verdict_cell(rows: pd.DataFrame) -> str:
    """``"3/3"`` or ``"1/3; loses at ε=0.05 to NM-E (×1.3), ..."``.

    ``×k``: the proposed method's error is k times the winner's; ``~``: the gap is within two
    standard errors.
    """
    text = f"{int(rows['holds'].sum())}/{len(rows)}"
    lost = rows[~rows["holds"]]
    if not lost.empty:
        parts = [
            f"ε={r.epsilon:g} to {r.best_other} (×{r.ratio:.2g}{'' if r.clear else '~'})"
            for r in lost.itertuples()
        ]
        text += "; loses at " + ", ".join(parts)
    return text


def _all_hold(cell: str) -> bool:
    wins, total = cell.split(";")[0].split("/")
    return wins == total


def verdict_table(verdicts: pd.DataFrame) -> pd.DataFrame:
    """Rows streams, columns metrics, entries :func:`_verdict_cell` (for printing)."""
    metrics = list(dict.fromkeys(verdicts["metric"]))
    datasets = list(dict.fromkeys(verdicts["dataset"]))
    table = pd.DataFrame(index=datasets, columns=metrics, dtype=object)
    for (metric, dataset), rows in verdicts.groupby(["metric", "dataset"], sort=False):
        table.loc[dataset, metric] = _verdict_cell(rows)
    return table


def _summary_sentence(verdicts: pd.DataFrame, proposed: str, rivals: str) -> str:
    """One sentence: in how many cells the ordering holds, and where it clearly fails."""
    n, k = len(verdicts), int(verdicts["holds"].sum())
    text = f"{proposed} is the most accurate of {rivals} in {k} of {n} (metric, stream, ε) cells"
    if k == n:
        return text + ": the paper's ordering holds everywhere."
    lost = verdicts[~verdicts["holds"]]
    clear = lost[lost["clear"]]
    verb = "is" if len(clear) == 1 else "are"
    text += (
        f"; of the {len(lost)} where it is not, {len(clear)} {verb} clear (gap > 2 standard errors)"
    )
    if clear.empty:
        return text + "."
    if len(clear) <= 6:
        where = [
            f"{r.dataset} {r.metric} at ε={r.epsilon:g} (to {r.best_other}, ×{r.ratio:.2g})"
            for r in clear.itertuples()
        ]
    else:
        where = [
            f"{dataset}: {len(rows)} (to " + ", ".join(dict.fromkeys(rows["best_other"])) + ")"
            for dataset, rows in clear.groupby("dataset", sort=False)
        ]
    return text + ": " + "; ".join(where) + "."


def oracle_diagnosis(
    summary: pd.DataFrame, method: str = "ToPL", oracle: str = "ToPL-oracle"
) -> list[str]:
    """Per stream: mean theta and MSE of ``method`` against the non-private ``oracle``.

    One line per stream, e.g. ``"pos: mean theta 521-1232 vs 34-54 (oracle) over ε = 0.5, 4;
    MSE ×295 the oracle's (median over ε)"`` (the range of the mean theta over epsilons);
    empty when either method is missing.
    """
    lines = []
    for dataset, d in summary.groupby("dataset", sort=False):
        mean = d.pivot_table(index=["metric", "epsilon"], columns="method", values="mean")
        if method not in mean.columns or oracle not in mean.columns:
            return []
        theta, mse = mean.loc["theta"], mean.loc["MSE"]
        ratio = float(np.median(mse[method] / mse[oracle]))
        span = lambda t: f"{t.min():.4g}" if t.min() == t.max() else f"{t.min():.4g}-{t.max():.4g}"  # noqa: E731
        lines.append(
            f"{dataset}: mean theta {span(theta[method])} vs {span(theta[oracle])} (oracle) over "
            f"ε = {', '.join(f'{e:g}' for e in theta.index)}; MSE ×{ratio:.3g} the oracle's (median over ε)"
        )
    return lines


# ---- the command ------------------------------------------------------------------------------
def _markdown_verdicts(verdicts: pd.DataFrame) -> list[str]:
    table = verdict_table(verdicts)
    lines = [
        "| stream | " + " | ".join(table.columns) + " |",
        "|---" * (len(table.columns) + 1) + "|",
    ]
    for dataset, row in table.iterrows():
        lines.append(f"| {dataset} | " + " | ".join(str(v) for v in row) + " |")
    return lines


def _print_verdicts(console: Any, verdicts: pd.DataFrame, title: str) -> None:
    from rich.table import Table

    table = verdict_table(verdicts)
    out = Table(title=title, show_lines=True)
    out.add_column("stream")
    for metric in table.columns:
        out.add_column(metric)
    for dataset, row in table.iterrows():
        out.add_row(
            str(dataset), *[("[green]" if _all_hold(str(v)) else "[yellow]") + str(v) for v in row]
        )
    console.print(out)


def _print_means(console: Any, summary: pd.DataFrame, metric: str, title: str) -> None:
    from rich.table import Table

    sub = summary[summary["metric"] == metric]
    epsilons = sorted(set(sub["epsilon"]))
    out = Table(title=title)
    out.add_column("stream")
    out.add_column("method")
    for e in epsilons:
        out.add_column(f"ε={e:g}", justify="right")
    for dataset in dict.fromkeys(sub["dataset"]):
        d = sub[sub["dataset"] == dataset]
        best = d.loc[d.groupby("epsilon")["mean"].idxmin()].set_index("epsilon")["method"]
        for i, method in enumerate(dict.fromkeys(d["method"])):
            r = d[d["method"] == method].set_index("epsilon")
            cells = []
            for e in epsilons:
                text = f"{r.at[e, 'mean']:.3g}" if e in r.index else ""
                cells.append(f"[bold]{text}[/]" if best.get(e) == method else text)
            out.add_row(
                str(dataset) if i == 0 else "",
                method,
                *cells,
                end_section=(i == d["method"].nunique() - 1),
            )
    console.print(out)


def run(
    *,
    quick: bool = False,
    out: Path,
    seed: int = 0,
    jobs: int = 1,
    console: Any = None,
    config: Tops21Config | None = None,
) -> Path:
    """Run the STR21 comparison, print its tables and where the paper's ordering holds.

    Parameters
    ----------
    quick : bool
        :data:`QUICK` instead of :data:`FULL` (ignored when ``config`` is given).
    out : Path
        Results directory (created).
    seed : int
        Root seed: the same seed gives identical records (any ``jobs``).
    jobs : int
        Worker processes over grid cells.
    console : rich.console.Console, optional
    config : Tops21Config, optional
        A custom configuration (e.g. a tiny one for tests).

    Returns
    -------
    Path
        ``out``.
    """
    from rich.console import Console

    console = console if console is not None else Console()
    config = config if config is not None else (QUICK if quick else FULL)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    console.rule("[bold]STR21 (Wang et al., CCS 2021): continuous release of numerical streams")

    with console.status("loading streams"):
        cases = {
            name: load_case(
                name,
                seed=seed,
                queries=config.queries,
                length=config.length,
                threshold_size=config.threshold_size,
            )
            for name in config.streams
        }
    for case in cases.values():
        console.print(
            f"  {case.name:14s} {case.values.size:>9,} values: m = {case.threshold_size:,} choose "
            f"theta, n = {case.n:,} released; B = {case.bound:g}; {config.queries} random ranges"
        )
    grids = build_grids(cases, config)

    with console.status("timing one cell per (stream, method) at the extreme epsilons"):
        estimates = _estimate_seconds(grids, seed)
    total = sum(estimates.values())
    par = f", about {_seconds(total / jobs)} on {jobs} workers" if jobs > 1 else ""
    cells = " + ".join(f"{setting} {g.n_cells:,}" for setting, g in grids.items())
    console.print(
        f"[bold]Expected time[/]: {cells} cells, {config.repetitions} repetitions; "
        f"about {_seconds(total)} of compute{par}"
    )

    titles = {
        "central": "STR21 central DP: ToPS vs PAK, NM-E, Hc16, flat Laplace",
        "local": "STR21 local DP: ToPL vs SW-only, PM, SR on [0, B]",
    }
    results: dict[str, ExperimentResult] = {}
    grid_start = time.perf_counter()
    for setting, grid in grids.items():
        console.rule(titles[setting])
        results[setting] = run_grid(grid, seed=seed, n_jobs=jobs, console=console, estimate=False)
    grid_end = time.perf_counter()
    grid_seconds = grid_end - grid_start

    report = [
        "# STR21 (Wang et al., CCS 2021): continuous release of numerical streams",
        "",
        f"Seed {seed}; {config.repetitions} repetitions per cell; {config.queries} random ranges per "
        "stream (the same for every method and repetition); errors against the unclipped truth; "
        "`mean ± standard error` over repetitions. `theta` is the clipping threshold used "
        "(B for the methods without one). ToPL-oracle is not private (theta from the true "
        "histogram of the threshold part): a diagnostic, never ranked.",
        "",
        "| stream | values | m (threshold) | n (released) | B | description |",
        "|---|---|---|---|---|---|",
    ]
    for case in cases.values():
        report.append(
            f"| {case.name} | {case.values.size:,} | {case.threshold_size:,} | {case.n:,} | "
            f"{STREAM_BOUNDS[case.name]:g} | {STREAMS[case.name]} |"
        )
    report.append("")

    verdict_sections: list[str] = []
    table_sections: list[str] = []
    sentences: list[str] = []
    for setting, result in results.items():
        name = f"tops21_{setting}"
        save_results(result.records, out, name, title=titles[setting], plot=False)
        summary = summarize(result.records)
        for metric in ERROR_METRICS:
            plot_error_vs_epsilon(
                summary,
                metric,
                path=out / f"{name}_{metric.lower()}.png",
                logy=True,
                logx=True,
                title=f"{titles[setting]}: {metric}",
            )
        console.rule(f"{titles[setting]}: results")
        _print_means(
            console,
            summary,
            "MSE",
            f"{setting} DP: MSE of {config.queries} range sums (bold: best)",
        )
        methods = list(grids[setting].methods)
        proposed = methods[0]
        variants = [proposed] + (
            ["ToPL-authors"] if setting == "local" and "ToPL-authors" in methods else []
        )
        baselines = [m for m in methods if m not in variants and m not in DIAGNOSTICS]
        for variant in variants:
            verdicts = ordering(summary[summary["method"].isin([variant, *baselines])], variant)
            if verdicts.empty:
                continue
            heading = f"{variant} vs {', '.join(baselines)}"
            console.print(
                f"[bold]{heading}[/]: epsilons where {variant} has the lowest mean error / all; "
                f"where not, the winner and {variant}'s error as a multiple of the winner's "
                "(~: within 2 standard errors)"
            )
            _print_verdicts(console, verdicts, heading)
            sentence = _summary_sentence(verdicts, variant, ", ".join([variant, *baselines]))
            console.print(sentence)
            sentences.append(sentence)
            verdict_sections += [
                f"### {heading}",
                "",
                *_markdown_verdicts(verdicts),
                "",
                sentence,
                "",
            ]
        diagnosis = oracle_diagnosis(summary) if setting == "local" else []
        if diagnosis:
            intro = (
                "Diagnostic: ToPL's threshold and error against ToPL-oracle (the same objective on "
                "the true histogram of the threshold part, not private):"
            )
            console.print(intro)
            for line in diagnosis:
                console.print(f"  {line}")
            sentences.append(intro + " " + "; ".join(diagnosis) + ".")
            verdict_sections += [intro, "", *(f"- {line}" for line in diagnosis), ""]
        table_sections += [f"## {titles[setting]}", "", markdown_table(result.records), ""]
        figures = ", ".join(f"[{m}]({name}_{m.lower()}.png)" for m in ERROR_METRICS)
        table_sections += [f"Figures: {figures}.", ""]

    report += [
        "## Where the paper's ordering holds",
        "",
        "Entries: the number of epsilons at which the proposed method has the lowest mean error, "
        "out of all epsilons run; where it does not, the winner and how many times the winner's "
        "error the proposed method's error is (`~`: the gap is within two standard errors).",
        "",
        *verdict_sections,
        *table_sections,
    ]
    (out / "tops21.md").write_text("\n".join(report), encoding="utf-8")
    console.rule("Where the paper's ordering holds (ToPS, ToPL most accurate)")
    for sentence in sentences:
        console.print(sentence)
    console.print(
        f"[dim]tops21 finished in {_seconds(time.perf_counter() - start)}: grids "
        f"{_seconds(grid_seconds)} (expected {_seconds(total / jobs)}), loading + timing "
        f"{_seconds(grid_start - start)}, tables + figures {_seconds(time.perf_counter() - grid_end)}[/]"
    )
    return out
