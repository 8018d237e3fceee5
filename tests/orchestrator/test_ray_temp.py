"""A stopped head's /tmp temp dir: its job-driver logs are kept in the work dir and the folder goes; a temp dir
inside the work dir is left alone; `job_log` finds a job's log in either place (plain files, no Ray)."""

from __future__ import annotations

from pathlib import Path

from orchestrator.cluster.ray_temp import job_log, outside, release


def _session(tmp: Path, name: str, jobs: dict[str, str]) -> None:
    logs = tmp / name / "logs"
    logs.mkdir(parents=True)
    (logs / "raylet.out").write_text("daemon chatter")
    for sub, text in jobs.items():
        (logs / f"job-driver-{sub}.log").write_text(text)


def test_a_tmp_fallback_is_removed_after_its_job_logs_are_kept(tmp_path: Path) -> None:
    root, tmp, kept = tmp_path / "work", tmp_path / "short-tmp", tmp_path / "work" / "ray_job_logs"
    root.mkdir()
    _session(tmp, "session_1", {"a": "first a", "b": "b's log"})
    _session(tmp, "session_2", {"a": "second a"})  # a head restarted in the same temp dir ran job a again
    assert outside(tmp, root)
    assert job_log(tmp, kept, "a") == tmp / "session_2" / "logs" / "job-driver-a.log"  # the live copy first
    assert release(tmp, root, kept) == 3
    assert not tmp.exists()
    assert sorted(p.name for p in kept.iterdir()) == ["job-driver-a.log", "job-driver-b.log"]  # no daemon logs
    assert job_log(None, kept, "a").read_text() == "second a" and job_log(tmp, kept, "b").read_text() == "b's log"
    assert job_log(None, kept, "missing") is None


def test_a_temp_dir_inside_the_work_dir_is_left_as_it_is(tmp_path: Path) -> None:
    root = tmp_path / "w"
    tmp = root / "ray"
    _session(tmp, "session_1", {"a": "log"})
    assert not outside(tmp, root)
    assert release(tmp, root, root / "ray_job_logs") == 0
    assert (tmp / "session_1" / "logs" / "job-driver-a.log").is_file() and not (root / "ray_job_logs").exists()
    assert release(tmp_path / "gone", root, root / "ray_job_logs") == 0  # nothing there: nothing to do
