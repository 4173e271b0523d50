"""Light imports: the client path loads neither scipy, pandas, numba nor pyarrow.

Every check runs in a fresh interpreter (``sys.modules`` of the test process already holds
everything). "Blocked" runs set ``sys.modules[name] = None`` for the heavy modules first, so
any attempt to import them raises ImportError, as on a device where they are not installed.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import ldpkit

HEAVY = ("scipy", "pandas", "numba", "pyarrow")
SRC = str(Path(ldpkit.__file__).resolve().parents[1])

# Randomizes with four client specs (GRR, OLH, OUE, SquareWave) and prints a digest of every
# report's bytes. OUE's 20,000 x 1,024 bits are above COMPILED_MIN_BITS, so with numba
# installed that batch runs compiled, and with numba blocked it takes the numpy path: same
# digest required.
CLIENT = """
import hashlib, json, sys
from ldpkit import GRR, OLH, OUE, SquareWave

def digest(reports):
    h = hashlib.sha256()
    for name in sorted(reports.fields):
        h.update(name.encode())
        h.update(reports.arrays[name].tobytes())
    return h.hexdigest()

specs = [
    (GRR(epsilon=1.0, domain_size=10), [1, 2, 3] * 100),
    (OLH(epsilon=1.0, domain_size=1000), list(range(300))),
    (OUE(epsilon=1.0, domain_size=100), list(range(100)) * 3),
    (OUE(epsilon=2.0, domain_size=1024), list(range(1024)) * 20),
    (SquareWave(epsilon=1.0), [0.1, 0.5, 0.9] * 100),
]
out = {"digests": [digest(spec.randomize(values, rng=7)) for spec, values in specs]}
out["loaded"] = sorted({m.split(".")[0] for m, mod in sys.modules.items() if mod and m.split(".")[0] in HEAVY})
print(json.dumps(out))
"""


def _python(code: str, *, block: bool = False) -> dict:
    """Run ``code`` in a fresh interpreter with this ldpkit first on the path; its JSON line."""
    prelude = f"HEAVY = {HEAVY!r}\n"
    if block:
        prelude += "import sys\nfor name in HEAVY:\n    sys.modules[name] = None\n"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


LOADED = """
import json, sys
{imports}
print(json.dumps(sorted({{m.split(".")[0] for m, mod in sys.modules.items() if mod and m.split(".")[0] in HEAVY}})))
"""


@pytest.mark.parametrize(
    "imports",
    [
        "import ldpkit",
        "from ldpkit import OLH, GRR, OUE, SquareWave",
        "import ldpkit.frequency, ldpkit.numeric",
        "from ldpkit.frequency import OLH, GRR, OUE, SUE, BLH, HRR, HadamardResponse",
        "from ldpkit.numeric import SquareWave, GeneralWave, PiecewiseMechanism, HybridMechanism",
        "from ldpkit import Reports, Mechanism, Stats, as_generator, privacy_loss",
        "from ldpkit import Question, Survey, PrivacyAccountant, Encoder",
        "from ldpkit import SubsetSelection, HaarWavelet, CFOBinning, HierarchicalHistogram, RAPPOR",
        "from ldpkit import heavy_hitters, choose_oracle, significance_cutoff",
    ],
)
def test_client_imports_load_no_heavy_module(imports):
    assert _python(LOADED.format(imports=imports)) == []


def test_the_check_sees_a_heavy_import():
    # The same probe reports scipy once a server-side module is imported.
    assert "scipy" in _python(LOADED.format(imports="import ldpkit.consistency"))


def test_randomize_loads_no_heavy_module_and_works_with_them_blocked():
    free = _python(CLIENT)
    blocked = _python(CLIENT, block=True)
    # With numba installed the big OUE batch runs compiled (numba itself imports scipy).
    assert set(free["loaded"]) <= {"numba", "scipy"}
    assert blocked["loaded"] == []
    # Reports do not depend on what is installed: compiled kernel and numpy twin agree.
    assert blocked["digests"] == free["digests"]
    assert len(set(free["digests"])) == len(free["digests"])


# Every other randomizer but RAPPOR (its client draws Bloom positions from the server's
# design, built with scipy.sparse) and THE's default cutoff (a scipy optimizer) randomizes with
# the heavy modules blocked.
OTHERS = """
import json
from ldpkit import (BLH, HRR, SHE, SUE, THE, CFOBinning, HaarHRR, HaarWavelet,
    HadamardResponse, HierarchicalHistogram, HybridMechanism, PiecewiseMechanism,
    StochasticRounding, SubsetSelection, WienerDeconvolution)
specs = [BLH(epsilon=1.0, domain_size=50), SUE(epsilon=1.0, domain_size=50),
    SHE(epsilon=1.0, domain_size=50), THE(epsilon=1.0, domain_size=50, cutoff=0.6),
    HRR(epsilon=1.0, domain_size=50), HadamardResponse(epsilon=1.0, domain_size=50),
    SubsetSelection(epsilon=1.0, domain_size=50)]
for spec in specs:
    spec.randomize(list(range(50)) * 4, rng=0)
numeric = [PiecewiseMechanism(epsilon=1.0), HybridMechanism(epsilon=1.0),
    StochasticRounding(epsilon=1.0), CFOBinning(epsilon=1.0), HierarchicalHistogram(epsilon=1.0),
    HaarHRR(epsilon=1.0), HaarWavelet(epsilon=1.0, max_level=3), WienerDeconvolution(epsilon=1.0)]
for spec in numeric:
    spec.randomize([0.1, 0.5, 0.9] * 50, rng=0)
print(json.dumps(len(specs) + len(numeric)))
"""


def test_other_randomizers_work_with_heavy_modules_blocked():
    assert _python(OTHERS, block=True) == 15


def test_small_batches_never_load_numba():
    code = CLIENT.replace("(OUE(epsilon=2.0, domain_size=1024), list(range(1024)) * 20),", "")
    assert _python(code)["loaded"] == []


def test_cli_help_loads_no_heavy_module():
    code = """
    import json, sys, contextlib, io
    from ldpkit.cli import app
    sys.argv = ["ldpkit", "--help"]
    with contextlib.redirect_stdout(io.StringIO()) as text:
        try:
            app()
        except SystemExit:
            pass
    assert "reproduce" in text.getvalue()
    heavy = HEAVY + ("numpy",)
    print(json.dumps(sorted({m.split(".")[0] for m, mod in sys.modules.items() if mod and m.split(".")[0] in heavy})))
    """
    assert _python(code) == []


def test_registry_loads_lazy_modules_on_demand():
    # A spec of a module nobody imported yet still round-trips through its JSON form.
    code = """
    import json
    from ldpkit.spec import mechanism_registry, spec_from_dict
    spec = spec_from_dict({"mechanism": "SquareWave", "params": {"epsilon": 1.0}})
    names = sorted(mechanism_registry())
    print(json.dumps({"spec": type(spec).__module__, "names": names}))
    """
    out = _python(code)
    assert out["spec"] == "ldpkit.numeric.square_wave"
    assert {"GRR", "OLH", "OUE", "RAPPOR", "SquareWave", "HaarWavelet"} <= set(out["names"])


PACKAGES = ["ldpkit", "ldpkit.frequency", "ldpkit.numeric", "ldpkit.datasets", "ldpkit.experiments"]


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_resolves(package):
    module = importlib.import_module(package)
    assert set(module.__all__) <= set(dir(module))
    for name in module.__all__:
        value = getattr(module, name)
        assert value is getattr(module, name)  # cached after the first access
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        module.no_such_name  # noqa: B018


def test_public_names_win_over_same_named_submodules():
    import ldpkit.numeric as numeric

    module = importlib.import_module("ldpkit.numeric.em")  # binds nothing on the package
    assert numeric.em is module.em and callable(numeric.em)
    datasets = importlib.import_module("ldpkit.datasets")
    assert datasets.streams is importlib.import_module("ldpkit.datasets.streams").streams


def test_top_level_and_package_names_are_the_same_objects():
    import ldpkit.frequency as frequency
    import ldpkit.numeric as numeric

    assert ldpkit.OUE is frequency.OUE
    assert ldpkit.SquareWave is numeric.SquareWave
    assert set(frequency.ORACLES) >= {"GRR", "OLH", "OUE", "RAPPOR"}
    assert frequency.ORACLES["OLH"] is frequency.OLH


def test_digest_helper_distinguishes_reports():
    # The subprocess digests above compare real bytes: a different seed changes them.
    from ldpkit import OUE

    spec = OUE(epsilon=1.0, domain_size=100)
    a = hashlib.sha256(spec.randomize([1] * 50, rng=1).bits.tobytes()).hexdigest()
    b = hashlib.sha256(spec.randomize([1] * 50, rng=2).bits.tobytes()).hexdigest()
    assert a != b
