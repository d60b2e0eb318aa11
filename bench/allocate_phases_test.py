#!/usr/bin/env python3
"""Checks bench/allocate_phases.py on a small trace written the way perf
trace -T writes it: two CL calls over one connection, one IL call whose
reply read was interrupted (printed as a start line and a continued line)."""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import allocate_phases  # noqa: E402

TRACE = """\
  1000.000 ( 0.010 ms): dowser-bench/200 sendmsg(fd: 60, msg: 0x1, flags: NOSIGNAL)   = 64
  1000.100 ( 0.010 ms): nexting_thread/101 recvmsg(fd: 50, msg: 0x1)                  = 64
  1000.300 ( 0.010 ms): dowserd/100 flock(fd: 9, cmd: EX)                             = 0
  1000.320 (         ): dowserd/100 fdatasync(fd: 8)                                  ...
  1000.320 ( 0.300 ms): dowserd/100  ... [continued]: fdatasync())                    = 0
  1000.700 ( 0.010 ms): dowserd/100 sendmsg(fd: 50, msg: 0x1, flags: NOSIGNAL)        = 150
  1000.790 ( 0.010 ms): nexting_thread/201 recvmsg(fd: 60, msg: 0x1)                  = 150
  1001.000 ( 0.010 ms): dowser-bench/200 sendmsg(fd: 60, msg: 0x1, flags: NOSIGNAL)   = 64
  1001.200 ( 0.010 ms): nexting_thread/101 recvmsg(fd: 50, msg: 0x1)                  = 64
  1001.500 ( 0.010 ms): dowserd/100 flock(fd: 9, cmd: EX)                             = 0
  1001.510 ( 0.400 ms): dowserd/100 fdatasync(fd: 8)                                  = 0
  1002.010 ( 0.010 ms): dowserd/100 sendmsg(fd: 50, msg: 0x1, flags: NOSIGNAL)        = 152
  1002.100 ( 0.010 ms): nexting_thread/201 recvmsg(fd: 60, msg: 0x1)                  = 152
  1003.000 ( 0.010 ms): dowser-bench/200 sendmsg(fd: 61, msg: 0x1, flags: NOSIGNAL)   = 70
  1003.050 ( 0.010 ms): nexting_thread/101 recvmsg(fd: 51, msg: 0x1)                  = 70
  1003.250 ( 0.010 ms): dowserd/100 flock(fd: 9, cmd: EX)                             = 0
  1003.260 ( 0.250 ms): dowserd/100 fdatasync(fd: 8)                                  = 0
  1003.600 ( 0.010 ms): dowserd/100 sendmsg(fd: 51, msg: 0x1, flags: NOSIGNAL)        = 220
  1003.690 (         ): nexting_thread/201 recvmsg(fd: 61, msg: 0x1)                  ...
  1003.690 ( 0.020 ms): nexting_thread/201  ... [continued]: recvmsg())               = 220
"""


def spans(call):
    times = call["times"]
    return [round((later - earlier) * 1000) for earlier, later in zip(times, times[1:])]


class AllocatePhasesTest(unittest.TestCase):
    def setUp(self):
        handle, self.path = tempfile.mkstemp(suffix=".trace")
        with os.fdopen(handle, "w") as trace:
            trace.write(TRACE)

    def tearDown(self):
        os.remove(self.path)

    def test_each_call_is_split_into_its_phases(self):
        calls = allocate_phases.calls_of(allocate_phases.events(self.path))
        self.assertEqual([call["fd"] for call in calls], [50, 50, 51])
        # request, hop, store, answer, reply in microseconds
        self.assertEqual(spans(calls[0]), [100, 200, 310, 90, 90])
        self.assertEqual(spans(calls[1]), [200, 300, 400, 110, 90])
        # the reply read printed in two lines keeps its socket
        self.assertEqual(spans(calls[2]), [50, 200, 250, 100, 100])

    def test_the_core_thread_s_calls_are_counted_between_replies(self):
        found = allocate_phases.events(self.path)
        calls = allocate_phases.calls_of(found)
        total, by_call = allocate_phases.core_syscalls_per_call(found, calls[:2])
        self.assertEqual(total, 3)
        self.assertEqual(by_call, {"flock": 1.0, "fdatasync": 1.0, "sendmsg": 1.0})


if __name__ == "__main__":
    unittest.main()
