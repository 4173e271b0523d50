"""Load the fuzz harness once (it is also a script) and print the fuzz counts at the end."""

import importlib.util
import sys
from pathlib import Path

_NAME = "ldpkit_fuzz_harness"
if _NAME not in sys.modules:
    _spec = importlib.util.spec_from_file_location(_NAME, Path(__file__).with_name("harness.py"))
    assert _spec is not None and _spec.loader is not None
    _module = importlib.util.module_from_spec(_spec)
    sys.modules[_NAME] = _module
    _spec.loader.exec_module(_module)


def pytest_terminal_summary(terminalreporter):
    for line in sys.modules[_NAME].SUMMARIES:
        terminalreporter.write_line(line)
