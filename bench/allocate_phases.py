#!/usr/bin/env python3
"""Splits each Allocate call of a `perf trace -T` of dowserd and the harness
(bench/trace-allocate.sh) into phases:

  request     the harness sends the request -> a gRPC thread of dowserd reads it
  hop         -> dowserd's core thread takes the store lock (the claim starts)
  store       -> the journal's fdatasync returns (the claim is durable)
  answer      -> the core thread has sent the reply
  reply       -> a harness thread reads the reply

Calls are told apart by dowserd's core thread (the one that takes the store
lock exclusively) sending a reply; the CL plugin's calls all go over one
connection, so the socket used most is CL's, every other one an IL plugin's.
CL calls alternate between back to back (first) and with the lists settled.
"""
import re
import sys
from collections import Counter

LINE = re.compile(
    r"^\s*([\d.]+) \(\s*([\d.]*)(?: ms)?\s*\): (\S+)/(\d+) +(?:\.\.\. \[continued\]: )?"
    r"(\w+)\((?:fd: (\d+))?.*?(?:= (-?\d+))?\s*$")


def events(path):
    found = []
    # A call that blocked is printed twice: its start with its arguments, then
    # "... [continued]" with the result but no arguments.
    unfinished_fd = {}
    for line in open(path, encoding="utf-8", errors="replace"):
        match = LINE.match(line)
        if not match:
            continue
        start, duration, comm, tid, call, fd, result = match.groups()
        if "[continued]" in line:
            fd = unfinished_fd.pop((tid, call), None)
        elif not duration:
            unfinished_fd[(tid, call)] = fd
            continue
        found.append({
            "end": float(start) + float(duration),  # ms
            "comm": comm, "tid": int(tid), "call": call,
            "fd": int(fd) if fd else None,
            "result": int(result) if result else None,
            "exclusive": "cmd: EX" in line,
        })
    found.sort(key=lambda event: event["end"])
    return found


def last_before(found, index, accept):
    while index >= 0 and not accept(found[index]):
        index -= 1
    return index


def calls_of(found):
    core = next(e["tid"] for e in found if e["call"] == "flock" and e["exclusive"])
    harness = {e["tid"] for e in found if e["comm"].startswith("dowser-bench")}
    calls = []
    for i, reply in enumerate(found):
        if reply["tid"] != core or reply["call"] != "sendmsg" or (reply["result"] or 0) < 100:
            continue
        lock = last_before(found, i - 1, lambda e: e["tid"] == core and e["call"] == "flock")
        read = last_before(found, lock - 1, lambda e: e["call"] == "recvmsg" and
                           e["fd"] == reply["fd"] and (e["result"] or 0) > 20)
        sent = last_before(found, read - 1, lambda e: e["tid"] in harness and
                           e["call"] == "sendmsg" and (e["result"] or 0) > 20)
        syncs = [e for e in found[lock:i] if e["tid"] == core and e["call"] == "fdatasync"]
        if min(lock, read, sent) < 0 or not syncs:
            continue
        # The harness reads the reply on the socket it sent the request on.
        received = next((e for e in found[i + 1:] if e["call"] == "recvmsg" and
                         e["fd"] == found[sent]["fd"] and e["result"] == reply["result"] and
                         e["tid"] != core), None)
        if received is None:
            continue
        calls.append({"fd": reply["fd"], "reply_index": i, "core": core, "times": [
            found[sent]["end"], found[read]["end"], found[lock]["end"], syncs[-1]["end"],
            reply["end"], received["end"]]})
    return calls


def core_syscalls_per_call(found, chosen):
    """The core thread's system calls from one reply to the next, on average."""
    counts = Counter()
    for before, after in zip(chosen, chosen[1:]):
        for event in found[before["reply_index"] + 1:after["reply_index"] + 1]:
            if event["tid"] == before["core"]:
                counts[event["call"]] += 1
    intervals = max(1, len(chosen) - 1)
    return sum(counts.values()) / intervals, {
        call: round(count / intervals, 1) for call, count in counts.most_common(8)}


def quantile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main():
    found = events(sys.argv[1])
    calls = calls_of(found)
    if not calls:
        sys.exit("no Allocate call found in " + sys.argv[1])
    cl_fd = Counter(call["fd"] for call in calls).most_common(1)[0][0]
    cl = [call for call in calls if call["fd"] == cl_fd]
    kinds = [("IL", [call for call in calls if call["fd"] != cl_fd]),
             ("CL, back to back", cl[0::2]), ("CL, lists settled", cl[1::2])]
    phases = ["request", "hop", "store", "answer", "reply", "total"]
    print("phase p50 / p90 in microseconds (perf trace -T; calls traced: %d)" % len(calls))
    print("%-20s" % "kind" + "".join("%16s" % phase for phase in phases) + "%6s" % "n")
    for kind, chosen in kinds:
        if not chosen:
            continue
        row = "%-20s" % kind
        for index, _ in enumerate(phases):
            first, last = (index, index + 1) if index < 5 else (0, 5)
            spans = [(call["times"][last] - call["times"][first]) * 1000 for call in chosen]
            row += "%16s" % ("%.0f / %.0f" % (quantile(spans, 0.5), quantile(spans, 0.9)))
        print(row + "%6d" % len(chosen))
    print("system calls of the core thread per call (only those traced):")
    for kind, chosen in [("IL", kinds[0][1]), ("CL", cl)]:
        if len(chosen) > 1:
            total, top = core_syscalls_per_call(found, chosen)
            print("  %-20s %5.1f  %s" % (kind, total, top))


if __name__ == "__main__":
    main()
