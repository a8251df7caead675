#!/usr/bin/env python3
"""Reads `perf script -F comm,tid,ip,sym` of a profiled idle_server (perf
record -e cpu-clock --call-graph dwarf, bench/idle_server_run.sh --profile)
and prints one JSON line: how many samples the server took, and how many of
them were its timers' work.

A sample is the timers' work when
  - its thread is the shared wheel's (tw-loop, tw-execute, tw-drain), or
  - any frame of its stack is a timer backend's call (Arm, Touch, Cancel of
    LocalBackend, LocalKeptBackend, SharedBackend, AsioBackend,
    AsioKeptBackend, or the bases LocalWheelBackend and SteadyTimerBackend,
    which hold the wheel's Set, Move and Remove, the kept deadline's clock
    read and store, or the steady_timer's expires_after, cancel and
    async_wait, the wait's allocation included), the library's code
    (timingwheel::, AsioLocalWheel's wake-up and its kept deadlines'
    reads), or Asio's timer machinery outside those calls: a wait's
    completion (its handler type names the backend), the timer queue, and
    the reactor's timerfd.
A sample under a close (IdleClose: the socket's shutdown, the reactor's
deregistration) is not counted whatever called it: that is the server's
work whichever backend times it, and the window is meant to hold none.

  perf script -i perf.data -F comm,tid,ip,sym | bench/timer_samples.py
"""
import collections
import json
import re
import sys

TIMER_FRAME = re.compile(
    r"Local(?:Kept|Wheel)?Backend::|SharedBackend::|Asio(?:Kept)?Backend::"
    r"|SteadyTimerBackend::"
    r"|timingwheel::"
    r"|timer_queue<|epoll_reactor::(?:schedule_timer|cancel_timer"
    r"|update_timeout|get_timeout|move_timer)|timerfd")
TIMER_THREAD = re.compile(r"^tw-")
CLOSE_FRAME = re.compile(r"IoThread::IdleClose")


def main():
    samples = timer = 0
    leaves = collections.Counter()
    comm, frames = None, []

    def finish():
        nonlocal samples, timer
        if comm is None:
            return
        samples += 1
        if any(CLOSE_FRAME.search(f) for f in frames):
            return
        if TIMER_THREAD.match(comm) or any(TIMER_FRAME.search(f) for f in frames):
            timer += 1
            leaves[frames[0] if frames else "?"] += 1

    for line in sys.stdin:
        if not line.strip():
            finish()
            comm, frames = None, []
        elif not line[0].isspace():
            finish()
            comm, frames = line.split()[0], []
        else:
            parts = line.split(None, 1)
            sym = parts[1].strip() if len(parts) > 1 else "?"
            frames.append(re.sub(r"\+0x[0-9a-f]+$", "", sym))
    finish()
    print(json.dumps({
        "samples": samples,
        "timer_samples": timer,
        "timer_share": timer / samples if samples else 0.0,
        "top_timer_leaves": leaves.most_common(6),
    }))


if __name__ == "__main__":
    main()
