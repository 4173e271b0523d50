"""Reproduce FO17 (Wang et al., USENIX Security 2017): Table 2 and the MSE-vs-epsilon figures.

Two experiments, each run on the :mod:`ldpkit.experiments` harness:

**(a) Table 2, measured.** FO17 Table 2 lists ``n * Var*``, the variance of the estimate
of an item whose true frequency is 0 (eq. 3), for DE (GRR) at d = 2, 32, 1024, SHE,
THE (theta = 1), SUE, OUE, BLH and OLH at epsilon = 0.5, 1, 2, 4. Here every user holds
item 0, so items ``1..d-1`` have frequency exactly 0, and ``n * mean(f~_v^2)`` over those
items and over many independent runs is an unbiased measurement of ``n * Var*`` (the
estimates are unbiased, so their mean square is their variance). For every pure protocol
the count supporting a zero item is exactly ``Binomial(n, q)`` (SHE: a sum of ``n``
Laplace variables), so ``n * Var*`` is exact, not an approximation, and does not depend
on ``n``. The oracles Table 2 does not list (subset selection, Hadamard response, HRR,
RAPPOR decoded by least squares) are measured the same way against their own
``variance``.

*Pass mark.* The measured value is a mean of ``m`` squares. For ``m`` independent
Gaussian estimates, ``m * measured / Var*`` is chi-square with ``m`` degrees of freedom.
Estimates of different items of one run can be correlated (Hadamard response, RAPPOR's
least squares, hashing) and the binomial counts have some excess kurtosis, so the
degrees of freedom are the Satterthwaite value ``nu = 2 mean^2 / Var[mean]``, with
``Var[mean]`` estimated from the spread between the grid's independent cells (capped at
``m``); the row passes when ``measured / analytical`` lies inside the two-sided
chi-square interval ``[chi2_nu(a/2) / nu, chi2_nu(1 - a/2) / nu]`` at a family-wise
``a = 1e-6`` (Bonferroni over the rows). A wrong variance formula by a few percent fails
it; an honest implementation essentially never does.

**(b) MSE vs epsilon.** FO17 section 6.1 (Figure 2(c, d)) runs every protocol on
Zipf(s = 1.1) data with n = 10,000 users and d = 2^10 and compares the measured squared
error with the analytical variance. We do the same for every oracle in
:data:`ldpkit.frequency.ORACLES` on that Zipf set and on the baby-names data (the 1,024
most common names), reporting the full-domain MSE of the *unbiased* estimate
(``mean_v (f~_v - f_v)^2``, frequency scale; FO17 plots counts, i.e. ``n^2`` times this)
with standard errors over repetitions, and its ratio to the analytical expectation
``mean_v Var[f~_v]`` (FO17 eq. 2 with the f-term).

Results (Parquet, Markdown, PNG) go to the output directory; the tables are also printed.

References
----------
T. Wang, J. Blocki, N. Li, S. Jha. Locally Differentially Private Protocols for
Frequency Estimation. USENIX Security 2017: Table 2 (section 5), section 6.1, Figure 2.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..experiments import (
    Grid,
    plot_error_vs_epsilon,
    run_grid,
    save_results,
    summarize,
)
from ..experiments.methods import frequency_mse
from ..frequency import (
    BLH,
    GRR,
    HRR,
    OLH,
    ORACLES,
    OUE,
    RAPPOR,
    SHE,
    SUE,
    THE,
    FrequencyOracle,
    HadamardResponse,
    SubsetSelection,
)
from ..frequency.tables import FO17_TABLE2, TABLE2_COLUMNS
from ..testing import variance_ratio_bounds

__all__ = [
    "Fo17Config",
    "QUICK",
    "FULL",
    "TABLE2_ROWS",
    "EXTRA_ROWS",
    "table2_spec",
    "oracle_spec",
    "unbiased_estimate",
    "Table2Cell",
    "OracleRun",
    "table2_grid",
    "table2_report",
    "mse_datasets",
    "mse_grid",
    "mse_report",
    "run",
]

#: Family-wise level of the Table 2 pass marks (Bonferroni over all rows).
ALPHA = 1e-6

#: FO17 Table 2's columns, in the paper's order.
TABLE2_ROWS: tuple[str, ...] = tuple(TABLE2_COLUMNS)
#: Oracles Table 2 does not list, measured against their own analytical variance.
EXTRA_ROWS: tuple[str, ...] = ("SubsetSelection", "HadamardResponse", "HRR", "RAPPOR (LS)")

_TABLE2_DOMAINS = {"DE (d=2)": 2, "DE (d=32)": 32, "DE (d=1024)": 1024}
_RAPPOR_BITS = 128
#: RAPPOR's row of (a) uses at most this many candidates: its least-squares decoding
#: (with the covariance it reports) costs O(d^3) per run; FO17 appendix A.1 likewise
#: restricts RAPPOR to 128 values because of the regression's cost.
RAPPOR_TABLE_DOMAIN = 128


@dataclasses.dataclass(frozen=True)
class Fo17Config:
    """Sizes of the two experiments.

    Attributes
    ----------
    table_epsilons : tuple of float
        Epsilons of Table 2 (the paper's 0.5, 1, 2, 4).
    table_n : int
        Users per run in (a); ``n * Var*`` does not depend on it.
    table_domain : int
        Domain of the columns whose ``n * Var*`` does not depend on d (and of the extra
        oracles).
    table_cells : int
        Independent grid cells per (oracle, epsilon) in (a); their spread gives the
        degrees of freedom of the pass mark, so keep it >= 8.
    table_samples : int
        Target number of zero-frequency estimates per (oracle, epsilon) in (a); a cell
        runs the protocol as often as needed to reach it.
    mse_epsilons : tuple of float
        Epsilons of (b).
    mse_repetitions : int
        Repetitions per (data set, oracle, epsilon) in (b).
    zipf_n, zipf_s, domain : int, float, int
        The Zipf data set of (b) (FO17: 10,000 users, s = 1.1, d = 1024).
    names_n : int
        Users drawn from the baby-names data in (b); its domain is the ``domain`` most
        common names.
    """

    table_epsilons: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0)
    table_n: int = 10_000
    table_domain: int = 1024
    table_cells: int = 20
    table_samples: int = 20_000
    mse_epsilons: tuple[float, ...] = (0.5, 1.0, 2.0, 3.0, 4.0, 5.0)
    mse_repetitions: int = 10
    zipf_n: int = 10_000
    zipf_s: float = 1.1
    domain: int = 1024
    names_n: int = 100_000


#: ``ldpkit reproduce fo17 --quick``: a reduced grid (about a minute on 2 cores).
QUICK = Fo17Config(
    table_n=5_000,
    table_cells=10,
    table_samples=5_000,
    mse_epsilons=(0.5, 1.0, 2.0, 4.0),
    mse_repetitions=3,
    names_n=10_000,
)
#: ``ldpkit reproduce fo17``: the paper's sizes (FO17 section 6.1) and ten repetitions.
FULL = Fo17Config()


# ---- specs ---------------------------------------------------------------------------------
def rappor_cohorts(domain: int) -> int:
    """Cohorts for RAPPOR's least-squares decoding at ``domain`` candidates.

    FO17 uses 128-bit filters, 2 hashes and 8 or 16 cohorts. Least squares needs at
    least ``d`` regression rows (``cohorts * 128``) and is badly conditioned near that
    limit (at d = 1024, 8 cohorts give ``n Var* ~ 8e4`` at epsilon = 1, 16 give 16), so
    we use 8 cohorts up to 512 candidates and twice the minimum beyond.
    """
    return max(8, 2 * math.ceil(domain / _RAPPOR_BITS))


def table2_spec(row: str, epsilon: float, domain: int) -> FrequencyOracle:
    """Return the oracle measured in Table 2 row ``row`` (a column of FO17 Table 2 or an extra).

    DE columns fix their own domain, RAPPOR uses ``min(domain, RAPPOR_TABLE_DOMAIN)``
    candidates, every other row ``domain`` items.
    """
    if row in _TABLE2_DOMAINS:
        return GRR(epsilon=epsilon, domain_size=_TABLE2_DOMAINS[row])
    if row == "RAPPOR (LS)":
        domain = min(domain, RAPPOR_TABLE_DOMAIN)
    builders: dict[str, Any] = {
        "SHE": lambda: SHE(epsilon=epsilon, domain_size=domain),
        "THE (theta=1)": lambda: THE(epsilon=epsilon, domain_size=domain, cutoff=1.0),
        "SUE": lambda: SUE(epsilon=epsilon, domain_size=domain),
        "OUE": lambda: OUE(epsilon=epsilon, domain_size=domain),
        "BLH": lambda: BLH(epsilon=epsilon, domain_size=domain),
        "OLH": lambda: OLH(epsilon=epsilon, domain_size=domain),
        "SubsetSelection": lambda: SubsetSelection(epsilon=epsilon, domain_size=domain),
        "HadamardResponse": lambda: HadamardResponse(epsilon=epsilon, domain_size=domain),
        "HRR": lambda: HRR(epsilon=epsilon, domain_size=domain),
        "RAPPOR (LS)": lambda: RAPPOR(
            epsilon=epsilon, domain_size=domain, num_cohorts=rappor_cohorts(domain)
        ),
    }
    if row not in builders:
        raise ValueError(f"row must be one of {[*TABLE2_ROWS, *EXTRA_ROWS]}, got {row!r}")
    return builders[row]()  # type: ignore[no-any-return]


def oracle_spec(name: str, epsilon: float, domain: int) -> FrequencyOracle:
    """``ORACLES[name]`` with its defaults (RAPPOR: :func:`rappor_cohorts` cohorts)."""
    if name not in ORACLES:
        raise ValueError(f"name must be one of {sorted(ORACLES)}, got {name!r}")
    if name == "RAPPOR":
        return RAPPOR(epsilon=epsilon, domain_size=domain, num_cohorts=rappor_cohorts(domain))
    return ORACLES[name](epsilon=epsilon, domain_size=domain)  # type: ignore[call-arg]


def unbiased_estimate(spec: FrequencyOracle, stats: Any) -> Any:
    """Return the oracle's unbiased estimate: its plain ``estimate`` (RAPPOR: least squares)."""
    return spec.estimate(stats)


# ---- (a) Table 2 -----------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Table2Cell:
    """Grid method of (a): ``n * mean(f~_v^2)`` over the zero-frequency items of ``runs`` runs.

    Every one of the ``n`` users holds item 0; each run randomizes, aggregates and
    estimates afresh from the cell's generator.
    """

    row: str
    domain: int
    n: int
    runs: int

    def __call__(self, data: Any, epsilon: float, rng: np.random.Generator) -> float:
        """Return the measured variance of the Table 2 row at ``epsilon``."""
        spec = table2_spec(self.row, epsilon, self.domain)
        values = np.zeros(self.n, dtype=np.int64)
        total = 0.0
        for _ in range(self.runs):
            est = unbiased_estimate(spec, spec.aggregate(spec.randomize(values, rng=rng)))
            zero = est.frequencies[1:]
            total += float(zero @ zero)
        return self.n * total / (self.runs * (spec.domain_size - 1))


def _scalar(result: Any, truth: Any) -> float:
    return float(result)


def _no_truth(data: Any) -> None:
    return None


def _runs_per_cell(row: str, config: Fo17Config) -> int:
    per_run = table2_spec(row, 1.0, config.table_domain).domain_size - 1
    return max(1, math.ceil(config.table_samples / (config.table_cells * per_run)))


def table2_grid(config: Fo17Config, rows: Sequence[str] | None = None) -> Grid:
    """Return the grid of (a): one method per row, ``table_cells`` cells per (row, epsilon)."""
    rows = [*TABLE2_ROWS, *EXTRA_ROWS] if rows is None else list(rows)
    methods = {
        row: Table2Cell(row, config.table_domain, config.table_n, _runs_per_cell(row, config))
        for row in rows
    }
    return Grid(
        methods=methods,
        epsilons=config.table_epsilons,
        datasets={"zero-frequency items": "all users hold item 0"},
        metrics={"n_var": _scalar},
        repetitions=config.table_cells,
        truth=_no_truth,
    )


def table2_report(
    records: pd.DataFrame,
    config: Fo17Config,
    *,
    alpha: float = ALPHA,
    analytical: Mapping[tuple[str, float], float] | None = None,
) -> pd.DataFrame:
    """Measured ``n * Var*`` against FO17 Table 2 and the analytical value, with pass marks.

    Parameters
    ----------
    records : DataFrame
        Records of :func:`table2_grid` (metric ``n_var``).
    config : Fo17Config
        The configuration the records were made with.
    alpha : float
        Family-wise level of the pass marks (Bonferroni over the rows).
    analytical : mapping, optional
        ``(row, epsilon) -> n * Var*`` to test against instead of the specs' own
        ``variance`` (the tests use it to show that a wrong formula fails).

    Returns
    -------
    DataFrame
        One row per (oracle, epsilon): ``oracle``, ``epsilon``, ``measured``, ``paper``
        (NaN where Table 2 has no entry), ``analytical``, ``rel_error`` (measured /
        analytical - 1), ``paper_rel_error``, ``samples`` (zero-frequency estimates),
        ``dof`` (Satterthwaite degrees of freedom), ``lower``/``upper`` (bounds on
        measured / analytical) and ``passed``.
    """
    summary = summarize(records)
    summary = summary[summary["metric"] == "n_var"]
    n_rows = len(summary)
    out = []
    for item in summary.itertuples(index=False):
        row, eps = str(item.method), float(item.epsilon)
        spec = table2_spec(row, eps, config.table_domain)
        if analytical is not None:
            value = float(analytical[(row, eps)])
        else:
            value = config.table_n * float(spec.variance(config.table_n))
        paper = math.nan
        if row in TABLE2_COLUMNS and eps in FO17_TABLE2:
            paper = FO17_TABLE2[eps][TABLE2_ROWS.index(row)]
        cells = int(item.count)
        samples = cells * _runs_per_cell(row, config) * (spec.domain_size - 1)
        mean = float(item.mean)
        var_mean = float(item.std) ** 2 / cells if cells > 1 else math.nan
        # Satterthwaite: a scaled chi-square with the spread the cells show, at most m.
        dof = float(samples)
        if math.isfinite(var_mean) and var_mean > 0:
            dof = min(samples, 2.0 * mean**2 / var_mean)
        lower, upper = variance_ratio_bounds(max(1, math.floor(dof)), alpha / n_rows)
        ratio = mean / value
        out.append(
            {
                "oracle": row,
                "epsilon": eps,
                "measured": mean,
                "paper": paper,
                "analytical": value,
                "rel_error": ratio - 1.0,
                "paper_rel_error": mean / paper - 1.0 if paper > 0 else math.nan,
                "samples": samples,
                "dof": float(dof),
                "lower": lower,
                "upper": upper,
                "passed": bool(lower <= ratio <= upper),
            }
        )
    return pd.DataFrame(out)


def _fmt(x: float) -> str:
    if not math.isfinite(x):
        return "-"
    if x == 0:
        return "0"
    if abs(x) < 0.01:
        return f"{x:.3g}"
    return f"{x:.4g}" if abs(x) < 100 else f"{x:.1f}"


def table2_markdown(report: pd.DataFrame) -> str:
    """FO17 Table 2's layout (rows epsilon, columns oracles) plus the detailed rows."""
    lines = [
        "# FO17 Table 2 reproduced: n * Var* of a zero-frequency item",
        "",
        "Each entry: measured (paper). Rows are epsilon, columns FO17's; the last columns are "
        "oracles FO17 does not list (measured against their own analytical variance).",
        "",
    ]
    oracles = list(dict.fromkeys(report["oracle"]))
    lines.append("| ε | " + " | ".join(oracles) + " |")
    lines.append("|---" * (len(oracles) + 1) + "|")
    for eps in sorted(set(report["epsilon"])):
        cells = []
        for o in oracles:
            r = report[(report["oracle"] == o) & (report["epsilon"] == eps)]
            if r.empty:
                cells.append("")
                continue
            r0 = r.iloc[0]
            text = _fmt(float(r0["measured"]))
            if math.isfinite(float(r0["paper"])):
                text += f" ({_fmt(float(r0['paper']))})"
            cells.append(text)
        lines.append(f"| {eps:g} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Measured vs paper vs analytical",
        "",
        "rel. err = measured / analytical - 1; bound = the chi-square interval for that "
        "ratio (Satterthwaite degrees of freedom, family-wise alpha = 1e-6). FO17 prints "
        "OLH at the real-valued g = e^ε + 1; ldpkit's OLH uses the best integer g next to e^ε + 1, "
        "whose analytical value is shown.",
        "",
        "| oracle | ε | measured | paper | analytical | rel. err | vs paper | bound | dof | pass |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report.itertuples(index=False):
        vs_paper = f"{r.paper_rel_error:+.1%}" if math.isfinite(r.paper_rel_error) else "-"
        lines.append(
            f"| {r.oracle} | {r.epsilon:g} | {_fmt(r.measured)} | {_fmt(r.paper)} | "
            f"{_fmt(r.analytical)} | {r.rel_error:+.2%} | {vs_paper} | "
            f"[{r.lower - 1:+.1%}, {r.upper - 1:+.1%}] | {r.dof:,.0f} | "
            f"{'yes' if r.passed else 'NO'} |"
        )
    passed = int(report["passed"].sum())
    lines += ["", f"{passed} of {len(report)} rows within the chi-square bound.", ""]
    return "\n".join(lines)


# ---- (b) MSE vs epsilon ---------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class OracleRun:
    """Grid method of (b): run oracle ``name`` on the data, return its unbiased estimate."""

    name: str

    def __call__(self, data: Any, epsilon: float, rng: np.random.Generator) -> Any:
        """Return the oracle's unbiased estimate of ``data``."""
        spec = oracle_spec(self.name, epsilon, data.domain_size)
        return unbiased_estimate(spec, spec.aggregate(spec.randomize(data.values, rng=rng)))


def mse_datasets(config: Fo17Config, seed: int) -> dict[str, Any]:
    """Return the data sets of (b): Zipf(s) and the ``domain`` most common baby names."""
    from ..datasets import babynames, zipf

    zipf_seed, names_seed = np.random.SeedSequence([seed, 0xF017]).spawn(2)
    return {
        "zipf": zipf(s=config.zipf_s, d=config.domain, n=config.zipf_n, rng=zipf_seed),
        "babynames": babynames(config.names_n, top_k=config.domain, rng=names_seed),
    }


def mse_grid(
    config: Fo17Config, datasets: Mapping[str, Any], oracles: Sequence[str] | None = None
) -> Grid:
    """Return the grid of (b): every oracle x data set x epsilon x repetition, metric ``mse``."""
    names = list(ORACLES) if oracles is None else list(oracles)
    return Grid(
        methods={name: OracleRun(name) for name in names},
        epsilons=config.mse_epsilons,
        datasets=dict(datasets),
        metrics={"mse": frequency_mse},
        repetitions=config.mse_repetitions,
    )


def mse_report(records: pd.DataFrame, datasets: Mapping[str, Any]) -> pd.DataFrame:
    """Measured full-domain MSE with its analytical expectation ``mean_v Var[f~_v]``.

    Returns the summary (``dataset``, ``method``, ``epsilon``, ``mean``, ``sem``, ...) with
    columns ``analytical`` and ``ratio`` (mean / analytical) and ``z``
    ((mean - analytical) / sem).
    """
    summary = summarize(records)
    analytical = []
    for item in summary.itertuples(index=False):
        data = datasets[item.dataset]
        spec = oracle_spec(str(item.method), float(item.epsilon), data.domain_size)
        var = np.asarray(spec.variance(data.n, data.frequencies), dtype=np.float64)
        analytical.append(float(np.mean(var)))
    summary = summary.assign(analytical=analytical)
    summary["ratio"] = summary["mean"] / summary["analytical"]
    with np.errstate(divide="ignore", invalid="ignore"):
        summary["z"] = (summary["mean"] - summary["analytical"]) / summary["sem"]
    return summary


def mse_markdown(report: pd.DataFrame) -> str:
    """Measured / analytical MSE per data set: rows oracles, columns epsilons."""
    lines = [
        "# FO17 section 6.1: measured full-domain MSE vs analytical",
        "",
        "Each entry: measured MSE ± standard error (ratio to the analytical mean variance "
        "mean_v Var[f~_v], FO17 eq. 2). Frequency scale; FO17's Figure 2 plots counts "
        "(n^2 times these).",
        "",
    ]
    epsilons = sorted(set(report["epsilon"]))
    for dataset in dict.fromkeys(report["dataset"]):
        sub = report[report["dataset"] == dataset]
        lines += [f"## {dataset}", ""]
        lines.append("| oracle | " + " | ".join(f"ε={e:g}" for e in epsilons) + " |")
        lines.append("|---" * (len(epsilons) + 1) + "|")
        for method in dict.fromkeys(sub["method"]):
            rows = sub[sub["method"] == method].set_index("epsilon")
            cells = []
            for e in epsilons:
                if e not in rows.index:
                    cells.append("")
                    continue
                r = rows.loc[e]
                sem = f" ± {float(r['sem']):.2g}" if math.isfinite(float(r["sem"])) else ""
                cells.append(f"{float(r['mean']):.3g}{sem} (×{float(r['ratio']):.3f})")
            lines.append(f"| {method} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def _reference(report: pd.DataFrame, dataset: str, metric: str, **sources: str) -> pd.DataFrame:
    """Return the overlay values for :func:`plot_error_vs_epsilon`.

    ``sources`` maps a label to a column of ``report`` (rows without a value are left out).
    """
    parts = [
        pd.DataFrame(
            {
                "dataset": report["dataset"] if "dataset" in report else dataset,
                "metric": metric,
                "method": report["method"] if "method" in report else report["oracle"],
                "epsilon": report["epsilon"],
                "value": report[column],
                "source": label,
            }
        )
        for label, column in sources.items()
    ]
    return pd.concat(parts, ignore_index=True).dropna(subset=["value"])


# ---- the command ----------------------------------------------------------------------------
def run(config: Fo17Config, *, out: Path, seed: int, jobs: int, console: Any) -> Path:
    """Run (a) and (b), print their tables and save them into ``out`` (see :func:`ldpkit.reproduce.run`)."""
    from rich.markdown import Markdown

    quick = config == QUICK
    console.rule(f"FO17{' (quick)' if quick else ''}: (a) Table 2, n·Var* measured")
    grid = table2_grid(config)
    result = run_grid(grid, seed=seed, n_jobs=jobs, console=console)
    report = table2_report(result.records, config)
    text = table2_markdown(report)
    console.print(Markdown(text))
    console.print(
        f"n = {config.table_n:,} users per run, d = {config.table_domain} where Table 2 does "
        "not fix it. Paper OLH uses real g = e^ε + 1, ours the integer g."
    )
    title = "FO17 Table 2: measured n·Var* of a zero-frequency item"
    save_results(result, out, "fo17_table2", title=title, plot=False)
    reference = _reference(
        report,
        "zero-frequency items",
        "n_var",
        **{"FO17 Table 2": "paper", "analytical": "analytical"},
    )
    path = out / "fo17_table2.png"
    plot_error_vs_epsilon(result, path=path, title=title, reference=reference, panel_size=(5.5, 4))
    (out / "fo17_table2_vs_paper.md").write_text(text, encoding="utf-8")

    console.rule("FO17 (b): full-domain MSE vs epsilon (FO17 section 6.1, Figure 2)")
    datasets = mse_datasets(config, seed)
    grid = mse_grid(config, datasets)
    result = run_grid(grid, seed=seed, n_jobs=jobs, console=console)
    mse = mse_report(result.records, datasets)
    text = mse_markdown(mse)
    console.print(Markdown(text))
    title = f"FO17: full-domain MSE of the unbiased estimate (d = {config.domain})"
    save_results(result, out, "fo17_mse", title=title, plot=False)
    reference = _reference(mse, "", "mse", analytical="analytical")
    plot_error_vs_epsilon(result, path=out / "fo17_mse.png", title=title, reference=reference)
    (out / "fo17_mse_vs_analytical.md").write_text(text, encoding="utf-8")
    ratios = mse["ratio"].to_numpy()
    console.print(
        f"measured / analytical MSE over all {len(ratios)} cells: median "
        f"{float(np.median(ratios)):.3f}, range [{float(ratios.min()):.3f}, "
        f"{float(ratios.max()):.3f}] (each a mean of {config.mse_repetitions} repetitions)"
    )
    return out
