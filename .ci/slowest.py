"""Print the suite report tests/conftest.py wrote ($WT_SUITE_REPORT): wall time, CPU-seconds, ten slowest tests."""

import json
import sys

rep = json.load(open(sys.argv[1]))
print(f"suite: {rep['wall_s']:.0f} s wall, {rep['machine_cpu_s']} CPU-s of the machine, {rep['tests']} tests")
print("its ten slowest tests (make them cheaper without weakening what they prove):")
for t in rep["slowest"][:10]:
    print(f"  {t['wall_s']:7.1f} s  {t['test']}")
