"""The ray.init fix, proven with a real Ray Job on a local head: a job's driver has RAY_ADDRESS set (Ray's job
supervisor always sets it), so `ray.init(num_cpus=...)` fails there; the environment the verl launcher gives
its `main_ppo` process (`private_runtime_env`) plus `address=local` starts a runtime of its own instead."""

from __future__ import annotations

import json
import sys
import time

import pytest

pytestmark = pytest.mark.slow

CHILD = """
import json, os, shutil, tempfile, ray
temp = tempfile.mkdtemp(prefix="wt-child-")  # not /tmp/ray: nothing left behind
ray.init(address="local", num_cpus=2, num_gpus=1, include_dashboard=False, _temp_dir=temp)
print("CHILD", json.dumps({"gcs": ray.get_runtime_context().gcs_address, "gpus": ray.cluster_resources().get("GPU")}))
ray.shutdown()
shutil.rmtree(temp, ignore_errors=True)
"""

DRIVER = """
import json, os, subprocess, sys
from training.verl_runtime import private_runtime_env
print("DRIVER", json.dumps({"ray_address": os.environ.get("RAY_ADDRESS")}))
naive = subprocess.run([sys.executable, "-c", "import ray; ray.init(num_cpus=2)"], capture_output=True, text=True)
print("NAIVE", naive.returncode, "must not be provided" in naive.stderr)
fixed = subprocess.run([sys.executable, "-c", sys.argv[1]], env=private_runtime_env(dict(os.environ), {}),
                       capture_output=True, text=True)
print(fixed.stdout, fixed.stderr[-2000:] if fixed.returncode else "")
sys.exit(fixed.returncode)
"""


def _wait(ex, sid: str, timeout: float = 240):
    t0 = time.time()
    while time.time() - t0 < timeout:
        st = ex.status(sid)
        if st.done:
            return st
        time.sleep(1)
    raise AssertionError(f"job {sid} did not finish: {ex.logs(sid)[-2000:]}")


def test_job_driver_starts_a_private_runtime_instead_of_failing(head):
    from orchestrator.engine.executor.ray_jobs import RayJobsExecutor

    addr, tok = head
    ex = RayJobsExecutor(addr, token_file=tok)
    sid = f"wt-private-runtime-{int(time.time())}"
    ex.submit(sid, [sys.executable, "-c", DRIVER, CHILD])
    st = _wait(ex, sid)
    logs = ex.logs(sid)
    assert st.state == "SUCCEEDED", logs[-3000:]
    driver = json.loads(logs.split("DRIVER ", 1)[1].splitlines()[0])
    child = json.loads(logs.split("CHILD ", 1)[1].splitlines()[0])
    assert driver["ray_address"]  # the job's driver is attached to the cluster ...
    assert "NAIVE 1 True" in logs  # ... where ray.init(num_cpus=...) fails exactly as in the issue
    assert child["gcs"] != driver["ray_address"]  # the launcher's env gets a runtime of its own
    assert child["gpus"] == 1.0  # with the resources it asked for (the CPU recipe's fake GPU)
