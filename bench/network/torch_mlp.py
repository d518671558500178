#!/usr/bin/env python3
"""PyTorch peer of bench_network: the same DLRM MLPs and the same dot interaction, timed the
same way (CUDA events, warm-up, median of repeats), printed as one JSON object.

  python3 torch_mlp.py --json [--batch 65536] [--warmup 5] [--repeats 20]

MLPs: nn.Linear + nn.ReLU in eager mode (the usual way to write them), input without gradient
for the bottom MLP and with one for the top MLP (it comes from the interaction), backward from a
fixed upstream gradient. Modes: fp32 with TF32 off, TF32, bf16 (model and activations in bf16).
Interaction: cat, bmm, gather of the strictly lower triangle (tril_indices with offset -1, the
order of HugeCTR's layout), cat with the MLP vector and a zero column; fp32, TF32 (allow_tf32 on:
the bmm and its backward on TF32 tensor cores) and bf16.
"""
import argparse
import json
import statistics
import sys

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


def mlp(dims, last_relu):
    layers = []
    for i in range(len(dims) - 1):
        layers.append(torch.nn.Linear(dims[i], dims[i + 1]))
        if i < len(dims) - 2 or last_relu:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def bench_mlp(dims, last_relu, input_grad, mode, batch, warmup, repeats):
    torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
    torch.backends.cudnn.allow_tf32 = mode == "tf32"
    dtype = torch.bfloat16 if mode == "bf16" else torch.float32
    model = mlp(dims, last_relu).cuda().to(dtype)
    x = torch.rand(batch, dims[0], device="cuda", dtype=dtype).requires_grad_(input_grad)
    grad = torch.rand(batch, dims[-1], device="cuda", dtype=dtype) - 0.5

    def step():
        for p in model.parameters():
            p.grad = None
        if x.grad is not None:
            x.grad = None
        model(x).backward(grad)

    return time_ms(step, warmup, repeats)


def bench_interaction(mode, batch, num_emb, width, warmup, repeats):
    dtype = torch.bfloat16 if mode == "bf16" else torch.float32
    torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
    mlp_out = torch.rand(batch, width, device="cuda", dtype=dtype).requires_grad_(True)
    emb = torch.rand(batch, num_emb, width, device="cuda", dtype=dtype).requires_grad_(True)
    rows = num_emb + 1
    li, lj = torch.tril_indices(rows, rows, offset=-1, device="cuda")
    out_width = width + rows * (rows - 1) // 2 + 1
    grad = torch.rand(batch, out_width, device="cuda", dtype=dtype) - 0.5

    def step():
        mlp_out.grad = None
        emb.grad = None
        t = torch.cat([mlp_out.unsqueeze(1), emb], dim=1)
        z = torch.bmm(t, t.transpose(1, 2))
        flat = z[:, li, lj]
        pad = torch.zeros(batch, 1, device="cuda", dtype=dtype)
        out = torch.cat([mlp_out, flat, pad], dim=1)
        out.backward(grad)

    return time_ms(step, warmup, repeats)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--json", action="store_true")
    p.add_argument("--batch", type=int, default=65536)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--repeats", type=int, default=20)
    a = p.parse_args()
    if not torch.cuda.is_available():
        print(json.dumps({"error": "no CUDA device"}))
        return 1
    out = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0), "mlp": {},
           "fc_relu": {}, "interaction": {}}
    bottom = [13, 512, 256, 128]
    top = [480, 1024, 1024, 512, 256, 1]
    for mode in ("fp32", "tf32", "bf16"):
        out["mlp"].setdefault("bottom", {})[mode] = bench_mlp(bottom, True, False, mode, a.batch,
                                                               a.warmup, a.repeats)
        out["mlp"].setdefault("top", {})[mode] = bench_mlp(top, False, True, mode, a.batch,
                                                            a.warmup, a.repeats)
        out["fc_relu"][mode] = bench_mlp([1024, 1024], True, True, mode, a.batch, a.warmup,
                                         a.repeats)
    for mode in ("fp32", "tf32", "bf16"):
        out["interaction"][mode] = bench_interaction(mode, a.batch, 26, 128, a.warmup, a.repeats)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
