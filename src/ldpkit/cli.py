"""The ``ldpkit`` command line: a thin typer app over the library."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Local differential privacy toolkit.")
console = Console()


def _top_names(k: int) -> tuple[np.ndarray, np.ndarray]:
    from .datasets import babynames

    data = babynames(top=k)
    return np.asarray(data.labels), np.asarray(data.counts)


@app.command()
def demo(
    users: Annotated[int, typer.Option(help="Number of simulated users (one per sampled birth).")] = 1_000_000,
    names: Annotated[int, typer.Option(help="Domain: the most common names.")] = 1024,
    epsilon: Annotated[float, typer.Option(help="Privacy budget per user.")] = 1.0,
    seed: Annotated[int, typer.Option(help="Seed of the simulation.")] = 0,
    out: Annotated[Path, typer.Option(help="Where to write plots.")] = Path("results/demo"),
) -> None:
    """A tour of ldpkit on real data shipped with the install."""
    from .demo import plot_categorical, run_categorical, significant

    console.rule("[bold]Categorical frequencies: US baby names (SSA, 1880-2017)")
    labels, counts = _top_names(names)
    batches = 20
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total} batches"),
                  TimeElapsedColumn(), console=console) as bar:
        task = bar.add_task(f"randomizing + aggregating {users:,} users", total=batches)
        result = run_categorical(labels, counts, n_users=users, epsilon=epsilon, batches=batches, rng=seed,
                                 progress=lambda: bar.advance(task))
    est = result.estimate
    console.print(f"oracle chosen for eps={epsilon:g}, d={names}: [bold]{est.spec!r}[/] "
                  f"({result.seconds:.2f} s for {users:,} users)")
    lo, hi = est.confidence_interval(0.05)
    table = Table(title=f"Top 20 names by estimate (n = {users:,}, epsilon = {epsilon:g})")
    for col in ("rank", "name", "estimate", "95% CI", "truth", "in CI"):
        table.add_column(col, justify="right")
    for rank, i in enumerate(est.top(20), start=1):
        inside = lo[i] <= result.truth[i] <= hi[i]
        table.add_row(str(rank), str(labels[i]), f"{est.frequencies[i]:.4f}", f"[{lo[i]:.4f}, {hi[i]:.4f}]",
                      f"{result.truth[i]:.4f}", "yes" if inside else "[red]no[/]")
    console.print(table)
    mse = float(np.mean((est.frequencies - result.truth) ** 2))
    console.print(f"95% CI coverage over all {names} names: {result.coverage:.1%}; "
                  f"mean squared error {mse:.2e} (analytical {float(np.mean(est.variance)):.2e}); "
                  f"{significant(result).size} names significantly above 0 (Bonferroni, alpha = 0.05)")
    path = plot_categorical(result, out / "names.png")
    console.print(f"plot: {path}")


def main() -> None:  # pragma: no cover - console entry point
    app()


if __name__ == "__main__":  # pragma: no cover
    app()
