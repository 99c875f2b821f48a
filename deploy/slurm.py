"""Dask workers for ``jaxgrader grade --dask`` on a SLURM cluster, with dask-jobqueue.

Run this on the login node, in the course's environment (a virtual environment on
a file system the compute nodes share, with ``pip install dask-jobqueue``)::

    python deploy/slurm.py --jobs 8 --partition cpu --account my_project
    # prints the scheduler's address and keeps running; in another shell:
    jaxgrader grade --dask tcp://<login-node>:8786

The scheduler runs in this process; every SLURM job starts ``--workers-per-job``
Dask workers with one thread each (one submission at a time per worker, each with
its own sandboxed kernel). Ctrl-C stops the scheduler and cancels the jobs.
``--dry-run`` prints the job script instead of submitting anything.

Compute nodes need what a grading host needs: the course's environment at the
same path (``--python``), bubblewrap (``bwrap``, Debian package ``bubblewrap``),
and unprivileged user namespaces (or root) so the sandbox can start.
"""

from __future__ import annotations

import argparse
import sys
import time


def make_cluster(*, partition: str | None = None, account: str | None = None, walltime: str = "02:00:00",
                 workers_per_job: int = 4, cpus_per_worker: int = 2, memory_per_worker_gb: int = 8,
                 python: str = sys.executable, prologue: list[str] | None = None, port: int = 8786,
                 dashboard_port: int = 8787, interface: str | None = None):
    """A SLURMCluster whose workers grade one submission at a time each."""
    import dask
    from dask_jobqueue import SLURMCluster

    # a task whose worker dies is retried on another worker at most twice (jaxgrader also sets it)
    dask.config.set({"distributed.scheduler.allowed-failures": 2})
    return SLURMCluster(
        queue=partition,
        account=account,
        walltime=walltime,
        processes=workers_per_job,  # Dask workers per job ...
        cores=workers_per_job,  # ... with one thread each
        job_cpu=workers_per_job * cpus_per_worker,  # CPUs SLURM gives the job: the kernels use them
        memory=f"{workers_per_job * memory_per_worker_gb}GB",
        python=python,
        job_script_prologue=prologue or [],
        local_directory="$TMPDIR",
        interface=interface,
        scheduler_options={"port": port, "dashboard_address": f":{dashboard_port}"},  # Dask's own status page
        job_name="jaxgrader",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=4, help="SLURM jobs to start")
    parser.add_argument("--partition")
    parser.add_argument("--account")
    parser.add_argument("--walltime", default="02:00:00")
    parser.add_argument("--workers-per-job", type=int, default=4)
    parser.add_argument("--cpus-per-worker", type=int, default=2)
    parser.add_argument("--memory-per-worker-gb", type=int, default=8,
                        help="above the course's c.LimitedExecute.memory_limit_mb")
    parser.add_argument("--python", default=sys.executable, help="the course environment's python on compute nodes")
    parser.add_argument("--prologue", action="append", help="a line to run before the workers, e.g. 'module load x'")
    parser.add_argument("--port", type=int, default=8786)
    parser.add_argument("--interface", help="network interface the workers reach the scheduler on, e.g. ib0")
    parser.add_argument("--dry-run", action="store_true", help="print the job script and exit")
    args = parser.parse_args(argv)
    cluster = make_cluster(partition=args.partition, account=args.account, walltime=args.walltime,
                           workers_per_job=args.workers_per_job, cpus_per_worker=args.cpus_per_worker,
                           memory_per_worker_gb=args.memory_per_worker_gb, python=args.python,
                           prologue=args.prologue, port=args.port, interface=args.interface)
    try:
        if args.dry_run:
            print(cluster.job_script())
            return 0
        cluster.scale(jobs=args.jobs)
        print(f"scheduler at {cluster.scheduler_address}: jaxgrader grade --dask {cluster.scheduler_address}",
              flush=True)
        while True:
            time.sleep(60)
            print(f"{len(cluster.scheduler_info.get('workers', {}))} workers", flush=True)
    except KeyboardInterrupt:
        return 0
    finally:
        cluster.close()


if __name__ == "__main__":
    sys.exit(main())
