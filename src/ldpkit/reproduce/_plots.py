"""Figure helpers shared by the reproductions: many methods on one panel, still readable."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from matplotlib.container import ErrorbarContainer
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from ..experiments.plots import plot_error_vs_epsilon

__all__ = ["PALETTE", "readable", "save_figure"]

#: Distinct colours for up to 14 lines (tab10, then black and three dark extras), so no two
#: methods of one panel share a colour (matplotlib's default cycle repeats after 10).
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


def readable(
    fig: Figure, *, colours: Mapping[str, str] | None = None, legend_width: float = 1.9
) -> Figure:
    """Give every method one colour across panels and move the legend beside the panels.

    ``fig`` is a figure from :func:`~ldpkit.experiments.plots.plot_error_vs_epsilon`
    (one error-bar container per method and panel, labelled with the method's name). The
    figure is widened by ``legend_width`` inches for a single legend on the right, so the
    legend never covers data. ``colours`` fixes label -> colour (to match several
    figures); other labels take the next unused colours of :data:`PALETTE`. Log axes
    spanning a decade or more lose their minor tick labels.
    """
    fixed = dict(colours or {})
    colours_: dict[str, str] = {}
    handles: dict[str, Any] = {}
    for ax in fig.axes:
        if ax.get_yscale() == "log":
            low, high = ax.get_ylim()
            if low > 0 and high / low >= 10:
                ax.yaxis.set_minor_formatter(NullFormatter())
        for container in ax.containers:
            if not isinstance(container, ErrorbarContainer):
                continue
            label = str(container.get_label())
            if label not in colours_:
                free = [
                    c for c in PALETTE if c not in fixed.values() and c not in colours_.values()
                ]
                colours_[label] = fixed.get(label) or (free[0] if free else PALETTE[0])
            colour = colours_[label]
            line, caps, bars = container.lines
            if line is not None:
                line.set_color(colour)
            for cap in caps:
                cap.set_color(colour)
            for bar in bars:
                bar.set_color(colour)
            handles.setdefault(label, container)
        legend = ax.get_legend()
        if legend is not None:
            legend.remove()
    width, height = fig.get_size_inches()
    fig.set_size_inches(width + legend_width, height)
    # leave room for the suptitle (0.5 in) and the legend column
    top = 1.0 - 0.5 / height if fig.get_suptitle() else 1.0
    fig.tight_layout(rect=(0.0, 0.0, width / (width + legend_width), top))
    fig.legend(
        list(handles.values()),
        list(handles),
        loc="upper right",
        bbox_to_anchor=(1.0, top),
        fontsize=9,
        frameon=False,
    )
    return fig


def save_figure(
    results: Any,
    path: Path,
    *,
    title: str,
    colours: Mapping[str, str] | None = None,
    **kwargs: Any,
) -> Path:
    """:func:`plot_error_vs_epsilon` made :func:`readable`, saved as PNG (150 dpi)."""
    fig = readable(plot_error_vs_epsilon(results, title=title, **kwargs), colours=colours)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=150, format="png")
    return path
