"""The experiments' tests get the project's test helpers: the GPU and NVRTC skips with their reason, the
isolated cubin cache and the registry fixture (tests/conftest.py, whose hooks apply only below tests/)."""
from tests.conftest import *  # noqa: F403
from tests.conftest import pytest_runtest_call, pytest_runtest_setup  # noqa: F401  (hooks: named, not starred)
