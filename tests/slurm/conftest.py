"""Fixtures for the Slurm platform tests: one private cluster for the whole session."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
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
    """A local Slurm login-node box (this machine); data and durable dirs are 'shared'.

    Registered in the store directly: `rgt up --profile slurm` without --ssh is refused by
    boxes.up today (see the report).
    """
    store = Store(Path(slurm_env["RGT_HOME"]) / "state.db")
    data, durable = tmp_path / "data", tmp_path / "durable"
    data.mkdir()
    durable.mkdir()
    box = Box(name="hpc", profile="slurm", connection={}, data_dir=str(data),
              durable_dir=str(durable), rate=None, state="up", created=time.time())
    store.add_box(box)
    return store, box
