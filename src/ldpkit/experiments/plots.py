"""Figures in the papers' shape: error vs epsilon, one line per method, one panel per data set.

Drawn on :class:`matplotlib.figure.Figure` with the Agg canvas directly, so importing this
module neither needs a display nor changes pyplot's global backend.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from .grid import summarize

__all__ = ["plot_error_vs_epsilon", "as_summary"]

_MARKERS = "osD^vP*Xh<>p"


def as_summary(frame: Any) -> pd.DataFrame:
    """A summary frame (``mean``/``sem`` columns) from records, a summary or a result."""
    if hasattr(frame, "records") and hasattr(frame, "summary"):
        return frame.summary
    if "mean" in frame.columns:
        return frame
    return summarize(frame)


def plot_error_vs_epsilon(
    results: Any,
    metric: str | list[str] | None = None,
    *,
    path: str | Path | None = None,
    title: str | None = None,
    logy: bool | None = None,
    logx: bool | None = None,
    panel_size: tuple[float, float] = (4.0, 3.2),
) -> Figure:
    """Plot the mean error against epsilon with standard-error bars.

    One panel per data set (columns) and metric (rows); in each, one line per method.

    Parameters
    ----------
    results : DataFrame or ExperimentResult
        Raw records (summarized here), a :func:`summarize` frame or a run's result.
    metric : str or list of str, optional
        Metrics to draw (default: all, in order of appearance).
    path : str or Path, optional
        Where to save the figure (PNG at 150 dpi); parent directories are created.
    title : str, optional
        Figure title.
    logy : bool, optional
        Log-scale error axis; default True unless some mean is <= 0.
    logx : bool, optional
        Log-scale epsilon axis; default True when the largest epsilon is more than 10 times
        the smallest.

    Returns
    -------
    matplotlib.figure.Figure

    Notes
    -----
    Error bars are +- one standard error of the mean over repetitions. On a log axis a bar
    reaching below zero cannot be drawn; its lower end is cut at 1 % of the mean (the
    upper end is exact).
    """
    summary = as_summary(results)
    metrics = list(dict.fromkeys(summary["metric"]))
    if metric is not None:
        wanted = [metric] if isinstance(metric, str) else list(metric)
        unknown = [m for m in wanted if m not in metrics]
        if unknown:
            raise ValueError(f"metric must be one of {metrics}, got {unknown[0]!r}")
        metrics = wanted
    datasets = list(dict.fromkeys(summary["dataset"]))
    methods = list(dict.fromkeys(summary["method"]))
    eps_all = summary["epsilon"].to_numpy(dtype=np.float64)
    if logx is None:
        logx = bool(eps_all.min() > 0 and eps_all.max() / eps_all.min() > 10)
    eps_ticks = sorted(set(eps_all.tolist()))

    w, h = panel_size
    fig = Figure(figsize=(w * len(datasets), h * len(metrics) + (0.4 if title else 0.0)))
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(metrics), len(datasets), squeeze=False)
    for row, met in enumerate(metrics):
        sub_metric = summary[summary["metric"] == met]
        row_log = logy if logy is not None else bool((sub_metric["mean"] > 0).all())
        for col, dataset in enumerate(datasets):
            ax = axes[row][col]
            sub = sub_metric[sub_metric["dataset"] == dataset]
            for i, method in enumerate(methods):
                line = sub[sub["method"] == method].sort_values("epsilon")
                if line.empty:
                    continue
                x = line["epsilon"].to_numpy(dtype=np.float64)
                y = line["mean"].to_numpy(dtype=np.float64)
                err = np.nan_to_num(line["sem"].to_numpy(dtype=np.float64), nan=0.0)
                lower = np.minimum(err, 0.99 * np.abs(y)) if row_log else err
                ax.errorbar(
                    x,
                    y,
                    yerr=np.vstack([lower, err]),
                    marker=_MARKERS[i % len(_MARKERS)],
                    markersize=4,
                    capsize=3,
                    linewidth=1.2,
                    label=method,
                )
            if row_log:
                ax.set_yscale("log")
            if logx:
                ax.set_xscale("log")
            if len(eps_ticks) <= 10:
                # label the epsilons actually run, as the papers do; no crowded minor labels
                ax.set_xticks(eps_ticks, [f"{e:g}" for e in eps_ticks])
                ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_xlabel("epsilon")
            ax.set_ylabel(met)
            ax.set_title(dataset if len(metrics) == 1 else f"{dataset}: {met}", fontsize=10)
            ax.grid(True, which="major", alpha=0.3)
    axes[0][0].legend(fontsize=8, frameon=False)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    if path is not None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=150)
    return fig
