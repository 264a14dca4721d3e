import os
import subprocess
import sys
from pathlib import Path

import pytest

# Test helper modules (cli.py, sshd.py) are imported by name from any test folder.
sys.path.insert(0, str(Path(__file__).parent))

# A pytest-xdist worker (scripts/test) starts with COLUMNS=80 in its environment. Rich fixes a
# console's width from COLUMNS when the console is made, at import, so the in-process CLI tests'
# own COLUMNS=200 would not count: a worker drops it, as a run in one process never had it.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for name in ("COLUMNS", "LINES"):
        os.environ.pop(name, None)


def _make_kaggles_config_dir() -> None:
    """The kaggle package creates its config directory when it is imported, with a check and
    then a makedirs that refuses an existing directory: two workers collecting the Kaggle tests
    at once on a fresh machine race, and the loser's collection fails with FileExistsError.
    Make the directory it will pick (its own rule) before any worker imports it."""
    home = Path.home()
    chosen = os.environ.get("KAGGLE_CONFIG_DIR") or str(home / ".kaggle")
    if not os.environ.get("KAGGLE_CONFIG_DIR") and sys.platform.startswith("linux") \
            and not os.path.exists(chosen):
        chosen = os.path.join(os.environ.get("XDG_CONFIG_HOME") or str(home / ".config"), "kaggle")
    os.makedirs(chosen, exist_ok=True)


_make_kaggles_config_dir()


def _fail_skips_in_ci(report, item=None) -> None:
    """In CI a skip means an install step is missing (no sshd, no Slurm, no torch, not root):
    fail instead, so a green run cannot hide an untested component. Tests marked `may_skip`
    need something no package registry offers here and are exempt."""
    if item is not None and item.get_closest_marker("may_skip"):
        return
    if os.environ.get("CI") and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, where everything the suite needs is installed: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    _fail_skips_in_ci((yield).get_result(), item)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    _fail_skips_in_ci((yield).get_result())


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own, which reads the group marks
def pytest_collection_modifyitems(config, items):
    """scripts/test spreads the suite over pytest-xdist workers (`--dist loadgroup`). The tests
    on the private Slurm cluster share one cluster per session: they stay on one worker (one
    group), and go first, since that group is the longest stretch one worker runs. The fake
    Kubernetes clusters' pods are processes of this machine, and every PVC door listens on the
    same port: those tests stay on one worker too, or one worker's door answers another's."""
    slurm = [item for item in items if "slurm_cluster" in getattr(item, "fixturenames", ())]
    for item in slurm:
        item.add_marker(pytest.mark.xdist_group("slurm"))
    for item in items:
        if "kube" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("kubernetes"))
    if slurm and getattr(config.option, "loadgroup", False):  # set on xdist's workers
        first = set(slurm)
        items[:] = slurm + [item for item in items if item not in first]


@pytest.fixture
def tmpfs(tmp_path):
    """mount(options) -> a fresh tmpfs mounted with those options (`size=1m,nr_inodes=4`): a
    disk that really runs out of bytes or inodes. Unmounted at teardown."""
    mounted: list[Path] = []

    def mount(options: str) -> Path:
        target = tmp_path / f"tmpfs{len(mounted)}"
        target.mkdir()
        result = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)],
                                capture_output=True, text=True)
        if result.returncode != 0:
            pytest.skip(f"cannot mount tmpfs ({options}; needs root): {result.stderr.strip()}")
        mounted.append(target)
        return target

    yield mount
    for target in reversed(mounted):
        if subprocess.run(["umount", str(target)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(target)], capture_output=True)
