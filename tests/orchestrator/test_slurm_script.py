"""The batch script `campaign slurm` writes from a user's values (issue 59): every value is checked where it enters
(`SlurmRequest.check`, exit 2, nothing written) and none can add a line or an option of its own to the script. The
hostile values below once wrote a `touch …` line into the script from `--partition`."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from orchestrator.cluster.slurm import SlurmRequest, batch_script, slurm_time_s, submit_allocations
from wtcommon.errors import UserError

REPO = Path(__file__).resolve().parents[2]


def _req(tmp_path: Path, **kw) -> SlurmRequest:
    camp = tmp_path / "c.yaml"
    camp.write_text("name: c\n")
    return SlurmRequest(camp, tmp_path / "w", **kw)


HOSTILE = [
    ({"partition": "gpu\ntouch /tmp/pwned"}, "--partition"),
    ({"partition": "gpu --wrap=id"}, "--partition"),
    ({"time_limit": "24:00:00\ntouch /tmp/pwned"}, "--time"),
    ({"time_limit": "tomorrow"}, "--time"),
    ({"time_limit": "0"}, "--time"),
    ({"time_limit": "1", "signal_s": 90}, "--signal"),  # 60 s limit: the drain signal would never come
    ({"signal_s": 5}, "--signal"),
    ({"signal_s": 70000}, "--signal"),
    ({"sbatch_args": ("--account=x\ntouch /tmp/pwned",)}, "--sbatch-arg"),
    ({"sbatch_args": ("--comment=a b",)}, "--sbatch-arg"),
    ({"sbatch_args": ("account=x",)}, "--sbatch-arg"),
    ({"sbatch_args": ("--output=/tmp/elsewhere",)}, "writes that option itself"),
    ({"sbatch_args": ("--time=1",)}, "campaign slurm --time"),
    ({"sbatch_args": ("-N2",)}, "writes that option itself"),
    ({"ledger_url": "postgresql://u@h/db\necho hi"}, "--ledger-url"),
    ({"ledger_url": "not a url"}, "--ledger-url"),
]


@pytest.mark.parametrize("values, named", HOSTILE, ids=[str(i) for i in range(len(HOSTILE))])
def test_a_hostile_value_is_refused_before_anything_is_written(tmp_path: Path, values, named) -> None:
    req = _req(tmp_path, **values)
    with pytest.raises(UserError, match=named.replace("-", r"\-")):
        submit_allocations(req, "c")
    assert not (tmp_path / "w").exists()  # nothing written, nothing submitted


def test_no_line_of_an_accepted_script_comes_from_a_value(tmp_path: Path) -> None:
    """Values that pass carry characters a shell would act on (`;`, `$( )`, quotes, `&`): in `#SBATCH` lines
    sbatch reads them as option text, never as commands, and in the runner's line they are quoted: the script has
    exactly the template's lines, bash parses it, and the exec line splits back into the argv that was meant."""
    req = _req(tmp_path, nodes=2, time_limit="1-00:00:00", signal_s=600, partition="gpu,debug",
               sbatch_args=("--account=a;b", "--comment=$(touch_x)&'q'", "--exclusive"),
               ledger_url="postgresql://u:p%40ss@host:5432/db?sslmode=require&x=$(id)")
    req.check()
    text = batch_script(req, "c")
    lines = text.splitlines()
    sb = [ln for ln in lines if ln.startswith("#SBATCH ")]
    assert [ln.split("=")[0] for ln in sb] == [
        "#SBATCH --job-name", "#SBATCH --nodes", "#SBATCH --ntasks-per-node", "#SBATCH --cpus-per-task",
        "#SBATCH --signal", "#SBATCH --output", "#SBATCH --open-mode", "#SBATCH --time", "#SBATCH --partition",
        "#SBATCH --account", "#SBATCH --comment", "#SBATCH --exclusive"]
    rest = [ln for ln in lines if not ln.startswith("#")]
    assert len(lines) == 1 + len(sb) + 2 + len(rest) and lines[0] == "#!/bin/bash"
    assert [ln.split()[0] for ln in rest] == ["set", "cd", "exec"]
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0
    argv = shlex.split(rest[-1])[1:]
    assert argv[argv.index("--ledger-url") + 1] == req.ledger_url


def test_slurm_times_are_read_as_slurm_reads_them() -> None:
    assert [slurm_time_s(t) for t in ("10", "10:30", "1:00:00", "2-0", "2-1:30", "1-00:00:01", "UNLIMITED")] == [
        600, 630, 3600, 172800, 178200, 86401, None]
    for bad in ("0", "1:2:3:4", "abc", "10\n", "-5", "1 0", ""):
        with pytest.raises(ValueError):
            slurm_time_s(bad)


def test_the_command_refuses_a_newline_in_partition_with_exit_2_and_writes_nothing(tmp_path: Path,
                                                                                    campaign_cli) -> None:
    camp = tmp_path / "c.yaml"
    camp.write_text("name: c\nbackend: noop\n")
    p = campaign_cli(["slurm", str(camp), "--workdir", str(tmp_path / "w"), "--partition", "gpu\ntouch /tmp/pwned"],
                     cwd=REPO)
    assert p.returncode == 2 and "--partition" in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert not (tmp_path / "w").exists()
    f = tmp_path / "afile"
    f.write_text("x")
    p = campaign_cli(["slurm", str(camp), "--workdir", str(f)], cwd=REPO)
    assert p.returncode == 2 and "not a folder" in p.stderr and "Traceback" not in p.stderr, p.stderr
