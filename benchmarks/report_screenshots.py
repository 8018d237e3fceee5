"""Screenshots of the HTML report and its figures, for a reviewer's eye (issue 27).

Builds `campaign report` of a records file (default: the released 171 runs) with `--figures`, then takes
headless-Chromium screenshots of the report: its first screen (what a reader sees on opening it: title, flags,
verdicts) and the whole page, at 1280 px wide. The figures are the report's own PNGs (200 dpi). Prints one row
per file with what it shows and its size; exits 2 naming the fix when Chromium is not installed.

    .venv/bin/python benchmarks/report_screenshots.py [--records FILE] [--out DIR] [--resamples 2000]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RELEASED = REPO.parent / "shared" / "data" / "released_runs_171.csv"
CAMPAIGN = str(Path(sys.executable).with_name("campaign"))
FIGURE_NOTES = {
    "forest": "paired Δ per comparison, one shared axis, margin and A/A bands",
    "p_improve": "probability of improvement with what n seeds allow",
    "aggregate_estimates": "mean / IQM per policy, coloured by mechanism",
    "performance_profile": "top-5 policies plus references",
    "domain_tradeoff": "per-domain Δ sorted by effect, equivalence band",
    "training_curves": "reward, kept fraction, weights and mix proportions per step",
    "rank_correlation": "rank correlation between aggregates, within group and pooled",
}


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def _shot(chromium: str, page: Path, png: Path, height: int, profile: Path) -> None:
    args = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync",
            "--disable-background-networking", "--disable-component-update", f"--user-data-dir={profile}",
            "--hide-scrollbars", "--virtual-time-budget=5000", f"--window-size=1280,{height}",
            f"--screenshot={png}", page.as_uri()]
    subprocess.run(args, capture_output=True, timeout=180, check=False)
    if not png.is_file():
        sys.exit(f"chromium wrote no screenshot {png}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=Path, default=RELEASED)
    ap.add_argument("--runs-dir", type=Path, default=None, help="the runs' folder, for the evidence and curves")
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "windtunnel-report-screenshots")
    ap.add_argument("--resamples", type=int, default=2000)
    a = ap.parse_args()
    chromium = _chromium()
    if chromium is None:
        print("headless Chromium is not installed here (apt-get install -y chromium); no screenshots taken",
              file=sys.stderr)
        sys.exit(2)
    a.out.mkdir(parents=True, exist_ok=True)
    report = a.out / "report.html"
    t0 = time.time()
    cmd = [CAMPAIGN, "report", str(a.records), "--out", str(report), "--figures", str(a.out / "figures"),
           "--resamples", str(a.resamples), "--force"]
    if a.runs_dir is not None:
        cmd += ["--runs-dir", str(a.runs_dir)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        sys.exit(f"campaign report failed ({p.returncode}): {p.stderr[-2000:]}")
    t_report = time.time() - t0
    rows = []
    t1 = time.time()
    _shot(chromium, report, a.out / "report_first_screen.png", 900, a.out / ".profile")
    rows.append(("report_first_screen.png", "what opens: title, flags, verdict table (1280x900)"))
    _shot(chromium, report, a.out / "report_page.png", 9000, a.out / ".profile")
    rows.append(("report_page.png", "the page down to the detail sections (1280x9000)"))
    t_shots = time.time() - t1
    shutil.rmtree(a.out / ".profile", ignore_errors=True)
    for png in sorted((a.out / "figures").glob("*.png")):
        what = next((v for k, v in FIGURE_NOTES.items() if png.stem.startswith(k)), "figure")
        rows.append((f"figures/{png.name}", what))
    w = max(len(r[0]) for r in rows)
    print(f"{'file':<{w}}  {'KiB':>6}  shows")
    for name, what in rows:
        print(f"{name:<{w}}  {(a.out / name).stat().st_size / 1024:>6.0f}  {what}")
    print(f"\nreport {t_report:.1f} s, screenshots {t_shots:.1f} s; files in {a.out}")


if __name__ == "__main__":
    main()
