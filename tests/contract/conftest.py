"""The stands the contract suite runs on: one per platform, each its fake control plane or a
real local component, built from the fixtures the platform's own tests use (nothing here
duplicates them: the cloud fakes, `home` and `store` come from tests/cloud/conftest.py, the
real sshd from tests/sshd.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests/: cli.py, sshd.py, boxkit.py, cloud/
sys.path.insert(0, str(HERE))         # stands.py

# the cloud tests' own fixtures, shared (importing the module also puts tests/cloud/fakes on
# sys.path, as it does for the cloud tests)
from cloud.conftest import home, keyed, lambda_api, runpod_api, store, vast_api  # noqa: E402,F401
from sshd import sshd_keys, sshd_server  # noqa: E402,F401
from stands import STANDS  # noqa: E402


@pytest.fixture
def stand(request, home, tmp_path):  # noqa: F811  (the shared fixture above)
    """The platform under test, its fakes started and its `rgt up` arguments ready."""
    return STANDS[request.param](request, tmp_path)
