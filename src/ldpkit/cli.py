"""The ``ldpkit`` command line: a thin typer app over the library."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape  # messages name config tables such as [auth]: not markup

# Only typer and rich's console load with the app (typer needs them to render --help); numpy,
# the library and rich's tables and progress bars load inside the command that uses them.

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="Local differential privacy toolkit."
)
console = Console()


@app.callback()
def _root() -> None:
    """ldpkit: local differential privacy, exact, fast and tested."""


@app.command()
def demo(
    users: Annotated[
        int, typer.Option(help="Number of simulated users (one per sampled birth).")
    ] = 1_000_000,
    names: Annotated[
        Optional[int],  # noqa: UP045 - typer needs Optional
        typer.Option(help="Domain: the most common names (default 1024; 24 with --serve)."),
    ] = None,
    epsilon: Annotated[float, typer.Option(help="Privacy budget per user.")] = 1.0,
    seed: Annotated[int, typer.Option(help="Seed of the simulation.")] = 0,
    out: Annotated[Path, typer.Option(help="Where to write plots.")] = Path("results/demo"),
    serve: Annotated[
        bool,
        typer.Option(
            "--serve",
            help="Instead: run the collector on 127.0.0.1 with simulated devices sending "
            "reports, and print its dashboard URL (needs the 'service' extra).",
        ),
    ] = False,
    port: Annotated[int, typer.Option(help="--serve: TCP port.")] = 8000,
    rate: Annotated[int, typer.Option(help="--serve: users per collection per second.")] = 500,
    duration: Annotated[
        Optional[float],  # noqa: UP045 - typer needs Optional
        typer.Option(help="--serve: stop after this many seconds (default: until Ctrl-C)."),
    ] = None,
) -> None:
    """Tour ldpkit on real data shipped with the install (--serve: a live collector)."""
    from ._validation import check_epsilon, check_integer

    try:  # bad options end in one line and exit status 2, as typer's own usage errors do
        check_integer(users, "--users", low=1)
        if names is None:
            names = 24 if serve else 1024
        check_integer(names, "--names", low=2)
        check_epsilon(epsilon, "--epsilon")
        if serve:
            check_integer(port, "--port", low=1, high=65535)
            check_integer(rate, "--rate", low=1)
            if duration is not None and not duration > 0:
                raise ValueError(f"--duration must be > 0 seconds, got {duration}")
            _serve_demo(
                names=names, epsilon=epsilon, seed=seed, port=port, rate=rate, duration=duration
            )
            return
        # Limits that depend on the data or the mechanisms (--names above the names on
        # record, --epsilon beyond what a mechanism supports) surface as ValueError too.
        _demo(users=users, names=names, epsilon=epsilon, seed=seed, out=out)
    except (TypeError, ValueError) as exc:
        console.print(f"[red]Error: {escape(str(exc))}[/]", soft_wrap=True)
        raise typer.Exit(2) from exc


def _serve_demo(
    *, names: int, epsilon: float, seed: int, port: int, rate: int, duration: float | None
) -> None:
    try:
        from .demo import serve_demo
        from .service import create_app  # noqa: F401 - fail early without the extra
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ValueError(
            f"--serve needs the service extra: pip install 'ldpkit[service]' ({exc})"
        ) from exc

    def announce(url: str) -> None:
        console.print(
            f"dashboard: [bold]{url}[/]  (collector on 127.0.0.1:{port}; simulated devices send "
            f"{rate} reports per collection per second; Ctrl-C stops)",
            soft_wrap=True,
        )

    try:
        serve_demo(
            port=port,
            epsilon=epsilon,
            names=names,
            rate=rate,
            duration=duration,
            seed=seed,
            announce=announce,
        )
    except KeyboardInterrupt:  # uvicorn re-raises Ctrl-C once it has shut down cleanly
        pass
    console.print("collector stopped (its temporary database is deleted)")


def _demo(*, users: int, names: int, epsilon: float, seed: int, out: Path) -> None:
    import numpy as np
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from .demo import plot_categorical, run_categorical, significant

    console.rule("[bold]Categorical frequencies: US baby names (SSA, 1880-2017)")
    from .datasets import babynames

    try:
        data = babynames(users, top_k=names, rng=seed)
    except ValueError as exc:
        raise ValueError(f"--names: {exc}") from exc
    assert data.labels is not None  # categorical data sets always carry labels
    labels = np.asarray(data.labels)
    batches = 20
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} batches"),
        TimeElapsedColumn(),
        console=console,
    ) as bar:
        task = bar.add_task(f"randomizing + aggregating {users:,} users", total=batches)
        result = run_categorical(
            data.values,
            labels,
            epsilon=epsilon,
            batches=batches,
            rng=seed + 1,
            progress=lambda: bar.advance(task),
        )
    est = result.estimate
    console.print(
        f"oracle chosen for eps={epsilon:g}, d={names}: [bold]{est.spec!r}[/] "
        f"({result.seconds:.2f} s for {users:,} users)"
    )
    lo, hi = est.confidence_interval(0.05)
    shown = min(20, est.domain_size)  # --names may be below 20
    table = Table(title=f"Top {shown} names by estimate (n = {users:,}, epsilon = {epsilon:g})")
    for col in ("rank", "name", "estimate", "95% CI", "truth", "in CI"):
        table.add_column(col, justify="right")
    for rank, i in enumerate(est.top(shown, indices=True), start=1):
        inside = lo[i] <= result.truth[i] <= hi[i]
        table.add_row(
            str(rank),
            str(labels[i]),
            f"{est.frequencies[i]:.4f}",
            f"[{lo[i]:.4f}, {hi[i]:.4f}]",
            f"{result.truth[i]:.4f}",
            "yes" if inside else "[red]no[/]",
        )
    console.print(table)
    console.print(
        "[dim]Ranking by estimate favours names whose noise happened to be positive "
        "(winner's curse); the intervals are for each name on its own.[/]"
    )
    mse = float(np.mean((est.frequencies - result.truth) ** 2))
    console.print(
        f"95% CI coverage over all {names} names: {result.coverage:.1%}; "
        f"mean squared error {mse:.2e} (analytical {float(np.mean(est.variance)):.2e}); "
        f"{significant(result).size} names significantly above 0 (Bonferroni, alpha = 0.05)"
    )
    path = plot_categorical(result, out / "names.png")
    console.print(f"plot: {path}")

    console.rule("[bold]Numerical distribution: departure times of NYC flights (2013)")
    _numerical_demo(epsilon=epsilon, seed=seed, out=out)
    console.rule(
        "[bold]Continuous release: items per basket in the BMS-POS stream (ToPS, central DP)"
    )
    _stream_demo(epsilon=epsilon, seed=seed, out=out)


def _stream_demo(*, epsilon: float, seed: int, out: Path) -> None:
    from rich.table import Table

    from .datasets import pos
    from .demo import plot_stream, run_stream

    data = pos()
    result = run_stream(data.values, bound=1638.0, epsilon=epsilon, rng=seed + 3)
    console.print(
        f"{data.n:,} transactions in 50 batches, public bound B = 1638 (the paper's); "
        f"the first {result.release.threshold_size:,} choose the clipping threshold "
        f"theta = {result.release.threshold:g} privately; {result.seconds:.2f} s"
    )
    table = Table(title="Range sums of released values (items sold), estimate +- standard error")
    for col in ("range", "estimate", "std error", "truth (unclipped)", "error"):
        table.add_column(col, justify="right")
    for (a, b), est, se, truth in result.ranges():
        table.add_row(
            f"[{a:,}, {b:,})", f"{est:,.0f}", f"{se:,.0f}", f"{truth:,.0f}", f"{est - truth:+,.0f}"
        )
    console.print(table)
    console.print(f"plot: {plot_stream(result, out / 'stream.png')}")


def _numerical_demo(*, epsilon: float, seed: int, out: Path) -> None:
    from rich.table import Table

    from . import metrics
    from .datasets import flights_departure_time
    from .demo import plot_numerical, run_numerical

    data = flights_departure_time()
    assert data.domain is not None  # numerical data sets always carry their range
    low, high = data.domain
    with console.status(f"Square Wave reports from {data.n:,} flights (one user each)"):
        result = run_numerical(data.values, low, high, epsilon=epsilon, buckets=288, rng=seed + 2)
    console.print(
        f"{data.n:,} users, epsilon = {epsilon:g}, 288 five-minute buckets: "
        f"{result.seconds:.2f} s (randomize + aggregate + AutoDistribution's estimate; "
        f"loading the compiled numba kernels took {result.warmup_seconds:.2f} s before, "
        "longer on the first run on a machine, which compiles them)"
    )
    table = Table(title="Departure time (minutes after midnight)")
    for col in ("statistic", "estimate", "truth", "error"):
        table.add_column(col, justify="right")
    for q, qe, qt in result.quantile_errors((0.5, 0.9)):
        table.add_row(f"{int(q * 100)}% quantile", f"{qe:.0f}", f"{qt:.0f}", f"{qe - qt:+.0f} min")
    table.add_row(
        "mean",
        f"{result.estimate.mean():.0f}",
        f"{data.values.mean():.0f}",
        f"{result.estimate.mean() - data.values.mean():+.1f} min",
    )
    console.print(table)
    console.print(
        f"Wasserstein-1 {metrics.wasserstein(result.estimate, data.values):.1f} min, "
        f"KS {metrics.ks_distance(result.estimate, data.values):.3f}"
    )
    hhmm = lambda m: f"{int(m) // 60:02d}:{int(m) % 60:02d}"  # noqa: E731
    path = plot_numerical(
        result,
        out / "departures.png",
        title=f"NYC flights 2013: departure time under {epsilon:g}-LDP "
        f"(median {hhmm(result.quantile_errors((0.5,))[0][1])})",
        unit="minutes after midnight",
    )
    console.print(f"plot: {path}")


@app.command()
def reproduce(
    paper: Annotated[str, typer.Argument(help="fo17, con20, sw20, wav25 or tops21.")],
    quick: Annotated[
        bool, typer.Option(help="A reduced grid that runs in about two minutes.")
    ] = False,
    out: Annotated[
        Optional[Path],  # noqa: UP045 - typer needs Optional
        typer.Option(help="Results directory (default results/PAPER)."),
    ] = None,
    seed: Annotated[int, typer.Option(help="Root seed of the experiment grid.")] = 0,
    jobs: Annotated[int, typer.Option(help="Worker processes over grid cells.")] = 1,
) -> None:
    """Reproduce a paper's experiments: tables (Markdown), figures (PNG, PDF), raw results (Parquet)."""
    from . import reproduce as papers
    from ._validation import check_integer

    try:  # bad options end in one line and exit status 2
        check_integer(seed, "--seed", low=0)
        check_integer(jobs, "--jobs", low=1)
        if paper not in papers.PAPERS:
            raise ValueError(f"paper must be one of {sorted(papers.PAPERS)}, got {paper!r}")
        path = papers.run(paper, quick=quick, out=out, seed=seed, jobs=jobs, console=console)
    except (TypeError, ValueError, NotImplementedError) as exc:
        console.print(f"[red]Error: {escape(str(exc))}[/]", soft_wrap=True)
        raise typer.Exit(2) from exc
    console.print(f"results in {path}")


@app.command()
def serve(
    config: Annotated[
        Path,
        typer.Argument(help="Collector configuration (TOML or JSON): collections and their specs."),
    ],
    host: Annotated[
        str, typer.Option(help="Interface to bind (localhost by default).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    workers: Annotated[
        int, typer.Option(help="Worker processes (more than 1 needs a PostgreSQL database_url).")
    ] = 1,
    access_log: Annotated[
        bool,
        typer.Option(
            help="Log one line per request (without client addresses); off by default: at "
            "one report per request it costs more than storing the report."
        ),
    ] = False,
    log_addresses: Annotated[
        bool, typer.Option(help="Include client addresses in the access log.")
    ] = False,
    header_timeout: Annotated[
        float,
        typer.Option(help="Seconds a request's head may take before the connection is closed."),
    ] = 5.0,
    ssl_keyfile: Annotated[
        Optional[Path],  # noqa: UP045 - typer needs Optional
        typer.Option(help="Serve HTTPS: PEM private key (with --ssl-certfile)."),
    ] = None,
    ssl_certfile: Annotated[
        Optional[Path],  # noqa: UP045 - typer needs Optional
        typer.Option(help="Serve HTTPS: PEM certificate chain (with --ssl-keyfile)."),
    ] = None,
) -> None:
    """Run the HTTP report collector (needs the 'service' extra); see docs/collector.md."""
    from ._validation import check_integer

    try:  # bad options and configs end in one line and exit status 2
        check_integer(port, "--port", low=1, high=65535)
        check_integer(workers, "--workers", low=1)
        if not config.is_file():
            raise ValueError(f"config must be an existing TOML or JSON file, got {str(config)!r}")
    except (TypeError, ValueError) as exc:
        console.print(f"[red]Error: {escape(str(exc))}[/]", soft_wrap=True)
        raise typer.Exit(2) from exc
    try:
        from .service import main as serve_main
    except ImportError as exc:  # pragma: no cover - depends on the install
        console.print(
            f"[red]the collector needs the service extra: pip install 'ldpkit[service]' ({exc})[/]"
        )
        raise typer.Exit(2) from exc
    try:
        serve_main(
            config,
            host=host,
            port=port,
            workers=workers,
            access_log=access_log,
            log_addresses=log_addresses,
            header_timeout=header_timeout,
            ssl_keyfile=ssl_keyfile,
            ssl_certfile=ssl_certfile,
        )
    except (TypeError, ValueError, OSError) as exc:
        console.print(f"[red]Error: {escape(str(exc))}[/]", soft_wrap=True)
        raise typer.Exit(2) from exc


def main(argv: list[str] | None = None) -> None:
    """Run the ``ldpkit`` command line (the console entry point).

    Typer's app, with usage errors (unknown option, a value that is not a number) on one
    line and exit status 2, like the commands' own validation errors.
    """
    try:  # typer >= 0.20 vendors click
        from typer._click import exceptions as cx
    except ImportError:  # pragma: no cover - older typer on click
        from click import exceptions as cx  # type: ignore[no-redef]

    try:
        code = app(args=argv, standalone_mode=False)
    except cx.NoArgsIsHelpError:  # the help was printed
        raise SystemExit(2) from None
    except cx.UsageError as exc:
        console.print(f"[red]Error: {escape(exc.format_message())}[/]", soft_wrap=True)
        raise SystemExit(2) from None
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    raise SystemExit(code if isinstance(code, int) else 0)


if __name__ == "__main__":  # pragma: no cover
    main()
