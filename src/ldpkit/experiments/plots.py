"""Figures in the papers' shape: error vs epsilon, one line per method, one panel per data set.

One palette and one style table for every figure ldpkit draws: each method gets a colour,
a marker and a line style (so lines stay apart in grey-scale print too), the same in
every figure of a run; the legend sits right of the panels, never on the data; measured
values carry standard-error bars, and known reference values (a paper's table, the
analytical expectation) can be overlaid. Drawn on :class:`matplotlib.figure.Figure` with
the Agg canvas directly, so importing this module neither needs a display nor changes
pyplot's global backend.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import NullFormatter

from .grid import summarize

__all__ = [
    "PALETTE",
    "Style",
    "method_styles",
    "axis_label",
    "errorbar_line",
    "as_summary",
    "plot_error_vs_epsilon",
    "save_figure",
    "save_metric_figures",
]

#: Distinct colours for up to 14 lines (tab10, then black and three dark extras).
PALETTE: tuple[str, ...] = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
    "#000000",
    "#393b79",
    "#843c39",
    "#637939",
)
_MARKERS = "osD^vP*Xh<>p"
# dotted lines are kept for the analytical overlays; the fourth style is dash-dot-dot
_LINESTYLES: tuple[Any, ...] = ("-", "--", "-.", (0, (4, 1.5, 1, 1.5, 1, 1.5)))

#: Axis labels in words and symbols for the metric names the reproductions use.
AXIS_LABELS: dict[str, str] = {
    "mse": "mean squared error (MSE)",
    "MSE": "mean squared error (MSE)",
    "MAE": "mean absolute error (MAE)",
    "MMSE": "mean squared error / range length² (MMSE)",
    "MMAE": "mean absolute error / range length (MMAE)",
    "W1": "Wasserstein-1 distance (W₁)",
    "KS": "Kolmogorov-Smirnov distance (KS)",
    "n_var": "n · Var* of a zero-frequency item",
    "mean": "absolute error of the mean",
    "variance": "absolute error of the variance",
    "quantiles": "mean abs. error of the deciles",
}


def axis_label(metric: str) -> str:
    """Return the y-axis label of ``metric`` (``"range 0.1"`` -> MAE at α = 0.1)."""
    if metric.startswith("range "):
        return f"range-query MAE (α = {metric.split(' ', 1)[1]})"
    if metric.startswith("set_"):
        return f"MSE of set queries (ρ = {metric[4:]} %)"
    if metric.startswith("top_"):
        return f"MSE of the top-{metric[4:]} items"
    if metric == "full":
        return "full-domain MSE"
    return AXIS_LABELS.get(metric, metric)


class Style(NamedTuple):
    """How one method is drawn."""

    colour: str
    marker: str
    linestyle: Any


def method_styles(methods: Sequence[str]) -> dict[str, Style]:
    """Return one :class:`Style` per method, by position.

    Colour, marker and line style all differ between any two of the first 12 methods (and
    colours between the first 14).
    """
    return {
        m: Style(
            PALETTE[i % len(PALETTE)],
            _MARKERS[i % len(_MARKERS)],
            _LINESTYLES[i % len(_LINESTYLES)],
        )
        for i, m in enumerate(dict.fromkeys(methods))
    }


def as_summary(frame: Any) -> pd.DataFrame:
    """Return a summary frame (``mean``/``sem`` columns) from records, a summary or a result."""
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
    styles: Mapping[str, Style] | None = None,
    reference: pd.DataFrame | None = None,
    xlabel: str = "privacy budget ε",
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
        Where to save the figure (:func:`save_figure`: PNG, and PDF beside it).
    title : str, optional
        Figure title.
    logy : bool, optional
        Log-scale error axis; default True unless some mean is <= 0.
    logx : bool, optional
        Log-scale epsilon axis; default True when the largest epsilon is more than 10 times
        the smallest.
    styles : mapping of method -> Style, optional
        Fixed styles (to match several figures); default :func:`method_styles` in order
        of appearance.
    reference : DataFrame, optional
        Known values to overlay: columns ``dataset``, ``metric``, ``method``, ``epsilon``,
        ``value`` and ``source`` (e.g. ``"analytical"``: drawn as a thin dotted line in
        the method's colour; any other source, e.g. a paper's table: hollow squares).
    xlabel : str
        Label of the epsilon axis.

    Returns
    -------
    matplotlib.figure.Figure

    Notes
    -----
    Error bars are +- one standard error of the mean over repetitions. On a log axis a bar
    reaching below zero cannot be drawn; its lower end is cut at 1 % of the mean (the
    upper end is exact). One legend for the whole figure, right of the panels.
    """
    summary = as_summary(results)
    metrics = list(dict.fromkeys(summary["metric"]))
    if metric is not None:
        wanted = [metric] if isinstance(metric, str) else list(metric)
        unknown = [m for m in wanted if m not in metrics]
        if unknown:
            raise ValueError(f"metric must be one of {metrics}, got {unknown[0]!r}")
        metrics = wanted
    summary = summary[summary["metric"].isin(metrics)]
    datasets = list(dict.fromkeys(summary["dataset"]))
    methods = list(dict.fromkeys(summary["method"]))
    style = dict(method_styles(methods))
    style.update(styles or {})
    eps_all = summary["epsilon"].to_numpy(dtype=np.float64)
    if logx is None:
        logx = bool(eps_all.min() > 0 and eps_all.max() / eps_all.min() > 10)
    eps_ticks = sorted(set(eps_all.tolist()))

    w, h = panel_size
    fig = Figure(figsize=(w * len(datasets), h * len(metrics) + (0.4 if title else 0.0)))
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(metrics), len(datasets), squeeze=False)
    handles: dict[str, Any] = {}
    for row, met in enumerate(metrics):
        sub_metric = summary[summary["metric"] == met]
        row_log = logy if logy is not None else bool((sub_metric["mean"] > 0).all())
        for col, dataset in enumerate(datasets):
            ax = axes[row][col]
            sub = sub_metric[sub_metric["dataset"] == dataset]
            for method in methods:
                line = sub[sub["method"] == method].sort_values("epsilon")
                if line.empty:
                    continue
                s = style[method]
                x = line["epsilon"].to_numpy(dtype=np.float64)
                y = line["mean"].to_numpy(dtype=np.float64)
                handles[method] = errorbar_line(ax, x, y, line["sem"], s, log=row_log)
            if reference is not None:
                _overlay(ax, reference, dataset, met, style, handles)
            if row_log:
                ax.set_yscale("log")
                low, high = ax.get_ylim()
                if low > 0 and high / low >= 10:
                    ax.yaxis.set_minor_formatter(NullFormatter())
            if logx:
                ax.set_xscale("log")
            if len(eps_ticks) <= 10:
                # label the epsilons actually run, as the papers do; no crowded minor labels
                ax.set_xticks(eps_ticks, [f"{e:g}" for e in eps_ticks])
                ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_xlabel(xlabel)
            ax.set_ylabel(axis_label(met))
            ax.set_title(dataset if len(metrics) == 1 else f"{dataset}: {met}", fontsize=10)
            ax.grid(True, which="major", alpha=0.3)
    _legend_beside(fig, handles, title)
    if path is not None:
        save_figure(fig, path)
    return fig


def errorbar_line(
    ax: Any, x: Any, y: np.ndarray, sem: Any, style: Style, *, log: bool, size: float = 4.5
) -> Any:
    """Draw means ``y`` with +- ``sem`` bars in ``style``.

    On a log axis a bar reaching below zero is cut at 1 % of the mean.
    """
    err = np.nan_to_num(np.asarray(sem, dtype=np.float64), nan=0.0)
    lower = np.minimum(err, 0.99 * np.abs(y)) if log else err
    return ax.errorbar(
        x,
        y,
        yerr=np.vstack([lower, err]),
        color=style.colour,
        marker=style.marker,
        linestyle=style.linestyle,
        markersize=size,
        capsize=2.5,
        linewidth=1.3,
    )


def _overlay(
    ax: Any,
    reference: pd.DataFrame,
    dataset: str,
    metric: str,
    style: Mapping[str, Style],
    handles: dict[str, Any],
) -> None:
    ref = reference[(reference["dataset"] == dataset) & (reference["metric"] == metric)]
    for (source, method), line in ref.groupby(["source", "method"], sort=False):
        if method not in style:
            continue
        line = line.sort_values("epsilon")
        x, y = line["epsilon"].to_numpy(np.float64), line["value"].to_numpy(np.float64)
        colour = style[method].colour
        if source == "analytical":
            ax.plot(x, y, color=colour, linestyle=":", linewidth=1.0, alpha=0.9)
            handles.setdefault(
                "analytical (dotted)", Line2D([], [], color="black", linestyle=":", linewidth=1.0)
            )
        else:
            ax.plot(x, y, linestyle="none", marker="s", markersize=8, mfc="none", mec=colour)
            handles.setdefault(
                f"{source} (hollow square)",
                Line2D([], [], linestyle="none", marker="s", markersize=8, mfc="none", mec="black"),
            )


def _legend_beside(fig: Figure, handles: Mapping[str, Any], title: str | None) -> None:
    """Widen the figure and put one legend right of the panels (it never covers data)."""
    longest = max((len(label) for label in handles), default=0)
    extra = min(3.5, 0.6 + 0.075 * longest)
    width, height = fig.get_size_inches()
    fig.set_size_inches(width + extra, height)
    top = 1.0 - 0.45 / height if title else 1.0
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0.0, 0.0, width / (width + extra), top))
    if handles:
        fig.legend(
            list(handles.values()),
            list(handles),
            loc="upper left",
            bbox_to_anchor=(width / (width + extra), top),
            fontsize=8.5,
            frameon=False,
        )


def save_figure(fig: Figure, path: str | Path, *, dpi: int = 150) -> Path:
    """Save ``fig`` as PNG at ``path`` (suffix ``.png``) and as PDF beside it."""
    path = Path(path).with_suffix(".png")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, format="png")
    fig.savefig(path.with_suffix(".pdf"), format="pdf")
    return path


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-." else "-" for ch in text.lower()).strip("-")


def save_metric_figures(
    records: pd.DataFrame,
    outdir: str | Path,
    stem: str,
    titles: Mapping[str, str] | None = None,
    **kwargs: Any,
) -> dict[str, Path]:
    """One figure per metric, ``<stem>-<metric>.png`` (and ``.pdf``); returns ``{metric: path}``.

    Rows with a NaN value (a method that does not answer a metric) are left out of that
    metric's figure; each method keeps its style in every figure. ``kwargs`` go to
    :func:`plot_error_vs_epsilon`.
    """
    frame = records.dropna(subset=["value"])
    kwargs.setdefault("styles", method_styles(list(records["method"])))
    paths: dict[str, Path] = {}
    for metric in dict.fromkeys(frame["metric"]):
        path = Path(outdir) / f"{stem}-{_slug(metric)}.png"
        plot_error_vs_epsilon(
            frame[frame["metric"] == metric],
            metric,
            title=(titles or {}).get(metric, metric),
            path=path,
            **kwargs,
        )
        paths[metric] = path
    return paths
