"""Fixtures for the Slurm platform tests: one private cluster for the whole session."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli import rgt
from hosts import unavailable as _hosts_unavailable
from slurmcluster import ClusterError, SlurmCluster, unavailable

from rgt.store import Box, Store


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurmcluster"))
    try:
        cluster.start()
    except ClusterError as err:
        cluster.stop()
        pytest.skip(f"the private Slurm cluster did not start: {err}")
    yield cluster
    cluster.stop()


@pytest.fixture
def slurm_env(slurm_cluster, tmp_path, monkeypatch):
    """SLURM_CONF and a private RGT_HOME for in-process calls; returns the env for the CLI."""
    home = tmp_path / "rgt-home"
    home.mkdir()
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    monkeypatch.setenv("RGT_HOME", str(home))
    return {"SLURM_CONF": str(slurm_cluster.conf), "RGT_HOME": str(home)}


@pytest.fixture
def slurm_box(slurm_env, tmp_path) -> tuple[Store, Box]:
    """This machine as a Slurm login node, registered the way a user does: `rgt up`."""
    durable = tmp_path / "durable"
    result = rgt("up", "hpc", "--profile", "slurm", "--durable-dir", str(durable),
                 env=slurm_env)
    assert result.returncode == 0, result.stdout + result.stderr
    store = Store(Path(slurm_env["RGT_HOME"]) / "state.db")
    box = store.box("hpc")
    assert box.data_dir == box.durable_dir == str(durable)  # run dirs must be shared too
    return store, box


@pytest.fixture(scope="module")
def slurm_two_nodes(tmp_path_factory):
    """A private cluster of two nodes (two network + UTS namespaces, one slurmd each), for one
    module, each node with one pretend GPU (counted by Slurm, a CPU underneath): its tests
    share it; `crash_node`/`boot_node` leave it whole again."""
    reason = unavailable() or _hosts_unavailable()
    if reason:
        pytest.skip(reason)
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm2"), nodes=2, gpus=1)
    try:
        cluster.start()
    except ClusterError as err:
        cluster.stop()
        pytest.skip(f"the private two-node Slurm cluster did not start: {err}")
    except BaseException:
        cluster.stop()  # the namespaces and daemons go whatever failed
        raise
    yield cluster
    cluster.stop()
