"""Which method wins: one comparison, one ratio convention, for every experiment.

:func:`compare_methods` sets one method against the best of the others in every setting
(by default each data set, metric and epsilon); :func:`comparison_markdown` prints where it
wins, ties and loses. The ratio is always ``error / best_error``: below 1 where the method
is more accurate than every other.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = ["compare_methods", "comparison_markdown"]

_COLUMNS = ["error", "sem", "best", "best_error", "ratio", "gap_se", "outcome", "lowest"]


def compare_methods(
    records: pd.DataFrame,
    method: str,
    against: Sequence[str] | None = None,
    *,
    by: Sequence[str] = ("dataset", "metric", "epsilon"),
    z: float = 2.0,
    paired: bool = False,
) -> pd.DataFrame:
    """Compare ``method`` against the most accurate of ``against`` in every setting.

    Parameters
    ----------
    records : DataFrame
        Tidy records: the ``by`` columns, ``method``, ``value`` (lower is better) and, when
        ``paired``, ``repetition``. Rows with a NaN value are ignored (a method that does not
        answer a metric does not compete on it).
    method : str
        The method under test.
    against : sequence of str, optional
        Its competitors (default: every other method of the setting).
    by : sequence of str
        The columns that define a setting.
    z : float
        Width of the tie band in standard errors of the difference.
    paired : bool
        Whether all methods were scored on the same runs, repetition by repetition (e.g.
        post-processings of one estimate): then the standard error of the difference is
        that of the per-repetition differences, otherwise ``sqrt(sem_a^2 + sem_b^2)``.

    Returns
    -------
    DataFrame
        One row per setting where both sides have a value: the ``by`` columns, ``error``
        and ``sem`` (the method's mean and standard error), ``best`` (the competitor with
        the lowest mean), ``best_error``, ``ratio = error / best_error`` (< 1: the method is
        more accurate), ``gap_se`` (standard error of the difference), ``outcome``
        (``"win"``: lower by more than ``z * gap_se``; ``"loss"``: higher by more than that;
        else ``"tie"``) and ``lowest`` (``error < best_error``).

    Examples
    --------
    >>> r = pd.DataFrame({"dataset": "d", "metric": "MSE", "epsilon": 1.0,
    ...                   "method": ["A", "A", "B", "B", "C", "C"],
    ...                   "value": [1.0, 1.2, 3.0, 3.2, 2.0, 2.2]})
    >>> row = compare_methods(r, "A").iloc[0]
    >>> row.best, row.outcome, round(float(row.ratio), 3)
    ('C', 'win', 0.524)
    """
    by = list(by)
    frame = records.dropna(subset=["value"])
    stats = frame.groupby([*by, "method"], sort=False)["value"].agg(["mean", "std", "count"])
    stats["sem"] = stats["std"] / np.sqrt(stats["count"].to_numpy(dtype=np.float64))
    per_rep = (
        frame.set_index([*by, "method", "repetition"])["value"].sort_index() if paired else None
    )
    rows = []
    for key, group in stats.groupby(level=by, sort=False):
        group = group.droplevel(by)
        others = group.drop(index=method, errors="ignore")
        if against is not None:
            others = others[others.index.isin(list(against))]
        if method not in group.index or others.empty:
            continue
        err, sem = float(group.at[method, "mean"]), float(np.nan_to_num(group.at[method, "sem"]))
        best = str(others["mean"].idxmin())
        best_err = float(others.at[best, "mean"])
        if per_rep is not None:
            key_t = key if isinstance(key, tuple) else (key,)
            diff = (per_rep.loc[(*key_t, method)] - per_rep.loc[(*key_t, best)]).dropna()
            gap_se = float(diff.std(ddof=1) / math.sqrt(diff.size)) if diff.size > 1 else 0.0
        else:
            gap_se = math.hypot(sem, float(np.nan_to_num(others.at[best, "sem"])))
        margin = z * gap_se
        outcome = "win" if err < best_err - margin else "loss" if err > best_err + margin else "tie"
        ratio = err / best_err if best_err > 0 else math.inf
        setting = key if isinstance(key, tuple) else (key,)
        rows.append((*setting, err, sem, best, best_err, ratio, gap_se, outcome, err < best_err))
    return pd.DataFrame(rows, columns=[*by, *_COLUMNS])


def comparison_markdown(cells: pd.DataFrame, method: str) -> str:
    """Return a Markdown table of :func:`compare_methods` (settings by data set and metric).

    Per (data set, metric): the epsilons where ``method`` wins (with its ratio), ties, and
    loses (to whom, with its ratio), then one sentence with the counts. Ratio ``×r``:
    ``method``'s mean error is ``r`` times the best competitor's.
    """
    lines = [
        f"| data set | metric | {method} wins at ε (×ratio) | tie at ε | loses at ε (to, ×ratio) |",
        "|---|---|---|---|---|",
    ]

    def listed(rows: pd.DataFrame, to: bool) -> str:
        return (
            ", ".join(
                f"{r.epsilon:g} ({r.best + ', ' if to else ''}×{r.ratio:.2f})"
                for r in rows.itertuples()
            )
            or "-"
        )

    for (dataset, metric), g in cells.groupby(["dataset", "metric"], sort=False):
        tied = ", ".join(f"{e:g}" for e in g[g["outcome"] == "tie"]["epsilon"]) or "-"
        won, lost = g[g["outcome"] == "win"], g[g["outcome"] == "loss"]
        lines.append(
            f"| {dataset} | {metric} | {listed(won, False)} | {tied} | {listed(lost, True)} |"
        )
    counts = cells["outcome"].value_counts()
    lines += [
        "",
        f"{method}: wins {counts.get('win', 0)}, ties {counts.get('tie', 0)}, loses "
        f"{counts.get('loss', 0)} of {len(cells)} (data set, metric, ε) cells against the best "
        f"competitor (win/loss: means apart by more than two standard errors); lowest mean "
        f"error in {int(cells['lowest'].sum())}. ×ratio = {method}'s mean error / the best "
        "competitor's.",
    ]
    return "\n".join(lines)
