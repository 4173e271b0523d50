"""The per-cell table of AutoDistribution against the best competitor, as Markdown.

Run: ``python benchmarks/auto_report.py GRID.json [--large LARGE.json] [--speed SPEED.json]
[--out docs/results/auto/auto_distribution.md]``, where the JSON files are what
``benchmarks/auto_distribution.py --out NAME`` wrote (the grid, a run with the large-n part,
a ``--speed-only`` run). Reading the results instead of running them lets the documented table
combine a long grid run with a speed run taken on a quiet machine.

Each cell is AutoDistribution's mean error over the best competitor's mean error (the best of
SW-EMS, SW-EM, HH with the CDF fit and the Haar wavelet at J - 2; the target: within
10 % in 90 % of the cells, never above 1.5); misses are bold.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

TARGET, WORST = 1.10, 1.5


def _cell(x: float) -> str:
    # three decimals where two would hide which side of the target a cell is on
    text = f"{x:.3f}" if round(x, 2) == TARGET else f"{x:.2f}"
    return f"**{text}**" if x > TARGET else text


def grid_table(rows: list[dict[str, Any]]) -> str:
    """Rows (data set, metric) by columns eps: Auto / best, the best method named below."""
    eps = sorted({r["eps"] for r in rows})
    names = list(dict.fromkeys(r["data"] for r in rows))
    by = {(r["data"], r["eps"]): r for r in rows}
    head = "| data set | metric | " + " | ".join(f"ε={e:g}" for e in eps) + " |"
    lines = [head, "|---|---|" + "---|" * len(eps)]
    for name in names:
        for metric in ("W1", "KS"):
            cells = [_cell(by[name, e][f"Auto {metric} ratio"]) for e in eps]
            lines.append(f"| {name} | {metric} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def winners_table(rows: list[dict[str, Any]]) -> str:
    """Which competitor is the best in each cell (what Auto is compared with)."""
    short = {"SW-EMS": "EMS", "SW-EM": "EM", "HH": "HH", "Wavelet J-2": "Wav"}
    eps = sorted({r["eps"] for r in rows})
    names = list(dict.fromkeys(r["data"] for r in rows))
    by = {(r["data"], r["eps"]): r for r in rows}
    lines = [
        "| data set | metric | " + " | ".join(f"ε={e:g}" for e in eps) + " |",
        "|---|---|" + "---|" * len(eps),
    ]
    for name in names:
        for metric in ("W1", "KS"):
            cells = [short[by[name, e][f"best {metric} by"]] for e in eps]
            lines.append(f"| {name} | {metric} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary_line(rows: list[dict[str, Any]]) -> str:
    ratios = [r[f"Auto {m} ratio"] for r in rows for m in ("W1", "KS")]
    within = sum(x <= TARGET for x in ratios)
    return (
        f"Within 10 % of the best competitor in **{within} of {len(ratios)}** cells "
        f"({within / len(ratios):.0%}; target 90 %), worst ratio **{max(ratios):.2f}** "
        f"(target <= {WORST:g})."
    )


def large_table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| ε | Auto W1 / best | best W1 by | Auto KS / best | best KS by |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['eps']:g} | {_cell(r['Auto W1 ratio'])} | {r['best W1 by']} | "
            f"{_cell(r['Auto KS ratio'])} | {r['best KS by']} |"
        )
    return "\n".join(lines)


def speed_table(rows: list[dict[str, Any]]) -> str:
    lines = ["| ε | Auto CPU s | SW + EMS CPU s | ratio (target <= 2) |", "|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['eps']:g} | {r['Auto s']:.3f} | {r['SW-EMS s']:.3f} | {r['ratio']:.2f} |"
        )
    return "\n".join(lines)


def report(grid: dict[str, Any], large: dict[str, Any] | None, speed: dict[str, Any] | None) -> str:
    rows = grid["rows"]
    rule = "the default rule" if grid.get("hh_share") is None else f"hh_share = {grid['hh_share']}"
    parts = [
        "# AutoDistribution against the best published estimator, per cell",
        "",
        "Written by `benchmarks/auto_report.py` from `benchmarks/auto_distribution.py`'s results "
        f"({grid['reps']} runs per cell, {rule}, run of {grid['machine']['date']}). Cells: "
        "AutoDistribution's mean error over the best competitor's mean error in the cell "
        "(the best of SW + EMS, SW + EM, HH with the monotone-CDF fit and the Haar wavelet at "
        "J - 2, WAV25's grid errors on the 256-point grid); bold: above 1.10. Reproduce: "
        f"`python benchmarks/auto_distribution.py --reps {grid['reps']} --seed "
        f"{grid.get('seed', 0)} --out NAME`, then `python benchmarks/auto_report.py "
        "benchmarks/results/NAME.json` (add `--large`/`--speed` with the JSON of a run with "
        "the large-n part or of a `--speed-only` run).",
        "",
        summary_line(rows),
        "",
        "![Auto / best per cell](auto_distribution.png)",
        "",
        grid_table(rows),
        "",
        "The best competitor per cell (EMS = SW + EMS, EM = SW + EM, HH = hierarchical "
        "histogram with the CDF fit, Wav = Haar wavelet J - 2):",
        "",
        winners_table(rows),
    ]
    if large and large.get("large_n"):
        reps = large.get("large_reps", "?")
        parts += [
            "",
            f"## Weeks worked resampled to n = 1e6 ({reps} runs per cell)",
            "",
            large_table(large["large_n"]),
        ]
    if speed and speed.get("rows"):
        parts += [
            "",
            f"## Speed at n = 1e6 (randomize + aggregate + estimate, CPU time, median of "
            f"{speed.get('repeat', '?')}; run of {speed['machine']['date']})",
            "",
            speed_table(speed["rows"]),
        ]
    return "\n".join(parts) + "\n"


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """Heat map of Auto / best per (data set, metric) and eps, misses outlined."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    eps = sorted({r["eps"] for r in rows})
    names = list(dict.fromkeys(r["data"] for r in rows))
    by = {(r["data"], r["eps"]): r for r in rows}
    labels = [f"{n} {m}" for n in names for m in ("W1", "KS")]
    grid = np.array(
        [[by[n, e][f"Auto {m} ratio"] for e in eps] for n in names for m in ("W1", "KS")]
    )
    fig, ax = plt.subplots(figsize=(9, 5.5))
    im = ax.imshow(grid, cmap="RdYlGn_r", vmin=0.7, vmax=1.5, aspect="auto")
    for (i, j), x in np.ndenumerate(grid):
        ax.text(
            j,
            i,
            f"{x:.2f}",
            ha="center",
            va="center",
            fontsize=8,
            fontweight="bold" if x > TARGET else "normal",
        )
    ax.set_xticks(range(len(eps)), [f"ε={e:g}" for e in eps])
    ax.set_yticks(range(len(labels)), labels)
    ax.set_title("AutoDistribution's error over the best competitor's (bold: above 1.10)")
    fig.colorbar(im, ax=ax, label="Auto / best")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("grid", type=Path)
    ap.add_argument("--large", type=Path)
    ap.add_argument("--speed", type=Path)
    ap.add_argument("--out", type=Path, default=Path("docs/results/auto/auto_distribution.md"))
    args = ap.parse_args()
    load = lambda p: json.loads(p.read_text()) if p else None  # noqa: E731
    text = report(load(args.grid), load(args.large), load(args.speed))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    plot(load(args.grid)["rows"], args.out.with_suffix(".png"))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
