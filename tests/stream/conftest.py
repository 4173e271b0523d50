"""Real streams for the stream tests.

Loaded from ``ldpkit.datasets`` once that package ships them; until then from the shared
data directory (``LDPKIT_STREAMS`` overrides the path). Tests that need them are skipped
when neither is available.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

_CANDIDATES = [
    Path(os.environ.get("LDPKIT_STREAMS", "")),
    Path(__file__).resolve().parents[3] / "shared" / "data" / "streams.npz",
    Path("/work/shared/data/streams.npz"),
]


@pytest.fixture(scope="session")
def streams() -> dict[str, np.ndarray]:
    try:  # the packaged copy, once it exists
        from ldpkit import datasets  # type: ignore[attr-defined]

        return {k: np.asarray(v) for k, v in datasets.load_streams().items()}
    except (ImportError, AttributeError):
        pass
    for path in _CANDIDATES:
        if path.is_file():
            with np.load(path, allow_pickle=False) as data:
                return {k: data[k] for k in data.files}
    pytest.skip("streams.npz is not available")
