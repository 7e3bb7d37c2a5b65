#!/usr/bin/env python3
"""Summarizes a compute-sanitizer log in one line.

usage: sanitizer_summary.py LOG

Prints "TOOL: N errors of ours ..." and exits 1 when there is one, or when the log has no
summary (the sanitizer did not finish). API errors whose host backtrace runs through libnccl
are NCCL's own (it probes kernel images and attributes as it initializes, expecting some calls
to fail) and are counted apart; racecheck's warnings are shown, not counted.
"""
import re, sys
lines = open(sys.argv[1], errors="replace").read().splitlines()
records, current = [], None
for line in lines:
    if not line.startswith("========="):
        continue
    body = line[len("========="):]
    if not body.strip():
        current = None
    elif body.startswith(" ") and not body.startswith("  "):
        current = [body.strip()]
        records.append(current)
    elif current is not None:
        current.append(body.strip())
tool = "memcheck"
ours, nccl, warnings, summary = [], 0, 0, None
for r in records:
    head = r[0]
    if head.startswith("COMPUTE-SANITIZER"):
        continue
    m = re.match(r"(ERROR|RACECHECK) SUMMARY: (.*)", head)
    if m:
        if m.group(1) == "RACECHECK":
            tool = "racecheck"
        summary = (summary + "; " if summary else "") + head
        continue
    if head.startswith(("LEAK SUMMARY", "Target application returned", "This application")):
        continue
    if head.startswith("Warning:"):
        warnings += 1
        continue
    if "on CUDA API call to" in head and any("libnccl" in x for x in r if "Host Frame" in x):
        nccl += 1
        continue
    ours.append(head)
if summary is None:
    print(f"{tool}: no summary in the log: the sanitizer did not finish")
    sys.exit(1)
note = f"{tool}: {len(ours)} errors of ours"
if nccl:
    note += f", {nccl} API errors inside NCCL not counted (host backtrace in libnccl)"
if warnings:
    note += f", {warnings} warnings"
note += f" [{summary}]"
if ours:
    note += f"; first: {ours[0][:160]}"
print(note)
sys.exit(1 if ours else 0)
