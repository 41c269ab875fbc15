"""A local cluster's workers are forked from the driver: they share its open files (its run and
DLQ locks among them), so a driver killed mid-run must leave no worker behind holding them, and
the next run of the pipeline must go through; the driver's objects are frozen for the garbage
collector only while the cluster lives."""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from dpone.runtime.scaleout.cluster import frozen_for_fork, start_method
from tests.support.processes import dpone_subprocess
from tests.support.scaleout import OWN_CLUSTER, csv_files, write_manifest

CSV = {"type": "file", "format": "csv", "path": "data/*.csv"}


@pytest.mark.dask
@pytest.mark.slow
def test_a_driver_killed_mid_run_leaves_no_worker_and_the_next_run_goes_through(
    tmp_path: Path,
) -> None:
    csv_files(tmp_path, files=3, rows=20_000)
    manifest = write_manifest(tmp_path, "forked", "dask", CSV, **OWN_CLUSTER)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DPONE_")}
    driver = subprocess.Popen(
        [sys.executable, "-m", "dpone", "run", str(manifest)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert driver.stderr is not None
    try:
        for line in driver.stderr:  # the workers log to the driver's stderr (inherited)
            if '"partition.start"' in line:
                break
        else:
            pytest.fail(f"no task started; the driver exited with {driver.wait()}")
        workers = psutil.Process(driver.pid).children(recursive=True)
        assert workers, "the local cluster has no worker process"
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        driver.stderr.close()
    _, alive = psutil.wait_procs(workers, timeout=30)
    assert not alive, "a forked worker outlived the driver that was killed"
    # The killed run's locks went with it: the next run takes them, recovers and loads.
    again = dpone_subprocess(["run", "--format", "json", str(manifest)], cwd=tmp_path, env={})
    assert again.returncode == 0, again.stderr
    bad = len(range(0, 20_000, 97))  # csv_files: every 97th amount is not a number
    assert json.loads(again.stdout)["rows"]["loaded"] == 3 * (20_000 - bad)


def test_the_local_cluster_forks_on_linux_and_keeps_dasks_setting_elsewhere() -> None:
    import dask
    import distributed  # noqa: F401  (its config holds the setting, as in cluster_client)

    expected = dask.config.get("distributed.worker.multiprocessing-method")
    assert start_method() == ("fork" if sys.platform == "linux" else expected)


@pytest.fixture
def unfrozen() -> Iterator[None]:
    """No object frozen when the test starts: an in-process ``dpone run`` of an earlier test
    (the CLI freezes what its imports and compile made) must not decide what this one sees."""
    gc.unfreeze()
    yield
    gc.unfreeze()


@pytest.mark.usefixtures("unfrozen")
def test_objects_are_frozen_only_while_forked_workers_share_them() -> None:
    before = gc.get_freeze_count()
    assert before == 0
    with frozen_for_fork("fork"):
        assert gc.get_freeze_count() > before
    assert gc.get_freeze_count() == before
    with frozen_for_fork("spawn"):
        assert gc.get_freeze_count() == before


@pytest.mark.usefixtures("unfrozen")
def test_a_freeze_of_the_calling_application_is_left_alone() -> None:
    gc.freeze()  # as an application calling dpone.api.run might have
    try:
        # A frozen object can still be freed by its reference count: the count may only
        # fall, never grow (a second freeze) nor drop to nothing (an unfreeze).
        frozen = gc.get_freeze_count()
        with frozen_for_fork("fork"):
            assert 0 < gc.get_freeze_count() <= frozen
        assert 0 < gc.get_freeze_count() <= frozen  # not unfrozen by the cluster's end
    finally:
        gc.unfreeze()
