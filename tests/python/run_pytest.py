"""CTest's entry to the Python module's tests: exits 77 (CTest: skipped) when this Python lacks
pytest or numpy, else runs pytest on the given files (a module that does not import fails)."""

import sys

try:
    import numpy  # noqa: F401
    import pytest
except ImportError as e:
    print(f"skipped: {e.name} is not installed for {sys.executable}")
    sys.exit(77)
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", *sys.argv[1:]]))
