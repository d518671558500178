#!/usr/bin/env python3
"""The Python module's costs (issue 17):

  * the Python training loop (`while s.train()`, the loss read every `display` steps as a display
    line reads it) against `ember train` on the same run: the steady-state samples/s of each
    display window after the first, the median over windows, alternating runs; target: the
    loop is at most 2 % slower;
  * predict() on numpy batches of 1, 64 and 4096 samples: median latency and samples/s.

    bench_python.py [--config FILE] [--iterations N] [--display N] [--repeats R]
                    [--samples N] [--device cpu|cuda] [--work DIR] [--quick]

The dataset is made by `ember datagen --like CONFIG`. Needs PYTHONPATH at the built package and
EMBER_EXE at the `ember` executable (build/bench/bench_python sets both). Prints its figures and
ends with "SUMMARY | python | ..." lines (scripts/gpu-check gathers them).
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import ember

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def cli_windows(exe, config, settings, device):
    """samples/s of every display window of `ember train`, in order."""
    args = [exe, "train", config, "--no-progress"]
    if device:
        args += ["--device", device]
    for key, value in settings.items():
        args += ["--set", f"{key}={value}"]
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"bench_python: ember train failed:\n{out.stderr[-2000:]}")
    return [float(m.group(1)) for m in re.finditer(r"^iter=\d+ .*samples/s=(\d+)", out.stdout,
                                                   re.M)]


def python_windows(config, settings, device, iterations, display, batch):
    """samples/s of every `display` steps of the Python loop, the loss read at each window's
    end (as the CLI's display line reads it)."""
    s = ember.Session(config, device=device, set=settings, quiet=True)
    rates = []
    start = time.perf_counter()
    for step in range(1, iterations + 1):
        s.train()
        if step % display == 0:
            s.get_current_loss()
            now = time.perf_counter()
            rates.append(display * batch / (now - start))
            start = now
    s.close()
    return rates


def steady(rates):
    """The median window rate, the first window (start-up) left out."""
    return statistics.median(rates[1:] if len(rates) > 1 else rates)


def bench_loop(args, config, data, batch):
    settings = {"layers.data.source": os.path.join(data, "train.txt"),
                "layers.data.eval_source": "", "solver.max_iter": args.iterations,
                "solver.display": args.display, "solver.eval_interval": 0, "solver.snapshot": 0}
    cli, py = [], []
    for r in range(args.repeats):
        cli.append(steady(cli_windows(args.ember, config, settings, args.device)))
        py.append(steady(python_windows(config, settings, args.device, args.iterations,
                                        args.display, batch)))
        print(f"  run {r + 1}: ember train {cli[-1]:,.0f} samples/s, Python loop "
              f"{py[-1]:,.0f} samples/s")
    cli_rate, py_rate = statistics.median(cli), statistics.median(py)
    overhead = (cli_rate / py_rate - 1) * 100
    print(f"training loop: ember train {cli_rate:,.0f} samples/s, Python train() loop "
          f"{py_rate:,.0f} samples/s: overhead {overhead:+.2f} % (target <= 2 %)")
    return overhead


def bench_predict(args, config, data):
    s = ember.Session(config, device=args.device, quiet=True,
                      set={"layers.data.source": os.path.join(data, "train.txt"),
                           "layers.data.eval_source": ""})
    c = s.config
    dense_dim = s._s.dense_dim
    slots = sum(n for _, n in s._s.sparse_inputs)
    rng = np.random.default_rng(7)
    results = {}
    for rows in (1, 64, 4096):
        dense = rng.standard_normal((rows, dense_dim)).astype(np.float32)
        keys = rng.integers(0, 2000, size=(rows, slots), dtype=np.int64)
        for _ in range(3):
            s.predict(dense, keys)
        times = []
        begin = time.perf_counter()
        while len(times) < 20 or (time.perf_counter() - begin < 1.0 and len(times) < 2000):
            t = time.perf_counter()
            s.predict(dense, keys)
            times.append(time.perf_counter() - t)
        ms = statistics.median(times) * 1e3
        results[rows] = (ms, rows / (ms / 1e3))
        print(f"predict {rows:>5} samples: {ms:.3f} ms median of {len(times)}, "
              f"{rows / (ms / 1e3):,.0f} samples/s (batchsize_eval "
              f"{c['solver'].get('batchsize_eval', c['solver']['batchsize'])})")
    s.close()
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default=os.path.join(ROOT, "configs", "dlrm.json"))
    ap.add_argument("--iterations", type=int, default=3000)
    ap.add_argument("--display", type=int, default=250)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--samples", type=int, default=1 << 20)
    ap.add_argument("--device", default=None, help="cpu or cuda (default: the solver's)")
    ap.add_argument("--work", default=None)
    ap.add_argument("--ember", default=os.environ.get("EMBER_EXE", os.path.join(ROOT, "build",
                                                                                "ember")))
    ap.add_argument("--quick", action="store_true",
                    help="the small reference DLRM on the CPU, a few hundred steps")
    args = ap.parse_args()
    if args.quick:
        args.config = os.path.join(ROOT, "tests", "reference", "dlrm_small.json")
        args.iterations, args.display, args.repeats, args.samples = 300, 50, 2, 65536
        args.device = args.device or "cpu"
    config = os.path.abspath(args.config)
    work = args.work or tempfile.mkdtemp(prefix="bench-python-")
    data = os.path.join(work, "data")
    if not os.path.exists(os.path.join(data, "train.txt")):
        subprocess.run([args.ember, "datagen", "--like", config, "--out", data, "--samples",
                        str(args.samples), "--eval-samples", "4096"], check=True,
                       stdout=subprocess.DEVNULL)
    probe = ember.Session(config, device=args.device, quiet=True,
                          set={"layers.data.source": os.path.join(data, "train.txt")})
    batch = probe.config["solver"]["batchsize"]
    devices = probe.devices
    probe.close()
    print(f"bench_python: {config} on {devices}, batch {batch}, {args.iterations} iterations, "
          f"display every {args.display}, {args.repeats} alternating runs")
    overhead = bench_loop(args, config, data, batch)
    predict = bench_predict(args, config, data)
    print()
    met = "yes" if overhead <= 2.0 else "NO"
    print(f"SUMMARY | python | train() loop vs ember train ({devices}) | {overhead:+.2f} % | "
          f"<= 2 % | {met}")
    for rows, (ms, rate) in predict.items():
        print(f"SUMMARY | python | predict {rows} samples ({devices}) | {ms:.3f} ms, "
              f"{rate:,.0f} samples/s | - | -")


if __name__ == "__main__":
    main()
