"""A plain reader of HugeCTR Norm files (header, then per sample label, dense and each slot's key
count and keys; with check Sum each record is length-prefixed and followed by its byte sum), for
the tests to hand the same samples to ember.Session.predict that `ember predict` reads."""

import struct

import numpy as np


def read_file_list(path):
    with open(path) as f:
        lines = [line.strip() for line in f if line.strip()]
    return lines[1:1 + int(lines[0])]


def read_norm(path, slot_num, key_dtype=np.uint32):
    """(labels [n, 1], dense [n, 13], keys [n, slot_num] for one-hot data, offsets, flat keys)."""
    with open(path, "rb") as f:
        buf = f.read()
    (length,) = struct.unpack_from("<i", buf, 0)
    assert length == 64, "tests write check Sum files"
    error_check, records, label_dim, dense_dim, slots = struct.unpack_from("<8q", buf, 4)[:5]
    assert slots == slot_num
    pos = 4 + 64 + 1
    labels, dense, offsets, keys = [], [], [0], []
    ksize = np.dtype(key_dtype).itemsize
    for _ in range(records):
        (length,) = struct.unpack_from("<i", buf, pos)
        p = pos + 4
        pos = p + length + 1
        values = np.frombuffer(buf, dtype="<f4", count=label_dim + dense_dim, offset=p)
        labels.append(values[:label_dim])
        dense.append(values[label_dim:])
        p += 4 * (label_dim + dense_dim)
        for _s in range(slots):
            (nnz,) = struct.unpack_from("<i", buf, p)
            p += 4
            keys.extend(np.frombuffer(buf, dtype=key_dtype, count=nnz, offset=p).tolist())
            p += nnz * ksize
            offsets.append(len(keys))
    return (np.array(labels, np.float32), np.array(dense, np.float32),
            np.array(offsets, np.int64), np.array(keys, np.int64))
