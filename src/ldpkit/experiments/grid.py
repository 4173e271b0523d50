"""A declarative experiment grid: methods x epsilons x data sets x repetitions x metrics.

Every *cell* (one data set, one method, one epsilon, one repetition) runs the method once
with its own random stream and scores the result with every metric. Cells are independent,
so they can run in any order and in any process: the records are identical.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import multiprocessing
import os
import pickle
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd

from .._validation import check_epsilon, check_integer
from ._blas import single_threaded_blas

__all__ = [
    "Method",
    "Metric",
    "Cell",
    "Grid",
    "ExperimentResult",
    "cell_seed",
    "default_truth",
    "run_grid",
    "summarize",
]


@runtime_checkable
class Method(Protocol):
    """What the grid runs: ``method(data, epsilon, rng) -> result``.

    ``data`` is the data set object as given to the grid (usually a
    :class:`ldpkit.datasets.Dataset`), ``rng`` a :class:`numpy.random.Generator` private to
    the cell; the method must draw all its randomness from it. A method may declare
    ``cost`` (expected seconds per cell, a number), which replaces the pilot timing.
    """

    def __call__(self, data: Any, epsilon: float, rng: np.random.Generator) -> Any:
        """Run the method on ``data`` at ``epsilon``, drawing from ``rng``; return its result."""


#: ``metric(result, truth) -> float``; ``truth`` is ``grid.truth(data)``.
Metric = Callable[[Any, Any], float]


def default_truth(data: Any) -> Any:
    """Return the ground truth metrics compare against, by default.

    Categorical :class:`~ldpkit.datasets.Dataset`: its ``frequencies``; numerical: its
    ``values``; anything else: ``numpy.asarray(data)``.
    """
    kind = getattr(data, "kind", None)
    if kind == "categorical":
        return data.frequencies
    if kind == "numerical":
        return data.values
    return np.asarray(data)


@dataclasses.dataclass(frozen=True, order=True)
class Cell:
    """Coordinates of one run: data set, method, epsilon and repetition."""

    dataset: str
    method: str
    epsilon: float
    repetition: int


def _key(text: str) -> int:
    # A stable 64-bit integer for a name (Python's hash() is salted per process).
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


def cell_seed(seed: int | np.random.SeedSequence, cell: Cell) -> np.random.SeedSequence:
    """Return the SeedSequence of one cell: a spawned child of ``SeedSequence(seed)``.

    The child's spawn key is ``(key(dataset), key(method), key(repr(epsilon)), repetition)``
    appended to the root's, exactly the node :meth:`numpy.random.SeedSequence.spawn` would
    create at those indices. Keying by *names* rather than positions means a cell's stream
    does not depend on the rest of the grid: adding a method, an epsilon or a data set, or
    running a quick sub-grid, leaves every shared cell's numbers unchanged. Distinct keys give
    independent streams (SeedSequence hashes the whole spawn key).
    """
    root = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    key = (_key(cell.dataset), _key(cell.method), _key(repr(float(cell.epsilon))), cell.repetition)
    return np.random.SeedSequence(
        entropy=root.entropy, spawn_key=(*root.spawn_key, *key), pool_size=root.pool_size
    )


@dataclasses.dataclass(frozen=True, eq=False)
class Grid:
    """The experiment: which methods to run on which data, at which epsilons, how often.

    Parameters
    ----------
    methods : mapping of name -> Method
        ``method(data, epsilon, rng) -> result`` (see :class:`Method`).
    epsilons : sequence of float
        Privacy budgets (each > 0, no duplicates).
    datasets : mapping of name -> data
        The data each method receives (typically :class:`ldpkit.datasets.Dataset`).
    metrics : mapping of name -> Metric
        ``metric(result, truth) -> float``.
    repetitions : int
        Runs per (data set, method, epsilon); each with its own random stream.
    truth : callable, optional
        ``truth(data)``: what metrics compare results against (default
        :func:`default_truth`); computed once per data set.

    Notes
    -----
    For parallel runs the grid is handed to worker processes once (inherited through
    ``fork`` where the platform has it, pickled otherwise), so with a ``spawn`` start
    method the methods, metrics and truth must be picklable (module-level functions or
    dataclass instances, not lambdas).
    """

    methods: Mapping[str, Method]
    epsilons: Sequence[float]
    datasets: Mapping[str, Any]
    metrics: Mapping[str, Metric]
    repetitions: int = 10
    truth: Callable[[Any], Any] = default_truth

    def __post_init__(self) -> None:
        """Validate and normalize the fields."""
        for what in ("methods", "datasets", "metrics"):
            mapping = getattr(self, what)
            if not isinstance(mapping, Mapping) or not mapping:
                raise ValueError(f"{what} must be a non-empty mapping of name -> object")
            bad = [k for k in mapping if not isinstance(k, str)]
            if bad:
                raise TypeError(f"{what} names must be strings, got {bad[0]!r}")
        for name, method in self.methods.items():
            if not callable(method):
                raise TypeError(f"methods[{name!r}] must be callable(data, epsilon, rng)")
        for name, metric in self.metrics.items():
            if not callable(metric):
                raise TypeError(f"metrics[{name!r}] must be callable(result, truth)")
        eps = tuple(check_epsilon(e, "epsilons[i]") for e in self.epsilons)
        if not eps:
            raise ValueError("epsilons must hold at least one privacy budget")
        if len(set(eps)) != len(eps):
            raise ValueError(f"epsilons must be distinct, got {list(eps)}")
        object.__setattr__(self, "epsilons", eps)
        object.__setattr__(self, "methods", dict(self.methods))
        object.__setattr__(self, "datasets", dict(self.datasets))
        object.__setattr__(self, "metrics", dict(self.metrics))
        object.__setattr__(
            self, "repetitions", check_integer(self.repetitions, "repetitions", low=1)
        )

    def cells(self) -> list[Cell]:
        """All cells in canonical order: data set, method, epsilon, repetition."""
        return [
            Cell(d, m, e, r)
            for d in self.datasets
            for m in self.methods
            for e in self.epsilons
            for r in range(self.repetitions)
        ]

    @property
    def n_cells(self) -> int:
        """Number of runs: data sets x methods x epsilons x repetitions."""
        return len(self.datasets) * len(self.methods) * len(self.epsilons) * self.repetitions

    def run(self, **kwargs: Any) -> ExperimentResult:
        """Shorthand for :func:`run_grid(self, **kwargs) <run_grid>`."""
        return run_grid(self, **kwargs)


# ---- executing cells ------------------------------------------------------------------------
_CellOutput = tuple[Cell, tuple[float, ...], float]


class _Runner:
    """Runs cells of one grid; caches each data set's truth (computed once per process)."""

    def __init__(self, grid: Grid, seed: int | np.random.SeedSequence) -> None:
        self.grid = grid
        self.seed = seed
        self._truth: dict[str, Any] = {}

    def truth(self, dataset: str) -> Any:
        if dataset not in self._truth:
            self._truth[dataset] = self.grid.truth(self.grid.datasets[dataset])
        return self._truth[dataset]

    def run(self, cell: Cell) -> _CellOutput:
        grid = self.grid
        data = grid.datasets[cell.dataset]
        truth = self.truth(cell.dataset)
        rng = np.random.default_rng(cell_seed(self.seed, cell))
        try:
            start = time.perf_counter()
            result = grid.methods[cell.method](data, cell.epsilon, rng)
            elapsed = time.perf_counter() - start
            scores = tuple(float(metric(result, truth)) for metric in grid.metrics.values())
        except Exception as exc:
            exc.add_note(f"while running {cell}")
            raise
        return cell, scores, elapsed


_WORKER: _Runner | None = None


def _init_worker(grid: Grid | str, seed: int | np.random.SeedSequence) -> None:
    global _WORKER
    if isinstance(grid, str):  # path of the pickled grid (non-fork start methods)
        with open(grid, "rb") as fh:
            grid = pickle.load(fh)
    assert isinstance(grid, Grid)
    _WORKER = _Runner(grid, seed)


def _run_batch(cells: list[Cell]) -> list[_CellOutput]:
    assert _WORKER is not None, "worker not initialised"
    return [_WORKER.run(cell) for cell in cells]


def _noop() -> None:
    return None


def _batches(cells: list[Cell], size: int) -> Iterator[list[Cell]]:
    for i in range(0, len(cells), size):
        yield cells[i : i + size]


# ---- results ----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False)
class ExperimentResult:
    """What :func:`run_grid` returns.

    Attributes
    ----------
    records : pandas.DataFrame
        Tidy raw records, one row per (cell, metric): ``dataset``, ``method``, ``epsilon``,
        ``repetition``, ``metric``, ``value``; in canonical grid order. Deterministic: the
        same grid and seed give an identical frame, serial or parallel.
    timings : pandas.DataFrame
        Wall time of each cell's method call (``dataset``, ``method``, ``epsilon``,
        ``repetition``, ``seconds``); not deterministic, hence kept apart.
    seed : int or SeedSequence
        The root seed.
    estimated_seconds : float or None
        The up-front estimate of the total (serial) running time.
    """

    records: pd.DataFrame
    timings: pd.DataFrame
    seed: Any
    estimated_seconds: float | None = None

    @property
    def summary(self) -> pd.DataFrame:
        """Mean and standard error per (data set, method, epsilon, metric)."""
        return summarize(self.records)


def summarize(records: pd.DataFrame) -> pd.DataFrame:
    """Mean, standard deviation, standard error and count of ``value`` per cell group.

    Groups by ``dataset``, ``method``, ``epsilon``, ``metric`` in order of first appearance.
    ``std`` uses ``ddof=1``; ``sem = std / sqrt(count)`` (NaN with a single repetition).
    """
    keys = ["dataset", "method", "epsilon", "metric"]
    missing = [c for c in [*keys, "value"] if c not in records.columns]
    if missing:
        raise ValueError(f"records must have columns {[*keys, 'value']}, missing {missing}")
    grouped = records.groupby(keys, sort=False)["value"]
    out = grouped.agg(["mean", "std", "count"]).reset_index()
    out["sem"] = out["std"] / np.sqrt(out["count"].to_numpy(dtype=np.float64))
    return out[[*keys, "mean", "sem", "std", "count"]]


def _records(grid: Grid, outputs: dict[Cell, _CellOutput]) -> tuple[pd.DataFrame, pd.DataFrame]:
    cells = grid.cells()
    metric_names = list(grid.metrics)
    k = len(metric_names)
    scores = np.array([outputs[c][1] for c in cells], dtype=np.float64).reshape(len(cells), k)
    base = pd.DataFrame(
        {
            "dataset": [c.dataset for c in cells],
            "method": [c.method for c in cells],
            "epsilon": np.array([c.epsilon for c in cells], dtype=np.float64),
            "repetition": np.array([c.repetition for c in cells], dtype=np.int64),
        }
    )
    records = base.loc[base.index.repeat(k)].reset_index(drop=True)
    records["metric"] = metric_names * len(cells)
    records["value"] = scores.reshape(-1)
    timings = base.copy()
    timings["seconds"] = np.array([outputs[c][2] for c in cells], dtype=np.float64)
    return records, timings


# ---- the driver -------------------------------------------------------------------------------
def _format_seconds(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def _pilot_cells(grid: Grid) -> list[Cell]:
    # One cell per (data set, method) whose method declares no cost: the first epsilon,
    # repetition 0. Pilots are real cells; their results are kept.
    return [
        Cell(d, m, grid.epsilons[0], 0)
        for d in grid.datasets
        for m, method in grid.methods.items()
        if not isinstance(getattr(method, "cost", None), (int, float))
    ]


def _estimate(grid: Grid, pilots: dict[Cell, _CellOutput]) -> float:
    per_combo = len(grid.epsilons) * grid.repetitions
    total = 0.0
    for d in grid.datasets:
        for m, method in grid.methods.items():
            cost = getattr(method, "cost", None)
            if isinstance(cost, (int, float)):
                total += float(cost) * per_combo
            else:
                total += pilots[Cell(d, m, grid.epsilons[0], 0)][2] * per_combo
    return total


def _broken(start_method: str) -> RuntimeError:
    return RuntimeError(
        f"a worker process ({start_method} start method) died or could not load the grid; "
        "with a start method other than 'fork', methods, metrics and truth must be "
        "picklable and importable by a fresh Python process (module-level functions or "
        "classes of an importable module)"
    )


def _mp_context(start_method: str | None) -> multiprocessing.context.BaseContext:
    if start_method is None:
        methods = multiprocessing.get_all_start_methods()
        # fork lets workers inherit the grid (no pickling; lambdas allowed) and starts fast
        start_method = "fork" if "fork" in methods else methods[0]
    return multiprocessing.get_context(start_method)


def run_grid(
    grid: Grid,
    *,
    seed: int | np.random.SeedSequence = 0,
    n_jobs: int = 1,
    progress: bool = True,
    console: Any = None,
    start_method: str | None = None,
    estimate: bool = True,
) -> ExperimentResult:
    """Run every cell of ``grid`` and return tidy records.

    Parameters
    ----------
    grid : Grid
    seed : int or SeedSequence
        Root of every cell's random stream (:func:`cell_seed`). Same seed, same records.
    n_jobs : int
        Worker processes (1 = run in this process). Records do not depend on it.
    progress : bool
        Show a rich progress bar and print the estimated total time up front.
    console : rich.console.Console, optional
        Where to draw (default: a console on stderr).
    start_method : str, optional
        multiprocessing start method for ``n_jobs > 1`` (default ``fork`` where available).
    estimate : bool
        Time one pilot cell per (data set, method) first (methods with a declared ``cost``
        need none) and report the estimated total; the pilots' results are kept.

    Notes
    -----
    BLAS runs single-threaded while the grid runs (:func:`single_threaded_blas`; forked
    workers inherit it): cells do small dense algebra, where threads only spin, and the
    parallelism comes from ``n_jobs``.

    Returns
    -------
    ExperimentResult
        ``records`` (raw, one row per cell and metric), ``summary`` (mean and standard
        error), ``timings``.

    Examples
    --------
    >>> import numpy as np
    >>> from ldpkit import GRR
    >>> from ldpkit.datasets import zipf
    >>> from ldpkit.experiments import Grid, MechanismMethod, frequency_mse
    >>> grid = Grid(methods={"GRR": MechanismMethod(GRR)}, epsilons=[1.0, 4.0],
    ...             datasets={"zipf": zipf(s=1.1, d=16, n=2000, rng=0)},
    ...             metrics={"mse": frequency_mse}, repetitions=3)
    >>> result = run_grid(grid, seed=0, progress=False)
    >>> result.records.shape
    (6, 6)
    >>> list(result.summary.columns)
    ['dataset', 'method', 'epsilon', 'metric', 'mean', 'sem', 'std', 'count']
    """
    if not isinstance(grid, Grid):
        raise TypeError(f"grid must be a Grid, got {type(grid).__name__}")
    n_jobs = check_integer(n_jobs, "n_jobs", low=1)
    if not isinstance(seed, np.random.SeedSequence):
        seed = check_integer(seed, "seed", low=0)
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    console = console if console is not None else Console(stderr=True)
    cells = grid.cells()
    outputs: dict[Cell, _CellOutput] = {}
    runner = _Runner(grid, seed)
    pool: ProcessPoolExecutor | None = None
    grid_file: str | None = None
    blas = single_threaded_blas()
    blas.__enter__()
    try:
        if n_jobs > 1:
            context = _mp_context(start_method)
            shipped: Grid | str = grid
            if context.get_start_method() != "fork":
                # Hand the grid over in a file: a large object in the worker's start-up
                # arguments can block the parent forever if the worker dies unpickling it.
                fd, grid_file = tempfile.mkstemp(prefix="ldpkit-grid-", suffix=".pkl")
                with os.fdopen(fd, "wb") as fh:
                    pickle.dump(grid, fh, protocol=pickle.HIGHEST_PROTOCOL)
                shipped = grid_file
            pool = ProcessPoolExecutor(
                max_workers=n_jobs,
                mp_context=context,
                initializer=_init_worker,
                initargs=(shipped, seed),
            )
            # start the workers now, before this process runs pilots or draws progress
            # (forking after threads have started is unsafe)
            try:
                pool.submit(_noop).result()
            except BrokenProcessPool as exc:
                raise _broken(context.get_start_method()) from exc

        estimated: float | None = None
        if estimate:
            for cell in _pilot_cells(grid):
                outputs[cell] = runner.run(cell)
            estimated = _estimate(grid, outputs)
            if progress:
                par = (
                    f", about {_format_seconds(estimated / n_jobs)} on {n_jobs} workers"
                    if n_jobs > 1
                    else ""
                )
                console.print(
                    f"[bold]Grid[/bold]: {len(grid.datasets)} data sets x {len(grid.methods)} "
                    f"methods x {len(grid.epsilons)} epsilons x {grid.repetitions} repetitions = "
                    f"{len(cells)} cells; estimated {_format_seconds(estimated)} of compute{par}"
                )

        todo = [c for c in cells if c not in outputs]
        columns = (
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
        )
        with Progress(*columns, console=console, disable=not progress) as bar:
            task = bar.add_task("cells", total=len(cells), completed=len(outputs))
            if pool is None:
                for cell in todo:
                    outputs[cell] = runner.run(cell)
                    bar.advance(task)
            else:
                size = max(1, math.ceil(len(todo) / (n_jobs * 16)))
                futures = [pool.submit(_run_batch, batch) for batch in _batches(todo, size)]
                for future in as_completed(futures):
                    try:
                        batch_out = future.result()
                    except BrokenProcessPool as exc:
                        raise _broken(_mp_context(start_method).get_start_method()) from exc
                    for out in batch_out:
                        outputs[out[0]] = out
                    bar.advance(task, len(batch_out))
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        if grid_file is not None:
            os.unlink(grid_file)
        blas.__exit__(None, None, None)

    records, timings = _records(grid, outputs)
    return ExperimentResult(
        records=records, timings=timings, seed=seed, estimated_seconds=estimated
    )
