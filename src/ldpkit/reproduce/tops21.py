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

Streams (:mod:`ldpkit.experiments.streams`): POS, retail and DNS (the authors' own, with their
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
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..experiments import (
    ExperimentResult,
    Grid,
    compare_methods,
    comparison_markdown,
    markdown_table,
    method_styles,
    plot_error_vs_epsilon,
    run_grid,
    save_results,
    summarize,
)
from ..experiments.streams import (
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

__all__ = [
    "Tops21Config",
    "QUICK",
    "FULL",
    "ERROR_METRICS",
    "build_grids",
    "objective_verdict",
    "oracle_diagnosis",
    "run",
]

#: The error metrics (the grids also record ``theta``).
ERROR_METRICS: tuple[str, ...] = tuple(RANGE_METRICS)


@dataclasses.dataclass(frozen=True)
class Tops21Config:
    """What :func:`run` runs.

    Attributes
    ----------
    streams : tuple of str
        Case names (:data:`ldpkit.experiments.streams.STREAMS`).
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
        """Validate and normalize the fields."""
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

#: The full grid: 7 central and 6 local epsilons, 50 repetitions (46 minutes with one job on a
#: shared 2-core machine: central DP 7, local DP 38).
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
    """Run every method once on a short prefix of one stream.

    So that one-time costs (loading compiled kernels, first imports) do not inflate the
    pilot timings.
    """
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


def _seconds(s: float) -> str:
    return f"{s:.0f} s" if s < 90 else f"{s / 60:.1f} min"


# ---- where the paper's ordering holds ---------------------------------------------------------
def _summary_sentence(cells: pd.DataFrame, proposed: str, rivals: str) -> str:
    """Return one sentence on where ``proposed`` is the most accurate.

    In how many cells ``proposed`` has the lowest mean error, and where it clearly loses
    (``cells`` from :func:`~ldpkit.experiments.compare_methods`).
    """
    n, k = len(cells), int(cells["lowest"].sum())
    text = f"{proposed} is the most accurate of {rivals} in {k} of {n} (metric, stream, ε) cells"
    lost = cells[cells["outcome"] == "loss"]
    if lost.empty:
        return text + ("" if k < n else ": the paper's ordering holds everywhere") + "."
    where = [
        f"{dataset}: {len(rows)} (to " + ", ".join(dict.fromkeys(rows["best"])) + ")"
        for dataset, rows in lost.groupby("dataset", sort=False)
    ]
    return (
        text
        + f"; it clearly loses (gap > 2 standard errors) in {len(lost)}: "
        + "; ".join(where)
        + "."
    )


def objective_verdict(cells: pd.DataFrame) -> str:
    """Return one sentence on ToPL's corrected objective against the authors'.

    Wins, ties and losses; ``cells`` from ``compare_methods(errors, "ToPL",
    ["ToPL-authors"])``.
    """
    n = len(cells)
    wins = int((cells["outcome"] == "win").sum())
    losses = int((cells["outcome"] == "loss").sum())
    lowest = int(cells["lowest"].sum())
    return (
        f"Objective verdict: the corrected objective (ToPL) has the lower mean error in {lowest} "
        f"of {n} (metric, stream, ε) cells against the authors' objective (ToPL-authors); "
        f"clearly lower (gap > 2 standard errors) in {wins}, clearly higher in {losses}."
    )


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
def run(config: Tops21Config, *, out: Path, seed: int, jobs: int, console: Any) -> Path:
    """Run the STR21 comparison, print its tables and where the paper's ordering holds (see :func:`ldpkit.reproduce.run`)."""
    from rich.markdown import Markdown

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

    with console.status("warming up (compiled kernels load once, outside the pilot timings)"):
        _warm_up(grids, seed)

    titles = {
        "central": "STR21 central DP: ToPS vs PAK, NM-E, Hc16, flat Laplace",
        "local": "STR21 local DP: ToPL vs SW-only, PM, SR on [0, B]",
    }
    results: dict[str, ExperimentResult] = {}
    grid_start = time.perf_counter()
    for setting, grid in grids.items():
        console.rule(titles[setting])
        results[setting] = run_grid(grid, seed=seed, n_jobs=jobs, console=console)
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
        styles = method_styles(list(grids[setting].methods))
        for metric in ERROR_METRICS:
            plot_error_vs_epsilon(
                summary,
                metric,
                path=out / f"{name}_{metric.lower()}.png",
                logy=True,
                logx=True,
                title=f"{titles[setting]}: {metric}",
                styles=styles,
            )
        console.rule(f"{titles[setting]}: results")
        mse = result.records[result.records["metric"] == "MSE"]
        console.print(Markdown(markdown_table(mse)))
        methods = list(grids[setting].methods)
        proposed = methods[0]
        variants = [proposed] + (
            ["ToPL-authors"] if setting == "local" and "ToPL-authors" in methods else []
        )
        baselines = [m for m in methods if m not in variants and m not in DIAGNOSTICS]
        errors = result.records[result.records["metric"].isin(ERROR_METRICS)]
        for variant in variants:
            cells = compare_methods(errors, variant, baselines)
            if cells.empty:
                continue
            heading = f"{variant} vs {', '.join(baselines)}"
            table = comparison_markdown(cells, variant)
            sentence = _summary_sentence(cells, variant, ", ".join([variant, *baselines]))
            console.print(Markdown(f"### {heading}\n\n{table}\n\n{sentence}"))
            sentences.append(sentence)
            verdict_sections += [f"### {heading}", "", table, "", sentence, ""]
        if setting == "local" and {"ToPL", "ToPL-authors"} <= set(methods):
            # the objective verdict: the corrected objective (ToPL) against the authors'
            cells = compare_methods(errors, "ToPL", ["ToPL-authors"])
            if not cells.empty:
                heading = "Objective verdict: ToPL (corrected objective) vs ToPL-authors"
                table = comparison_markdown(cells, "ToPL")
                sentence = objective_verdict(cells)
                console.print(Markdown(f"### {heading}\n\n{table}\n\n{sentence}"))
                sentences.append(sentence)
                verdict_sections += [f"### {heading}", "", table, "", sentence, ""]
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
        "Per stream and metric: the epsilons where the proposed method wins, ties or loses "
        "against the best competitor (win/loss: mean errors apart by more than two standard "
        "errors); ×ratio = the proposed method's mean error / the best competitor's.",
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
        f"{_seconds(grid_seconds)}, loading + warm-up "
        f"{_seconds(grid_start - start)}, tables + figures {_seconds(time.perf_counter() - grid_end)}[/]"
    )
    return out
