"""Writes a scenario of N kernels on N streams (one request, one kernel per
stream, then a device sync): the simulator's many-streams case of issue #17.
Usage: python3 scripts/measure/many_streams.py N > big.yaml"""
import sys

n = int(sys.argv[1])
print("schema_version: 1")
print(f"name: many-streams-{n}")
print("family: benchmark\nvariant: many-streams\ncause: none")
print('description: "one kernel on each of many streams"')
print("mode: instrumented\nseed: 1\nrepetitions: 1")
print("threads:\n  - name: host")
print("streams:")
for i in range(n):
    print(f"  - name: s{i}")
print("programs:\n  - name: fan\n    start: host\n    requests: 1\n    steps:")
for i in range(n):
    sid = ", id: first" if i == 0 else ""
    print(f"      - {{op: kernel{sid}, stream: s{i}, name: k, duration_us: 20}}")
print("      - {op: sync, target: device}")
print("symptom:\n  step: first")
