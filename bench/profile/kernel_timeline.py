#!/usr/bin/env python3
"""A kernel timeline from kernel_trace.cpp's CSV files, for machines without Nsight Systems.

  kernel_timeline.py run --lib build-gpu/bench/libember_kernel_trace.so --trace /tmp/t -- CMD...
      runs CMD with the CUPTI library injected; every CUDA process it starts writes
      /tmp/t.<pid>.csv.
  kernel_timeline.py report /tmp/t [--ms 9] [--at 0.66] [--out timeline.txt]
      a window of --ms milliseconds, starting --at that fraction of the way through the kernels
      of the highest-numbered device (through its NCCL kernels where there are any: the
      multi-GPU part of a run): every kernel and copy of each device in it (start and length in
      us, stream, when the host launched it and from which thread, name, blocks), each stream's
      busy time, the time any stream was busy, and the kernels' totals on device 0.
"""
import argparse
import collections
import glob
import os
import subprocess
import sys


def load(prefix):
    records, launches = [], {}
    files = glob.glob(prefix + ".*.csv")
    if not files:
        sys.exit(f"kernel_timeline: no {prefix}.<pid>.csv files")
    for path in files:
        with open(path) as f:
            for line in f:
                p = line.rstrip("\n").split(",", 7)
                if len(p) < 8:
                    continue
                kind, start, end = p[0], int(p[1]), int(p[2])
                corr = int(p[6])
                if kind == "A":
                    # The first host call of a correlation id launched the work.
                    if corr not in launches or start < launches[corr][0]:
                        launches[corr] = (start, int(p[4]))
                    continue
                records.append((start, end, int(p[3]), int(p[4]), int(p[5]), p[7], corr))
    records.sort()
    return records, launches


def busy_union(intervals):
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (cur_e - cur_s if cur_e is not None else 0)


def report(args):
    records, launches = load(args.prefix)
    if not records:
        sys.exit("kernel_timeline: no kernels or copies recorded")
    last = max(r[2] for r in records)
    on_last = [r for r in records if r[2] == last]
    nccl = [r for r in on_last if "nccl" in r[5].lower()]
    anchor = nccl or on_last
    w0 = anchor[min(len(anchor) - 1, int(len(anchor) * args.at))][0]
    w1 = w0 + int(args.ms * 1e6)
    out = open(args.out, "w") if args.out else sys.stdout
    summary = []
    for dev in sorted({r[2] for r in records}):
        window = [r for r in records if r[2] == dev and r[1] > w0 and r[0] < w1]
        out.write(f"==== device {dev}: {len(window)} kernels and copies in {args.ms} ms\n")
        out.write("   start_us  length  stream  launched_us thread  name [blocks]\n")
        busy = collections.defaultdict(float)
        for s, e, _, stream, blocks, name, corr in window:
            launch = launches.get(corr)
            at = f"{(launch[0] - w0) / 1000:10.1f} t{launch[1] % 100000:<5}" if launch else " " * 17
            out.write(f"{(s - w0) / 1000:10.1f} {(e - s) / 1000:7.1f}  s{stream:<5} {at}  "
                      f"{name[:100]} [{blocks}]\n")
            busy[stream] += (min(e, w1) - max(s, w0)) / 1000
        any_busy = busy_union((max(s, w0), min(e, w1)) for s, e, *_ in window) / 1000
        line = (f"device {dev}: some stream busy {any_busy:.0f} of {args.ms * 1000:.0f} us; "
                f"per stream (us): " + ", ".join(f"s{k} {v:.0f}" for k, v in sorted(busy.items())))
        out.write(line + "\n")
        summary.append(line)
    totals = collections.defaultdict(lambda: [0, 0.0])
    for s, e, dev, _, _, name, _ in records:
        if dev == 0 and e > w0 and s < w1:
            totals[name[:100]][0] += 1
            totals[name[:100]][1] += (e - s) / 1000
    out.write("==== device 0: totals by kernel in the window (us, count)\n")
    for name, (count, us) in sorted(totals.items(), key=lambda t: -t[1][1]):
        out.write(f"{us:10.1f} {count:5d}  {name}\n")
    if args.out:
        out.close()
        for line in summary:
            print(line)


def run(args):
    if not os.path.isfile(args.lib):
        sys.exit(f"kernel_timeline: no trace library at {args.lib}")
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        sys.exit("kernel_timeline run: no command given")
    env = dict(os.environ, CUDA_INJECTION64_PATH=os.path.abspath(args.lib),
               KERNEL_TRACE_OUT=args.trace)
    sys.exit(subprocess.call(command, env=env))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    r = sub.add_parser("run")
    r.add_argument("--lib", required=True)
    r.add_argument("--trace", default="/tmp/kernel-trace")
    r.add_argument("command", nargs=argparse.REMAINDER)
    p = sub.add_parser("report")
    p.add_argument("prefix")
    p.add_argument("--ms", type=float, default=9.0)
    p.add_argument("--at", type=float, default=0.66)
    p.add_argument("--out")
    args = parser.parse_args()
    run(args) if args.what == "run" else report(args)


if __name__ == "__main__":
    main()
