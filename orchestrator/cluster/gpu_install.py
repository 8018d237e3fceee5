"""The GPU install: which vLLM the `[gpu]` extra pins, whether that install resolves, and whether a node has it.

Why: on GPUs every campaign trains through verl's vLLM rollout and evaluates through lm-eval's vLLM backend; CI runs
the same vLLM version's CPU build (`make venv-vllm`). The GPU install itself (CUDA wheels) cannot be installed on
a CPU machine, but it can be resolved: `uv pip compile` for linux x86_64 reads every wheel's metadata, so a pin that
conflicts with verl's (verl 0.9.1 wants transformers < 5.11, vLLM 0.32 wants >= 5.16.1) fails here, in CI, before a
researcher meets it on a cluster. `python -m orchestrator.cluster.gpu_install` (`make check-gpu-resolve`) prints the
resolved vLLM, torch and transformers and exits 1 on a conflict; `campaign doctor` compares every GPU node's vLLM with
the pin (`pin_findings`)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, requires
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import InvalidVersion, Version

REPO = Path(__file__).resolve().parents[2]
PLATFORM = "x86_64-manylinux_2_28"  # linux x86_64, the platform CUDA wheels are published for
SHOWN = ("vllm", "torch", "transformers", "verl")


def pinned_vllm(pyproject: Path | None = None) -> str | None:
    """The version the `[gpu]` extra pins (`vllm==X`): from `pyproject` (default: the source checkout's), else from
    the installed distribution's metadata; None when neither pins one exactly."""
    reqs: list[str] = []
    if pyproject is None and (REPO / "pyproject.toml").is_file():
        pyproject = REPO / "pyproject.toml"
    if pyproject is None:
        try:
            reqs = [r for r in requires("windtunnel") or [] if 'extra == "gpu"' in r]
        except PackageNotFoundError:
            return None
    else:
        import tomllib

        reqs = list(tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"].get("gpu", []))
    for raw in reqs:
        req = Requirement(raw)
        if req.name == "vllm":
            exact = [s.version for s in req.specifier if s.operator == "=="]
            return exact[0] if exact else None
    return None


def same_release(installed: str | None, pinned: str | None) -> bool:
    """`0.31.0+cpu` (vLLM's CPU build) is release 0.31.0: the local label names the build, not the API."""
    if installed is None or pinned is None:
        return False
    try:
        return Version(installed).public == Version(pinned).public
    except InvalidVersion:
        return installed == pinned


@dataclass
class Resolution:
    ok: bool
    versions: dict[str, str] = field(default_factory=dict)
    cuda_packages: int = 0
    error: str = ""

    def lines(self) -> list[str]:
        if not self.ok:
            return ["the GPU install does not resolve for linux x86_64:", self.error.strip()]
        shown = ", ".join(f"{k} {self.versions.get(k, 'absent')}" for k in SHOWN)
        return [f"the GPU install resolves for linux x86_64 (CUDA wheels, {self.cuda_packages} nvidia-* packages): "
                f"{shown}"]


def uv_binary() -> str:
    """uv from the venv running this (the Makefile installs it there), else from PATH."""
    here = Path(sys.executable).with_name("uv")
    found = str(here) if here.exists() else shutil.which("uv")
    if found is None:
        raise FileNotFoundError("uv not found: `make venv` installs it into .venv/bin")
    return found


def resolve(vllm_requirement: str | None = None, *, python_version: str = "3.11", timeout_s: float = 300.0
            ) -> Resolution:
    """Resolve `pip install '.[gpu]'` for linux x86_64 without installing anything. `vllm_requirement` replaces the
    extra's pin (`vllm==0.32.0`: what would a GPU user get with that one?)."""
    with tempfile.TemporaryDirectory() as tmp:
        req = Path(tmp) / "gpu.in"
        extra = "" if vllm_requirement else "[gpu]"
        req.write_text(f"windtunnel{extra} @ file://{REPO.as_posix()}\n"
                       + (f"{vllm_requirement}\n" if vllm_requirement else ""))
        argv = [uv_binary(), "pip", "compile", "--quiet", "--no-header", "--no-annotate", "--python-version",
                python_version, "--python-platform", PLATFORM, str(req)]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    if out.returncode != 0:
        return Resolution(False, error=out.stderr or out.stdout)
    versions: dict[str, str] = {}
    for line in out.stdout.splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)==(\S+)", line.strip())
        if m:
            versions[m.group(1).lower().replace("_", "-")] = m.group(2)
    return Resolution(True, versions, sum(1 for k in versions if k.startswith("nvidia-")))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    res = resolve(args[0] if args else None)
    print("\n".join(res.lines()))
    if res.ok and not same_release(res.versions.get("vllm"), pinned_vllm()) and not args:
        print(f"resolved vllm {res.versions.get('vllm')} is not the pinned {pinned_vllm()}")
        return 1
    return 0 if res.ok else 1


if __name__ == "__main__":
    sys.exit(main())
