#!/usr/bin/env python3
"""PyTorch peer of bench_tensor: the same pointwise ops, strided copies, reduction and matrix
products on the same sizes, timed the same way (CUDA events around each call, warm-up, median of
repeats), printed as one JSON object of milliseconds.

  python3 torch_ops.py --json [--elements N] [--square S] [--batch B --rows R]
                       [--gemm G] [--warmup W] [--repeats R]

Ops written the usual way: torch.add(a, b, out=c), torch.relu(x), y.copy_(x) for the cast and
the strided copies (y.copy_(x.t()), y.copy_(x.permute(0, 2, 1))), torch.sum(x), torch.mm.
"""
import argparse
import json
import statistics

import torch


def time_ms(fn, warmup, repeats):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--elements", type=int, default=1 << 26)
    parser.add_argument("--square", type=int, default=8192)
    parser.add_argument("--small-square", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--rows", type=int, default=1024)
    parser.add_argument("--gemm", type=int, default=8192)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    w, r = args.warmup, args.repeats
    dev = torch.device("cuda:0")
    out = {"torch": torch.__version__}

    n = args.elements
    a = torch.rand(n, device=dev)
    b = torch.rand(n, device=dev)
    c = torch.empty(n, device=dev)
    out["copy"] = time_ms(lambda: c.copy_(a), w, r)
    out["add"] = time_ms(lambda: torch.add(a, b, out=c), w, r)
    out["relu"] = time_ms(lambda: torch.relu(a), w, r)
    h = torch.empty(n, device=dev, dtype=torch.bfloat16)
    out["cast_f32_bf16"] = time_ms(lambda: h.copy_(a), w, r)
    out["sum"] = time_ms(lambda: torch.sum(a), w, r)
    del b, c, h

    for key, s in (("transpose", args.square), ("transpose_small", args.small_square)):
        x = torch.rand(s, s, device=dev)
        y = torch.empty(s, s, device=dev)
        out[key] = time_ms(lambda: y.copy_(x.t()), w, r)
        del x, y

    x = torch.rand(args.batch, args.rows, args.rows, device=dev)
    y = torch.empty(args.batch, args.rows, args.rows, device=dev)
    out["permute3d"] = time_ms(lambda: y.copy_(x.permute(0, 2, 1)), w, r)
    del x, y, a

    g = args.gemm
    if g > 0:
        for key, dtype, tf32 in (("gemm_fp32", torch.float32, False),
                                 ("gemm_tf32", torch.float32, True),
                                 ("gemm_bf16", torch.bfloat16, False)):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            ma = torch.rand(g, g, device=dev, dtype=dtype) - 0.5
            mb = torch.rand(g, g, device=dev, dtype=dtype) - 0.5
            mc = torch.empty(g, g, device=dev, dtype=dtype)
            out[key] = time_ms(lambda: torch.mm(ma, mb, out=mc), 2, max(3, r // 4))
            del ma, mb, mc
        torch.backends.cuda.matmul.allow_tf32 = False

    print(json.dumps(out))


if __name__ == "__main__":
    main()
