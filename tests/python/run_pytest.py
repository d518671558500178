"""CTest's entry to the Python module's tests: exits 77 (CTest: skipped) when this Python lacks
pytest or numpy, or when every test of the run skipped itself (no GPU, say); else pytest's status
(a module that does not import fails)."""

import sys

try:
    import numpy  # noqa: F401
    import pytest
except ImportError as e:
    print(f"skipped: {e.name} is not installed for {sys.executable}")
    sys.exit(77)


class Outcomes:
    """Counts what the tests did, so that a run of skips reports as skipped, not passed."""

    def __init__(self):
        self.ran = 0
        self.skipped = 0

    def pytest_runtest_logreport(self, report):
        if report.when == "call" and not report.skipped:
            self.ran += 1
        if report.skipped:
            self.skipped += 1


outcomes = Outcomes()
status = pytest.main(["-q", "-p", "no:cacheprovider", *sys.argv[1:]], plugins=[outcomes])
if status == 0 and outcomes.ran == 0 and outcomes.skipped > 0:
    sys.exit(77)
sys.exit(status)
