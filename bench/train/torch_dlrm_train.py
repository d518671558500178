#!/usr/bin/env python3
"""The PyTorch peer of bench_train: DLRM with Criteo-Kaggle-sized tables in plain PyTorch.

The same model as configs/dlrm_criteo_kaggle.json: one nn.EmbeddingBag over all 26 tables
(keys carry their slot offsets; sparse gradients), bottom MLP 13-512-256-128, DLRM's dot
interaction in HugeCTR's layout (bmm, then the strictly lower triangle gathered, then one zero
column: 480 wide), top MLP 1024-1024-512-256-1, BCE with logits, SGD.

Precision modes (--modes, comma-separated; each runs a fresh model in this one process):
  fp32   fp32, TF32 off            tf32   fp32 with TF32 matrix products
  f16    autocast to float16       bf16   autocast to bfloat16
(autocast leaves EmbeddingBag, the loss and the optimizer in fp32, as PyTorch does; f16 runs
without a GradScaler, whose few small kernels would only slow it). --compile MODES runs those
modes again with the model's forward and loss under torch.compile (the embedding's sparse
gradients and the optimizers stay eager).

It reads the same Raw file (float label and dense, int32 keys) and stages every batch on the GPU
before timing, so it pays nothing for input. Prints one JSON line per run:
{"mode": ..., "compiled": ..., "samples_per_s": ...}.
"""
import argparse
import json
import time

import numpy as np
import torch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--batch", type=int, default=65536)
    p.add_argument("--iters", type=int, default=40)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--slot-sizes", required=True)
    p.add_argument("--dense-dim", type=int, default=13)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--lr", type=float, default=0.5)
    p.add_argument("--json", action="store_true")
    p.add_argument("--modes", default="fp32")
    p.add_argument("--compile", default="", help="modes to run again under torch.compile")
    a = p.parse_args()

    dev = torch.device("cuda")
    sizes = [int(s) for s in a.slot_sizes.split(",")]
    slots = len(sizes)
    offsets = torch.tensor(np.concatenate([[0], np.cumsum(sizes)[:-1]]), dtype=torch.int64, device=dev)

    width = 1 + a.dense_dim + slots
    raw = np.memmap(a.data, dtype=np.int32, mode="r")
    samples = raw.size // width
    steps = a.warmup + a.iters
    assert samples >= steps * a.batch, f"{samples} samples < {steps} x {a.batch}"
    rows = raw[: steps * a.batch * width].reshape(steps * a.batch, width)
    floats = rows[:, : 1 + a.dense_dim].view(np.float32)
    batches = []
    for i in range(steps):
        s = slice(i * a.batch, (i + 1) * a.batch)
        label = torch.from_numpy(np.ascontiguousarray(floats[s, :1])).to(dev)
        dense = torch.from_numpy(np.ascontiguousarray(floats[s, 1:])).to(dev)
        keys = torch.from_numpy(np.ascontiguousarray(rows[s, 1 + a.dense_dim:])).to(dev).long() + offsets
        batches.append((label, dense, keys.reshape(-1)))
    bag_offsets = torch.arange(0, a.batch * slots, dtype=torch.int64, device=dev)

    def mlp(dims, last_relu):
        layers = []
        for i in range(len(dims) - 1):
            layers.append(torch.nn.Linear(dims[i], dims[i + 1]))
            if i < len(dims) - 2 or last_relu:
                layers.append(torch.nn.ReLU())
        return torch.nn.Sequential(*layers)

    li, lj = torch.tril_indices(slots + 1, slots + 1, offset=-1, device=dev)

    def run(mode, compiled):
        torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
        torch.backends.cudnn.allow_tf32 = mode == "tf32"
        autocast = {"f16": torch.float16, "bf16": torch.bfloat16}.get(mode)
        emb = torch.nn.EmbeddingBag(sum(sizes), a.dim, mode="sum", sparse=True).to(dev)
        torch.nn.init.uniform_(emb.weight, -0.05, 0.05)
        bottom = mlp([a.dense_dim, 512, 256, a.dim], True).to(dev)
        top = mlp([a.dim + (slots + 1) * slots // 2 + 1, 1024, 1024, 512, 256, 1], False).to(dev)
        loss_fn = torch.nn.BCEWithLogitsLoss()
        dense_opt = torch.optim.SGD(list(bottom.parameters()) + list(top.parameters()), lr=a.lr)
        sparse_opt = torch.optim.SGD(emb.parameters(), lr=a.lr)

        def dense_part(x_dense, e, label):
            x = bottom(x_dense)
            t = torch.cat([x.unsqueeze(1), e.to(x.dtype)], dim=1)
            z = torch.bmm(t, t.transpose(1, 2))[:, li, lj]
            r = torch.cat([x, z, torch.zeros(a.batch, 1, device=dev, dtype=x.dtype)], dim=1)
            return loss_fn(top(r).float(), label)

        forward = torch.compile(dense_part) if compiled else dense_part

        def step(label, dense, keys):
            e = emb(keys, bag_offsets).view(a.batch, slots, a.dim)
            if autocast is not None:
                with torch.autocast("cuda", dtype=autocast):
                    loss = forward(dense, e, label)
            else:
                loss = forward(dense, e, label)
            dense_opt.zero_grad(set_to_none=True)
            sparse_opt.zero_grad(set_to_none=True)
            loss.backward()
            dense_opt.step()
            sparse_opt.step()
            return loss

        for i in range(a.warmup):
            step(*batches[i])
        torch.cuda.synchronize()
        start = time.perf_counter()
        for i in range(a.warmup, steps):
            loss = step(*batches[i])
        torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        rate = a.iters * a.batch / seconds
        result = {"mode": mode, "compiled": compiled, "samples_per_s": rate,
                  "ms_per_iter": 1e3 * seconds / a.iters, "loss": float(loss),
                  "torch": torch.__version__, "device": torch.cuda.get_device_name()}
        del emb, bottom, top, dense_opt, sparse_opt
        torch.cuda.empty_cache()
        return result

    runs = [(m, False) for m in a.modes.split(",")]
    if a.compile:
        runs += [(m, True) for m in a.compile.split(",")]
    for mode, compiled in runs:
        try:
            r = run(mode, compiled)
        except Exception as e:  # a mode this PyTorch cannot run: say so and go on
            r = {"mode": mode, "compiled": compiled, "error": str(e).splitlines()[0][:200]}
        if a.json:
            print(json.dumps(r), flush=True)
        elif "error" in r:
            print(f"{mode}{' compiled' if compiled else ''}: failed: {r['error']}")
        else:
            print(f"{mode}{' compiled' if compiled else ''}: {r['samples_per_s'] / 1e6:.3f} M "
                  f"samples/s ({r['ms_per_iter']:.2f} ms per iteration)")


if __name__ == "__main__":
    main()
