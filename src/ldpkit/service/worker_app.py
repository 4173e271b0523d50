"""App factory for ``ldpkit serve --workers N``: each uvicorn worker process calls :func:`app`."""

from __future__ import annotations

import json
import os
from typing import Any


def app() -> Any:
    """Return the collector app of the config :func:`ldpkit.service.main` put in the env."""
    from .serve import app_from_config

    config = json.loads(os.environ["LDPKIT_COLLECTOR_CONFIG"])
    overrides = json.loads(os.environ.get("LDPKIT_COLLECTOR_OVERRIDES", "{}"))
    return app_from_config(config, **overrides)
