"""Tuning through a Dask ``distributed`` cluster's executor, unchanged: a LocalCluster of
two worker processes on loopback measures on the workers (each record names the
worker's host and CPU); a crashing candidate never takes a worker down."""

import os

from distributed import Client, LocalCluster

import schedules as S
from schedules.tune import workload_key
from schedules.tune.space import machine_of
from tests.schedules.test_tune import _func, bad_space


def test_tune_on_a_local_dask_cluster_survives_crashes(tmp_path):
    f, path = _func(), tmp_path / "tune.jsonl"
    with LocalCluster(processes=True, n_workers=2, threads_per_worker=1,
                      host="127.0.0.1", dashboard_address=None) as cluster, \
            Client(cluster) as client:
        workers = client.run(os.getpid)
        res = S.tune(f, bad_space, trials=3, database=path, timeout_s=5,
                     executor=client.get_executor(), progress=False, min_repeat_ms=2)
        after = client.run(os.getpid)
    assert res.failures == {"crash": 1, "timeout": 1} and res.best_seconds > 0
    assert len(workers) == 2 and after == workers  # the same two worker processes: none died or restarted
    recs = [r for r in S.Database(path).records(workload_key(f, "llvm"))
            if not r.get("remeasured")]
    assert sorted(str(r["failure"]) for r in recs) == ["None", "crash", "timeout"]
    # each record names the machine and the CPU of the worker that measured it
    cpu = machine_of("llvm").name
    assert all(r["host"] and r["cpu"] == cpu and r["cpu_features"] for r in recs)
