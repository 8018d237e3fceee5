"""Print the suite report tests/conftest.py wrote ($WT_SUITE_REPORT): wall time, CPU-seconds, ten slowest tests, ten
costliest modules and the totals per tier. `--markdown N`: the N costliest modules as the table of
docs/guide/benchmarks.md (wall, CPU share, what real component each starts)."""

import json
import sys

rep = json.load(open(sys.argv[1]))
if len(sys.argv) > 3 and sys.argv[2] == "--markdown":
    print("| module | tier | tests | wall s (summed) | CPU-s share | starts |")
    print("|---|---|--:|--:|--:|---|")
    for m in rep.get("modules", [])[:int(sys.argv[3])]:
        starts = ", ".join(m.get("starts", [])) or "—"
        print(f"| `{m['module']}` | {m['tier']} | {m['tests']} | {m['wall_s']:.0f} | {m['cpu_s']:.0f} | {starts} |")
    for tier, t in rep.get("tiers", {}).items():
        print(f"| all {tier} ({t['modules']} modules) | {tier} | | {t['wall_s']:.0f} | {t['cpu_s']:.0f} | |")
    print(f"\nSuite: {rep['wall_s']:.0f} s wall, {rep['machine_cpu_s']} CPU-s of the machine, {rep['tests']} tests.")
    sys.exit(0)
print(f"suite: {rep['wall_s']:.0f} s wall, {rep['machine_cpu_s']} CPU-s of the machine, {rep['tests']} tests")
print("its ten slowest tests (make them cheaper without weakening what they prove):")
for t in rep["slowest"][:10]:
    print(f"  {t['wall_s']:7.1f} s  {t['test']}")
print("its ten costliest modules (wall s summed, CPU-s share, tier, the real components it starts):")
for m in rep.get("modules", [])[:10]:
    starts = ", ".join(m.get("starts", []))
    print(f"  {m['wall_s']:7.1f} s  {m['cpu_s']:7.1f} CPU-s  {m['tier']:4}  {m['module']}  {starts}")
for tier, t in rep.get("tiers", {}).items():
    print(f"tier {tier}: {t['modules']} modules, {t['wall_s']:.0f} s wall summed, {t['cpu_s']:.0f} CPU-s")
