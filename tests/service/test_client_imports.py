import subprocess
import sys

CLIENT = """
import sys
import numpy as np
import ldpkit
from ldpkit.io import reports_to_bytes
spec = ldpkit.OLH(epsilon=1.0, domain_size=10)
reports_to_bytes(spec.randomize(np.arange(10), rng=0), format="parquet")
loaded = sorted(m for m in sys.modules if m.split(".")[0] in {"dask", "fastapi", "sqlalchemy", "uvicorn", "starlette"}
                or m.startswith(("ldpkit.service", "ldpkit.distributed")))
print(loaded)
"""


def test_client_side_never_imports_server_modules():
    out = subprocess.run([sys.executable, "-c", CLIENT], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
