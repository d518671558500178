#!/usr/bin/env python3
"""PyTorch peer of bench_embedding's DLRM-shaped step: one nn.EmbeddingBag per table (mode sum,
sparse gradients), power-law keys like the C++ bench, SGD or Adagrad (both accept sparse
gradients). Times forward, backward + optimizer step, and the whole step with CUDA events
(median of several runs after warm-up). With --json prints one JSON object per optimizer, one a
line: {"optimizer": ..., "forward_ms": ..., "backward_update_ms": ..., "step_ms": ...}."""
import argparse
import json
import math
import sys

import torch


def power_law_indices(size, count, generator, device):
    # P(rank) ~ 1/rank, like the C++ bench (log-uniform ranks), then scattered over the table.
    u = torch.rand(count, generator=generator, device=device, dtype=torch.float64)
    rank = torch.floor(torch.exp(u * math.log(size + 1.0))).to(torch.int64) - 1
    rank = rank.clamp_(0, size - 1)
    return (rank * 2654435761) % size


def median_ms(fn, warmup=2, reps=7):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    times.sort()
    return times[len(times) // 2]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=65536)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--pooling", type=int, default=1)
    p.add_argument("--sizes", type=str, required=True)
    p.add_argument("--optimizer", type=str, default="sgd", help="comma list of sgd, adagrad")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 1
    device = torch.device("cuda")
    sizes = [int(s) for s in args.sizes.split(",")]
    gen = torch.Generator(device=device)
    gen.manual_seed(1)
    batches = []
    for _ in range(3):
        inputs = []
        for size in sizes:
            idx = power_law_indices(size, args.batch * args.pooling, gen, device)
            offsets = torch.arange(0, args.batch * args.pooling, args.pooling, device=device)
            inputs.append((idx, offsets))
        batches.append(inputs)
    grad = torch.rand(args.batch, args.dim, device=device) * 2 - 1
    for name in args.optimizer.split(","):
        tables = torch.nn.ModuleList(
            torch.nn.EmbeddingBag(size, args.dim, mode="sum", sparse=True) for size in sizes
        ).to(device)
        if name == "sgd":
            opt = torch.optim.SGD(tables.parameters(), lr=0.01)
        elif name == "adagrad":
            opt = torch.optim.Adagrad(tables.parameters(), lr=0.01)
        else:
            print(f"unknown optimizer {name}", file=sys.stderr)
            return 2
        state = {"i": 0, "outs": None}

        def forward():
            inputs = batches[state["i"] % 3]
            state["i"] += 1
            state["outs"] = [t(idx, off) for t, (idx, off) in zip(tables, inputs)]

        def backward_update():
            torch.autograd.backward(state["outs"], [grad] * len(state["outs"]))
            opt.step()
            opt.zero_grad(set_to_none=True)

        def step():
            forward()
            backward_update()

        step_ms = median_ms(step)
        forward_ms = median_ms(forward)
        bu = []
        for _ in range(5):
            forward()
            bu.append(median_ms(backward_update, warmup=0, reps=1))
        bu.sort()
        result = {"optimizer": name, "pooling": args.pooling, "forward_ms": forward_ms,
                  "backward_update_ms": bu[len(bu) // 2], "step_ms": step_ms}
        print(json.dumps(result) if args.json else result, flush=True)
        del tables, opt, state
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
