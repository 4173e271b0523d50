"""Test-suite settings: property tests are derandomized so a CI run is reproducible."""

import os

from hypothesis import settings

# Same examples on every run (fixed seed): a red CI run can be replayed exactly, and a
# green one cannot turn red by chance. Set HYPOTHESIS_PROFILE=explore to search anew.
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
