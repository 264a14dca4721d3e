"""The stands the contract suite runs on: one per platform, each its fake control plane or a
real local component, built from the fixtures the platform's own tests use (nothing here
duplicates them: the cloud fakes, `home` and `store` come from tests/cloud/conftest.py, the
real sshd from tests/sshd.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests/: cli.py, sshd.py, boxkit.py, cloud/
sys.path.insert(0, str(HERE))         # stands.py

# the cloud tests' own fixtures, shared (importing the module also puts tests/cloud/fakes on
# sys.path, as it does for the cloud tests)
from cloud.conftest import home, keyed, lambda_api, runpod_api, store, vast_api  # noqa: E402,F401
from sshd import sshd_keys, sshd_server  # noqa: E402,F401
from stands import STANDS  # noqa: E402

sys.path.insert(0, str(HERE.parent / "notebooks"))  # fake_kaggle.py, colabkit.py


def _conftest_of(folder: str) -> ModuleType:
    """Another folder's conftest, for its fixtures (tests/kubernetes cannot be imported by its
    folder's name: that is the official client's package)."""
    spec = importlib.util.spec_from_file_location(f"_{folder}_conftest",
                                                  HERE.parent / folder / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


kube = _conftest_of("kubernetes").kube
# colabkit reads FAKE_COLAB from `conftest`, which is tests/notebooks/conftest.py when the
# notebook tests import it: give it that one while it is imported here
_saved, sys.modules["conftest"] = sys.modules.get("conftest"), _conftest_of("notebooks")
try:
    import colabkit  # noqa: E402,F401
finally:
    if _saved is not None:
        sys.modules["conftest"] = _saved
_slurm = _conftest_of("slurm")
slurm_cluster, slurm_env = _slurm.slurm_cluster, _slurm.slurm_env


@pytest.fixture
def stand(request, home, tmp_path):  # noqa: F811  (the shared fixture above)
    """The platform under test, its fakes started and its `rgt up` arguments ready."""
    return STANDS[request.param](request, tmp_path)
