#!/usr/bin/env python3
"""PyTorch peer of bench_data: reads the same one-hot Norm files (check Sum, u32 keys, 1 label,
13 dense, 26 slots) the fastest simple way Python offers -- a numpy memmap with a structured dtype
over the fixed-size records -- and builds the same tensors (label, dense, CSR row offsets and
keys) per batch, optionally copying them to cuda:0 from pinned memory. It does not verify
checksums (Ember does). Prints one JSON line with samples_per_s."""
import argparse
import json
import time

import numpy as np
import torch


def record_dtype():
    return np.dtype([("length", "<i4"), ("label", "<f4", (1,)), ("dense", "<f4", (13,)),
                     ("slots", [("nnz", "<i4"), ("key", "<u4")], (26,)), ("checksum", "u1")])


def load(path):
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    header_bytes = 4 + 64 + 1
    header = np.frombuffer(raw[4:68].tobytes(), dtype="<i8")
    n = int(header[1])
    return np.ndarray((n,), dtype=record_dtype(), buffer=raw, offset=header_bytes)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--list", required=True)
    p.add_argument("--batch", type=int, default=65536)
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--gpu", action="store_true")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    with open(a.list) as f:
        count = int(f.readline())
        files = [f.readline().strip() for _ in range(count)]
    records = [load(f) for f in files]
    device = torch.device("cuda:0") if a.gpu else None
    offsets = torch.arange(0, a.batch * 26 + 1, dtype=torch.int64)  # one-hot: row r starts at r
    if a.gpu:
        offsets = offsets.pin_memory()
    samples = 0
    start = None
    deadline = None
    warm = 3
    while True:
        for rec in records:
            for at in range(0, len(rec), a.batch):
                chunk = rec[at:at + a.batch]
                m = len(chunk)
                label = torch.from_numpy(np.ascontiguousarray(chunk["label"]))
                dense = torch.from_numpy(np.ascontiguousarray(chunk["dense"]))
                keys = torch.from_numpy(np.ascontiguousarray(chunk["slots"]["key"]).astype(np.int64).reshape(-1))
                if a.gpu:
                    label = label.pin_memory().to(device, non_blocking=True)
                    dense = dense.pin_memory().to(device, non_blocking=True)
                    keys = keys.pin_memory().to(device, non_blocking=True)
                    off = offsets[: m * 26 + 1].to(device, non_blocking=True)
                    torch.cuda.current_stream().synchronize()
                if warm > 0:
                    warm -= 1
                    if warm == 0:
                        start = time.perf_counter()
                        deadline = start + a.seconds
                    continue
                samples += m
                if time.perf_counter() >= deadline:
                    rate = samples / (time.perf_counter() - start)
                    print(json.dumps({"samples_per_s": rate, "reader": "numpy memmap",
                                      "gpu": a.gpu}))
                    return


if __name__ == "__main__":
    main()
