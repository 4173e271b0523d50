"""Real streams for the stream tests: the copies shipped inside ldpkit (``ldpkit.datasets``)."""

from __future__ import annotations

import numpy as np
import pytest

from ldpkit.datasets.streams import STREAMS
from ldpkit.datasets.streams import streams as load_stream


@pytest.fixture(scope="session")
def streams() -> dict[str, np.ndarray]:
    return {name: load_stream(name).values for name in STREAMS}
