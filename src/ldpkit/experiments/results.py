"""Saving experiment results: Parquet (raw), Markdown (table) and PNG (figure)."""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from .plots import as_summary, plot_error_vs_epsilon

__all__ = ["markdown_table", "save_results", "timings_markdown"]


def _fmt(mean: float, sem: float) -> str:
    if not math.isfinite(mean):
        return "n/a"
    text = f"{mean:.3g}"
    if math.isfinite(sem):
        text += f" ± {sem:.2g}"
    return text


def _eps(e: float) -> str:
    return f"ε={e:g}"


def markdown_table(results: Any, *, title: str | None = None) -> str:
    """Return a Markdown report: one table per (metric, data set); rows methods, columns epsilons.

    Each entry is ``mean ± standard error`` over repetitions.

    Examples
    --------
    >>> records = pd.DataFrame({"dataset": "zipf", "method": "GRR", "epsilon": [1.0, 1.0],
    ...                         "repetition": [0, 1], "metric": "mse", "value": [1.0, 3.0]})
    >>> print(markdown_table(records))
    ### mse on zipf
    <BLANKLINE>
    | method | ε=1 |
    |---|---|
    | GRR | 2 ± 1 |
    <BLANKLINE>
    """
    summary = as_summary(results)
    lines: list[str] = [f"# {title}", ""] if title else []
    epsilons = sorted(set(summary["epsilon"]))
    for metric in dict.fromkeys(summary["metric"]):
        for dataset in dict.fromkeys(summary["dataset"]):
            sub = summary[(summary["metric"] == metric) & (summary["dataset"] == dataset)]
            if sub.empty:
                continue
            lines += [f"### {metric} on {dataset}", ""]
            lines.append("| method | " + " | ".join(_eps(e) for e in epsilons) + " |")
            lines.append("|---" * (len(epsilons) + 1) + "|")
            for method in dict.fromkeys(sub["method"]):
                rows = sub[sub["method"] == method].set_index("epsilon")
                cells = [
                    _fmt(float(rows.at[e, "mean"]), float(rows.at[e, "sem"]))
                    if e in rows.index
                    else ""
                    for e in epsilons
                ]
                lines.append(f"| {method} | " + " | ".join(cells) + " |")
            lines.append("")
    return "\n".join(lines)


def timings_markdown(
    timings: Any, heading: str = "## Time per run (seconds, mean over cells)"
) -> list[str]:
    """Markdown lines: mean seconds per cell, one row per method, one column per data set.

    ``timings`` is :attr:`ExperimentResult.timings` (columns method, dataset, seconds).
    """
    table = timings.groupby(["method", "dataset"], sort=False)["seconds"].mean().unstack("dataset")
    cols = list(table.columns)
    lines = [heading, "", "| method | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for method, row in table.iterrows():
        lines.append(f"| {method} | " + " | ".join(f"{row[c]:.3f}" for c in cols) + " |")
    return [*lines, ""]


def _atomic_write(path: Path, write: Any) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def save_results(
    results: Any, outdir: str | Path, name: str, *, title: str | None = None, plot: bool = True
) -> dict[str, Path]:
    """Write ``<name>.parquet``, ``<name>.md``, ``<name>.png`` and ``<name>.pdf`` into ``outdir``.

    Parameters
    ----------
    results : DataFrame or ExperimentResult
        Raw records (preferred: the Parquet file then keeps every repetition) or a summary.
    outdir : str or Path
        Created if missing.
    name : str
        File stem.
    title : str, optional
        Heading of the Markdown file and title of the figure (default ``name``).
    plot : bool
        Also draw :func:`~ldpkit.experiments.plots.plot_error_vs_epsilon`.

    Returns
    -------
    dict
        ``{"parquet": path, "markdown": path, "png": path, "pdf": path}`` (no figures if
        ``plot`` is false).
    """
    if not name or any(ch in name for ch in "/\\"):
        raise ValueError(f"name must be a plain file stem, got {name!r}")
    frame = results.records if hasattr(results, "records") else results
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(
            f"results must be a DataFrame or an ExperimentResult, got {type(results).__name__}"
        )
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    title = title or name
    paths = {"parquet": out / f"{name}.parquet", "markdown": out / f"{name}.md"}
    _atomic_write(paths["parquet"], lambda tmp: frame.to_parquet(tmp, index=False))
    text = markdown_table(frame, title=title)
    _atomic_write(paths["markdown"], lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
    if plot:
        paths["png"] = out / f"{name}.png"
        fig = plot_error_vs_epsilon(frame, title=title)
        paths["pdf"] = out / f"{name}.pdf"
        _atomic_write(paths["png"], lambda tmp: fig.savefig(tmp, dpi=150, format="png"))
        _atomic_write(paths["pdf"], lambda tmp: fig.savefig(tmp, format="pdf"))
    return paths
