"""Declarative experiments: a grid of methods x epsilons x data sets x repetitions x metrics.

:class:`Grid` declares the experiment; :func:`run_grid` runs it (rich progress bar,
estimated time up front, optional worker processes, one independent seeded stream per
cell) and returns tidy records plus a mean / standard-error summary; :func:`save_results`
writes Parquet, a Markdown table and a PNG in the papers' figure shape
(:func:`~ldpkit.experiments.plots.plot_error_vs_epsilon`); :func:`compare_methods` says
where one method wins, ties or loses against the best of the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import attach

__all__ = [
    "Cell",
    "ExperimentResult",
    "Grid",
    "Method",
    "Metric",
    "cell_seed",
    "default_truth",
    "run_grid",
    "summarize",
    "MechanismMethod",
    "frequency_mse",
    "markdown_table",
    "save_results",
    "timings_markdown",
    "compare_methods",
    "comparison_markdown",
    "method_styles",
    "plot_error_vs_epsilon",
    "save_figure",
    "save_metric_figures",
    "single_threaded_blas",
]

__getattr__, __dir__ = attach(__name__, __file__)

if TYPE_CHECKING:  # what type checkers and IDEs see; runtime imports are lazy (ldpkit._lazy)
    from ._blas import single_threaded_blas
    from .compare import compare_methods, comparison_markdown
    from .grid import (
        Cell,
        ExperimentResult,
        Grid,
        Method,
        Metric,
        cell_seed,
        default_truth,
        run_grid,
        summarize,
    )
    from .methods import MechanismMethod, frequency_mse
    from .plots import method_styles, plot_error_vs_epsilon, save_figure, save_metric_figures
    from .results import markdown_table, save_results, timings_markdown
