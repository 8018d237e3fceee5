"""Print the suite report tests/conftest.py wrote ($WT_SUITE_REPORT): wall time, CPU-seconds, ten slowest tests, ten
costliest modules and the totals per tier."""

import json
import sys

rep = json.load(open(sys.argv[1]))
print(f"suite: {rep['wall_s']:.0f} s wall, {rep['machine_cpu_s']} CPU-s of the machine, {rep['tests']} tests")
print("its ten slowest tests (make them cheaper without weakening what they prove):")
for t in rep["slowest"][:10]:
    print(f"  {t['wall_s']:7.1f} s  {t['test']}")
print("its ten costliest modules (wall s summed, CPU-s share, tier):")
for m in rep.get("modules", [])[:10]:
    print(f"  {m['wall_s']:7.1f} s  {m['cpu_s']:7.1f} CPU-s  {m['tier']:4}  {m['module']}")
for tier, t in rep.get("tiers", {}).items():
    print(f"tier {tier}: {t['modules']} modules, {t['wall_s']:.0f} s wall summed, {t['cpu_s']:.0f} CPU-s")
