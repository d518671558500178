#!/usr/bin/env python3
"""Reference check: trains Ember's model in plain PyTorch and compares the losses.

Given a HugeCTR v3 configuration, the initial model Ember exported (`ember train CONFIG
--export-initial DIR`) and the run's metrics.csv, this script rebuilds the same network in plain
PyTorch from the same weights, reads the same Norm data files in the order Ember's deterministic
input pipeline reads them, trains on the same batches with the same optimizer and compares the
training loss of every logged iteration with Ember's. Given Ember's final model (`--model-out`)
it also compares the trained weights.

What it mirrors, each point read from Ember's code:
  * batches: Norm files of the file list in order; with W shards (num_workers, at most one per
    file; without it one per file, at most 128), shard w reads files
    w, w+W, ... (wrapping around the list, solver.max_iter repeats the data) and batch i comes
    from shard i mod W; every batch is full and may span files; samples whose Sum checksum
    fails are dropped (data/norm_reader.cpp, data/pipeline.cpp). Labels, dense features and keys
    are used as stored: no transform of the dense features, no slot offsets added.
  * embeddings: one row per raw key (one training rank: a single table for every slot);
    pooled per (sample, slot) with the combiner (sum, or mean with empty bags giving zeros), output
    [batch, slot_num, vec_size] (embedding/sparse_embedding.cpp). Rows the initial model does not
    hold (hash embeddings create rows when a key is first seen) start with Ember's key-derived
    initial values: uniform in [-0.05, 0.05] from (seed, key, column) (embedding_kernels.hpp,
    tensor/random.hpp), the embedding's seed being solver.seed + 1000003 * (index + 1)
    (training/model_config.cpp).
  * dense layers: InnerProduct / FusedInnerProduct y = x W + b with W stored [in, out] (ReLU for
    FusedInnerProduct unless "activation": "None"), Interaction = [bottom MLP output, the strictly
    lower triangle of the pairwise dot products of (MLP output, embedding vectors) row by row,
    one zero], BinaryCrossEntropyLoss = mean over the batch of the logit loss; the loss and its
    gradient are computed in double and the gradient rounded to float, as Ember does.
  * optimizer: SGD, w -= lr * grad, dense and sparse alike (only touched embedding rows change),
    with Ember's learning-rate schedule (warmup, polynomial decay).

Exit status: 0 when every compared loss is within tolerance, 1 on a mismatch, 2 on bad input.
The last line is a one-line summary:
  reference: iterations=N max_abs_diff=... max_rel_diff=... first_loss=... last_loss=... OK|MISMATCH

Mixed precision (--autocast f16|bf16, against `ember train` with "mixed_precision"): the dense
layers run under torch.autocast with that dtype (products in 16 bits with f32 accumulation, f32
master weights), the loss in double outside it, scaled by --loss-scale before backward and the
gradients unscaled before the step, as Ember's static loss scaler. Ember stores every activation
in 16 bits where autocast keeps element-wise results in f32, so the two agree to the 16-bit
rounding, not to f32's. So with --autocast the same model also trains in f32 beside it, and
Ember's losses are held to that f32 model (the autocast run drifts from it as well: on the H100,
200 iterations, autocast f16 by 1.8 % and Ember's f16 by 0.65 %); the final weights are compared
with the autocast model's. The tolerances are the caller's (run_reference_check.sh --precision).

Works with PyTorch 1.13 and later and numpy; CPU by default, --device cuda optional (TF32 off).
"""

import argparse
import contextlib
import copy
import csv
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

EMBEDDING_TYPES = (
    "DistributedSlotSparseEmbeddingHash",
    "LocalizedSlotSparseEmbeddingHash",
    "LocalizedSlotSparseEmbeddingOneHot",
)
INIT_BOUND = np.float32(0.05)  # EmbeddingConfig::init_bound
MAX_DEFAULT_SHARDS = 128  # data::kMaxDefaultShards: the shards of a Data layer without num_workers
U64 = np.uint64


class InputError(Exception):
    """Bad or inconsistent input: reported with exit status 2."""


# ---- Ember's counter-based random numbers (tensor/random.hpp), for new embedding rows ---------

def _mix64(z):
    z = z + U64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> U64(30))) * U64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> U64(27))) * U64(0x94D049BB133111EB)
    return z ^ (z >> U64(31))


def initial_rows(seed, keys, vec_size):
    """Ember's initial_value(seed, key, c, 0.05) for every key (rows) and column c."""
    with np.errstate(over="ignore"):
        keys = np.asarray(keys).astype(np.int64).view(np.uint64)
        stream = _mix64(U64(seed) ^ _mix64(keys))  # row_init_stream
        cols = np.arange(vec_size, dtype=np.uint64) * U64(0xD1B54A32D192ED03)
        bits = _mix64(stream[:, None] ^ cols[None, :])
    u = (bits >> U64(11)).astype(np.float64) * 2.0**-53
    return ((2.0 * u - 1.0) * np.float64(INIT_BOUND)).astype(np.float32)


# ---- configuration -----------------------------------------------------------------------------

def as_list(v):
    return v if isinstance(v, list) else [v]


class LearningRate:
    """Ember's LearningRateSchedule::at (embedding/optimizer.cpp)."""

    def __init__(self, hp):
        self.base = float(np.float32(hp.get("learning_rate", 0.01)))
        self.warmup = int(hp.get("warmup_steps", 1))
        self.decay_start = int(hp.get("decay_start", 0))
        self.decay_steps = int(hp.get("decay_steps", 1))
        self.decay_power = float(np.float32(hp.get("decay_power", 2.0)))
        self.end_lr = float(np.float32(hp.get("end_lr", 0.0)))

    def at(self, step):
        if step <= self.warmup:
            return float(np.float32(step * self.base / self.warmup))
        if self.decay_start == 0 or step <= self.decay_start:
            return float(np.float32(self.base))
        if step >= self.decay_start + self.decay_steps:
            return float(np.float32(self.end_lr))
        remaining = (self.decay_start + self.decay_steps - step) / self.decay_steps
        return max(float(np.float32(self.base * remaining**self.decay_power)), self.end_lr)


def parse_optimizer(block, where):
    kind = block.get("type")
    if kind != "SGD":
        raise InputError(f"{where}: optimizer type {kind!r}: this reference implements SGD only")
    hp = block.get("sgd_hparam", {})
    for key in hp:
        if key not in ("learning_rate", "warmup_steps", "decay_start", "decay_steps",
                       "decay_power", "end_lr", "atomic_update"):
            raise InputError(f"{where}.sgd_hparam: unknown key {key!r}")
    return LearningRate(hp)


class Config:
    def __init__(self, path, source_override):
        with open(path) as f:
            root = json.load(f)
        self.path = path
        solver = root["solver"]
        self.batch = int(solver["batchsize"])
        self.seed = int(solver.get("seed", 0))
        key_type = solver.get("input_key_type", "I32")
        if key_type not in ("I32", "I64"):
            raise InputError(f"{path}: solver.input_key_type {key_type!r} (expected I32 or I64)")
        self.key_dtype = np.dtype("<u4") if key_type == "I32" else np.dtype("<i8")
        if solver.get("mixed_precision"):
            raise InputError(f"{path}: mixed_precision is on; this reference trains in fp32")
        if solver.get("enable_tf32_compute"):
            raise InputError(f"{path}: enable_tf32_compute is on; compare in full fp32")
        self.lr = parse_optimizer(root["optimizer"], "optimizer")

        layers = root["layers"]
        data = layers[0]
        if data.get("type") != "Data" or data.get("format", "Norm") != "Norm":
            raise InputError(f"{path}: the first layer must be a Norm Data layer")
        self.source = source_override or data["source"]
        self.check = str(data.get("check", "None")).lower()
        # 0: Ember's default, a shard per file (Batches fixes it once it has the file list).
        self.num_workers = int(data.get("num_workers", 0))
        self.label_top = data["label"]["top"]
        self.label_dim = int(data["label"]["label_dim"])
        self.dense_top = data["dense"]["top"] if "dense" in data else None
        self.dense_dim = int(data["dense"]["dense_dim"]) if "dense" in data else 0
        self.sparse = [(s["top"], int(s["slot_num"])) for s in data.get("sparse", [])]

        self.embeddings = []  # dicts: name, bottom, top, type, vec_size, combiner, seed, lr, input
        self.dense_layers = []
        for layer in layers[1:]:
            t = layer["type"]
            if t in EMBEDDING_TYPES:
                hp = layer["sparse_embedding_hparam"]
                bottom = as_list(layer["bottom"])[0]
                inputs = [i for i, (top, _) in enumerate(self.sparse) if top == bottom]
                if not inputs:
                    raise InputError(f"{path}: embedding {layer['name']!r} reads {bottom!r}, "
                                     "not a sparse input")
                combiner = hp.get("combiner", "sum")
                combiner = {0: "sum", 1: "mean"}.get(combiner, combiner)
                index = len(self.embeddings)
                self.embeddings.append({
                    "name": layer["name"], "top": as_list(layer["top"])[0], "type": t,
                    "vec_size": int(hp["embedding_vec_size"]), "combiner": combiner,
                    "input": inputs[0], "slot_num": self.sparse[inputs[0]][1],
                    # model_config.cpp: solver.seed + 1000003 * (embeddings before it + 1)
                    "seed": (self.seed + 1000003 * (index + 1)) % 2**64,
                    "lr": parse_optimizer(layer["optimizer"], layer["name"] + ".optimizer")
                          if "optimizer" in layer else self.lr,
                })
            else:
                self.dense_layers.append(layer)


# ---- Norm data (data/norm_reader.cpp) ----------------------------------------------------------

def read_file_list(path):
    with open(path) as f:
        lines = [line.strip() for line in f]
    count = int(lines[0])
    base = os.path.dirname(path)
    files = []
    for name in lines[1:1 + count]:
        if not os.path.isfile(name) and not os.path.isabs(name) and \
                os.path.isfile(os.path.join(base, name)):
            name = os.path.join(base, name)
        if not os.path.isfile(name):
            raise InputError(f"file list {path}: data file {name!r} does not exist")
        files.append(name)
    return files


class NormFile:
    """One Norm file parsed whole: labels, dense, and per sparse input a CSR of keys."""

    def __init__(self, path, cfg):
        with open(path, "rb") as f:
            buf = f.read()
        self.path = path
        as_u8 = np.frombuffer(buf, dtype=np.uint8)
        summed = cfg.check == "sum"
        pos = 0
        if summed:
            (length,) = struct.unpack_from("<i", buf, 0)
            if length != 64:
                raise InputError(f"{path}: header record length {length}, expected 64 (check Sum)")
            pos = 4
        header = struct.unpack_from("<8q", buf, pos)
        pos += 64 + (1 if summed else 0)
        error_check, records, label_dim, dense_dim, slot_num = header[:5]
        if error_check != (1 if summed else 0):
            raise InputError(f"{path}: header error_check {error_check} but check is {cfg.check}")
        total_slots = sum(s for _, s in cfg.sparse)
        if slot_num != total_slots or label_dim + dense_dim != cfg.label_dim + cfg.dense_dim:
            raise InputError(f"{path}: header (label {label_dim}, dense {dense_dim}, slots "
                             f"{slot_num}) does not match the configuration")
        ld, dd = cfg.label_dim, cfg.dense_dim
        ksize = cfg.key_dtype.itemsize
        kfmt = "<%d" + ("I" if ksize == 4 else "q")
        labels, dense = [], []
        offsets = [[0] for _ in cfg.sparse]
        keys = [[] for _ in cfg.sparse]
        self.dropped = 0
        for _ in range(records):
            if summed:
                (length,) = struct.unpack_from("<i", buf, pos)
                payload = pos + 4
                stored = as_u8[payload + length]
                pos = payload + length + 1
                if int(as_u8[payload:payload + length].sum()) & 0xFF != stored:
                    self.dropped += 1  # Ember drops samples whose checksum fails
                    continue
                p = payload
            else:
                p = pos
            values = np.frombuffer(buf, dtype="<f4", count=ld + dd, offset=p)
            labels.append(values[:ld])
            dense.append(values[ld:])
            p += 4 * (ld + dd)
            for i, (_, slots) in enumerate(cfg.sparse):
                off, ks = offsets[i], keys[i]
                for _s in range(slots):
                    (nnz,) = struct.unpack_from("<i", buf, p)
                    p += 4
                    if nnz:
                        ks.extend(struct.unpack_from(kfmt % nnz, buf, p))
                        p += nnz * ksize
                    off.append(len(ks))
            if summed and p != payload + length:
                raise InputError(f"{path}: a sample's fields do not fill its record")
            if not summed:
                pos = p
        self.size = len(labels)
        self.labels = np.array(labels, dtype=np.float32).reshape(self.size, ld)
        self.dense = np.array(dense, dtype=np.float32).reshape(self.size, dd)
        self.offsets = [np.array(o, dtype=np.int64) for o in offsets]
        self.keys = [np.array(k, dtype=np.int64) for k in keys]


class Batches:
    """The training batches in the order of Ember's deterministic pipeline (Repeat mode)."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.files = read_file_list(cfg.source)
        self.cache = {}
        # Ember's shards (data/pipeline.cpp, choose_shards): num_workers, at most one per file;
        # by default one per file, at most MAX_DEFAULT_SHARDS.
        n = len(self.files)
        asked = cfg.num_workers if cfg.num_workers > 0 else MAX_DEFAULT_SHARDS
        self.shards = max(1, min(asked, n))
        W = self.shards
        # Worker w's position: (k-th file of its shard, sample within it).
        self.cursor = [[0, 0] for _ in range(W)]
        self.next_batch = 0

    def file(self, index):
        if index not in self.cache:
            self.cache[index] = NormFile(self.files[index], self.cfg)
            if self.cache[index].dropped:
                print(f"note: {self.files[index]}: {self.cache[index].dropped} samples dropped "
                      "(checksum)", file=sys.stderr)
        return self.cache[index]

    def next(self):
        cfg, W, n = self.cfg, self.shards, len(self.files)
        w = self.next_batch % W
        self.next_batch += 1
        cursor = self.cursor[w]
        pieces, need, empty_files = [], cfg.batch, 0
        while need > 0:
            f = self.file((w + cursor[0] * W) % n)
            take = min(need, f.size - cursor[1])
            if take > 0:
                pieces.append((f, cursor[1], cursor[1] + take))
                cursor[1] += take
                need -= take
                empty_files = 0
            if cursor[1] >= f.size:
                cursor[0] += 1
                cursor[1] = 0
                empty_files += 1
                if empty_files > n:
                    raise InputError(f"worker {w}'s files hold no samples")
        labels = np.concatenate([f.labels[a:b] for f, a, b in pieces])
        dense = np.concatenate([f.dense[a:b] for f, a, b in pieces])
        sparse = []
        for i, (_, slots) in enumerate(cfg.sparse):
            offs, ks = [np.zeros(1, dtype=np.int64)], []
            total = 0
            for f, a, b in pieces:
                o = f.offsets[i][a * slots:b * slots + 1]
                ks.append(f.keys[i][o[0]:o[-1]])
                offs.append(o[1:] - o[0] + total)
                total += int(o[-1] - o[0])
            sparse.append((np.concatenate(offs), np.concatenate(ks)))
        return labels, dense, sparse


# ---- the model ---------------------------------------------------------------------------------

def read_initial_model(init_dir, cfg):
    meta_path = os.path.join(init_dir, "meta.json")
    with open(meta_path) as f:
        meta = json.load(f)
    if meta.get("format") != "ember-checkpoint":
        raise InputError(f"{meta_path}: not an Ember checkpoint")
    raw = np.fromfile(os.path.join(init_dir, "dense.model"), dtype="<f4")
    dense, at = {}, 0
    for p in meta["dense_parameters"]:
        if not p.get("trainable", True):
            raise InputError(f"{init_dir}: non-trainable parameter {p['name']!r}: this reference "
                             "has no layer with running state")
        count = int(np.prod(p["shape"])) if p["shape"] else 1
        dense[p["name"]] = raw[at:at + count].reshape(p["shape"])
        at += count
    if at != raw.size:
        raise InputError(f"{init_dir}/dense.model holds {raw.size} floats; meta.json lists {at}")
    sparse = {}
    for e in cfg.embeddings:
        d = os.path.join(init_dir, "sparse", e["name"])
        # One rank's save is one file set; a save of several ranks one shard rank_<r>/ per rank.
        sets = [d]
        if not os.path.exists(os.path.join(d, "keys")):
            sets, r = [], 0
            while os.path.isdir(os.path.join(d, f"rank_{r}")):
                sets.append(os.path.join(d, f"rank_{r}"))
                r += 1
        all_keys, all_vectors = [], []
        for s in sets:
            keys = np.fromfile(os.path.join(s, "keys"), dtype=cfg.key_dtype).astype(np.int64)
            vectors = np.fromfile(os.path.join(s, "vectors"), dtype="<f4")
            if vectors.size != keys.size * e["vec_size"]:
                raise InputError(f"{s}: {keys.size} keys but {vectors.size} floats of vectors")
            all_keys.append(keys)
            all_vectors.append(vectors.reshape(keys.size, e["vec_size"]))
        if not all_keys:
            raise InputError(f"{d}: no keys file and no shard rank_0")
        keys = np.concatenate(all_keys)
        order = np.argsort(keys, kind="stable")
        sparse[e["name"]] = (keys[order], np.concatenate(all_vectors)[order])
    return meta, dense, sparse


class EmbeddingTable:
    """The rows of one embedding, one per raw key, as a dense torch tensor."""

    def __init__(self, e, init_keys, init_vectors, all_keys, device):
        self.e = e
        keys = np.union1d(np.unique(all_keys), init_keys)
        values = np.empty((keys.size, e["vec_size"]), dtype=np.float32)
        have = np.isin(keys, init_keys)
        values[have] = init_vectors[np.searchsorted(init_keys, keys[have])]
        fresh = keys[~have]
        if fresh.size and e["type"].endswith("OneHot"):
            raise InputError(f"embedding {e['name']!r}: keys {fresh[:5].tolist()}... are not in "
                             "the one-hot initial model")
        values[~have] = initial_rows(e["seed"], fresh, e["vec_size"])
        self.initial = values.copy()  # for how far training moved each row
        self.initial_from_model = int(have.sum())
        self.created = int(fresh.size)
        # A check of the key-derived initialiser against rows the model holds (one-hot models
        # hold every row; hash models none at iteration 0).
        self.init_check = None
        if init_keys.size:
            sample = init_keys[:: max(1, init_keys.size // 1000)]
            diff = np.abs(initial_rows(e["seed"], sample, e["vec_size"]) -
                          init_vectors[np.searchsorted(init_keys, sample)])
            self.init_check = float(diff.max())
        self.keys = keys
        self.weight = torch.tensor(values, device=device, requires_grad=True)

    def rows(self, keys):
        return np.searchsorted(self.keys, keys)

    def copy_in_f32(self):
        """A table of the same rows with weights of its own (the f32 shadow model's)."""
        twin = copy.copy(self)
        twin.weight = self.weight.detach().clone().requires_grad_(True)
        return twin


def interaction(mlp, emb):
    """Ember's Interaction (network/layers/interaction_layers.cpp)."""
    batch, width = mlp.shape
    vectors = torch.cat([mlp.unsqueeze(1), emb], dim=1)  # [B, F + 1, W]
    dots = torch.bmm(vectors, vectors.transpose(1, 2))
    n = vectors.shape[1]
    i, j = torch.tril_indices(n, n, offset=-1, device=mlp.device)  # row by row: (1,0), (2,0), ...
    pairs = dots.reshape(batch, n * n).index_select(1, i * n + j)
    pad = torch.zeros(batch, 1, dtype=mlp.dtype, device=mlp.device)
    return torch.cat([mlp, pairs, pad], dim=1)


class Model:
    def __init__(self, cfg, dense_init, tables, device, half=None):
        self.cfg, self.tables, self.device, self.half = cfg, tables, device, half
        self.params = {name: torch.tensor(v, device=device, requires_grad=True)
                       for name, v in dense_init.items()}
        used = set()
        for layer in cfg.dense_layers:
            t = layer["type"]
            if t in ("InnerProduct", "FusedInnerProduct"):
                if layer.get("position", "None") not in ("None", "Isolated"):
                    raise InputError(f"layer {layer['name']!r}: FusedInnerProduct 'position' "
                                     "chains are not implemented here")
                for s in ("weight", "bias"):
                    name = f"{layer['name']}.{s}"
                    if name not in self.params:
                        raise InputError(f"the initial model has no parameter {name!r}")
                    used.add(name)
            elif t not in ("Interaction", "ReLU", "Concat", "BinaryCrossEntropyLoss"):
                raise InputError(f"layer {layer['name']!r}: type {t!r} is not implemented here")
            elif t == "BinaryCrossEntropyLoss" and "regularizer" in layer:
                raise InputError(f"layer {layer['name']!r}: regularizers are not implemented here")
        if used != set(self.params):
            raise InputError(f"the initial model holds parameters {sorted(set(self.params) - used)} "
                             "that no layer here uses")

    def forward(self, labels, dense, sparse):
        cfg, dev = self.cfg, self.device
        blobs = {cfg.label_top: torch.tensor(labels, device=dev)}
        if cfg.dense_top:
            blobs[cfg.dense_top] = torch.tensor(dense, device=dev)
        for e in cfg.embeddings:
            table = self.tables[e["name"]]
            offsets, keys = sparse[e["input"]]
            rows = torch.tensor(table.rows(keys), dtype=torch.int64, device=dev)
            bag_offsets = torch.tensor(offsets[:-1], dtype=torch.int64, device=dev)
            pooled = F.embedding_bag(rows, table.weight, bag_offsets, mode=e["combiner"])
            blobs[e["top"]] = pooled.reshape(cfg.batch, e["slot_num"], e["vec_size"])
        loss = None
        for layer in cfg.dense_layers:
            if layer["type"] == "BinaryCrossEntropyLoss":
                loss = self.loss(layer, blobs)
                continue
            with self.autocast():
                self.dense_layer(layer, blobs)
        if loss is None:
            raise InputError("the configuration has no BinaryCrossEntropyLoss")
        return loss

    def autocast(self):
        if self.half is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.half)

    @staticmethod
    def loss(layer, blobs):
        # In double, as Ember's loss layer: the gradient is rounded to float once.
        logits, labels = (blobs[b] for b in as_list(layer["bottom"]))
        return F.binary_cross_entropy_with_logits(logits.reshape(-1).double(),
                                                  labels.reshape(-1).double())

    def dense_layer(self, layer, blobs):
        t, name = layer["type"], layer["name"]
        bottoms = [blobs[b] for b in as_list(layer["bottom"])]
        tops = as_list(layer["top"])
        if t in ("InnerProduct", "FusedInnerProduct"):
            x = bottoms[0]
            w, b = self.params[name + ".weight"], self.params[name + ".bias"]
            y = (x.reshape(-1, w.shape[0]) @ w + b).reshape(*x.shape[:-1], w.shape[1])
            relu = t == "FusedInnerProduct" and layer.get("activation", "Relu") == "Relu"
            blobs[tops[0]] = torch.relu(y) if relu else y
        elif t == "ReLU":
            blobs[tops[0]] = torch.relu(bottoms[0])
        elif t == "Concat":
            blobs[tops[0]] = torch.cat(bottoms, dim=-1)
        elif t == "Interaction":
            blobs[tops[0]] = interaction(bottoms[0], bottoms[1])

    def sgd_step(self, step, loss_scale=1.0):
        with torch.no_grad():
            lr = self.cfg.lr.at(step)
            if loss_scale != 1.0:
                for p in self.params.values():
                    p.grad.div_(loss_scale)
                for table in self.tables.values():
                    table.weight.grad.div_(loss_scale)
            for p in self.params.values():
                p.sub_(p.grad * lr)
                p.grad = None
            for table in self.tables.values():
                table.weight.sub_(table.weight.grad * table.e["lr"].at(step))
                table.weight.grad = None


# ---- comparison --------------------------------------------------------------------------------

def read_ember_metrics(path):
    """Ember's logged training losses and learning rates by iteration."""
    losses, lrs = {}, {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row["phase"] == "train" and row["metric"] in ("loss", "lr"):
                (losses if row["metric"] == "loss" else lrs)[int(row["iteration"])] = \
                    float(row["value"])
    if not losses:
        raise InputError(f"{path} holds no training losses (is solver.display > 0?)")
    return losses, lrs


def compare_final(final_dir, model, cfg, dense_init):
    """Max |difference| of the trained weights: dense by parameter, embeddings by key; and how far
    training moved each (max |final - initial| in this reference), the scale to judge them by."""
    _, dense, sparse = read_initial_model(final_dir, cfg)
    worst, moved = {}, {}
    for name, value in dense.items():
        mine = model.params[name].detach().cpu().numpy()
        worst[name] = float(np.abs(mine - value).max())
        moved[name] = float(np.abs(mine - dense_init[name]).max())
    for e in cfg.embeddings:
        keys, vectors = sparse[e["name"]]
        table = model.tables[e["name"]]
        missing = np.setdiff1d(table.keys, keys)
        extra = np.setdiff1d(keys, table.keys)
        if missing.size or extra.size:
            print(f"final model: embedding {e['name']!r}: Ember holds {keys.size} keys, the "
                  f"reference {table.keys.size} ({missing.size} missing in Ember, e.g. "
                  f"{missing[:5].tolist()}; {extra.size} extra, e.g. {extra[:5].tolist()})")
            worst[e["name"] + " (keys)"] = math.inf
            continue
        mine = table.weight.detach().cpu().numpy()[table.rows(keys)]
        worst[e["name"]] = float(np.abs(mine - vectors).max())
        moved[e["name"]] = float(np.abs(table.weight.detach().cpu().numpy() - table.initial).max())
    return worst, moved


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", required=True, help="the HugeCTR v3 JSON configuration Ember ran")
    ap.add_argument("--init", required=True, help="Ember's --export-initial checkpoint directory")
    ap.add_argument("--metrics", required=True, help="Ember's metrics.csv of that run")
    ap.add_argument("--final", help="Ember's final model (--model-out) to compare weights with")
    ap.add_argument("--source", help="the training file list (overrides the Data layer's source)")
    ap.add_argument("--iterations", type=int, default=0,
                    help="iterations to train and compare (default: every logged one)")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--rtol", type=float, default=1e-4, help="relative loss tolerance")
    ap.add_argument("--atol", type=float, default=1e-6, help="absolute loss tolerance")
    ap.add_argument("--weight-tol", type=float, default=1e-3,
                    help="tolerance on the final weights' max |difference| (with --final)")
    ap.add_argument("--threads", type=int, default=1,
                    help="PyTorch CPU threads (0: PyTorch's choice; the model is small)")
    ap.add_argument("--verbose", action="store_true", help="print every compared iteration")
    ap.add_argument("--label", default="", help="a name for this comparison in the summary")
    ap.add_argument("--autocast", choices=("f16", "bf16"),
                    help="run the dense layers under torch.autocast in this dtype (Ember trained "
                         "with mixed_precision)")
    ap.add_argument("--loss-scale", type=float, default=1.0,
                    help="static loss scale (Ember's mixed_precision scaler, 1024 by default)")
    args = ap.parse_args()

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    # Ember accumulates every 16-bit product in f32 (its cuBLASLt plans allow no reduction in the
    # 16-bit type); PyTorch lets cuBLAS reduce split-K partial sums in f16/bf16 unless told not to.
    for flag in ("allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"):
        if hasattr(torch.backends.cuda.matmul, flag):
            setattr(torch.backends.cuda.matmul, flag, False)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda but PyTorch sees no GPU")

    cfg = Config(args.config, args.source)
    ember, ember_lr = read_ember_metrics(args.metrics)
    last = max(ember)
    iterations = min(args.iterations, last) if args.iterations > 0 else last
    meta, dense_init, sparse_init = read_initial_model(args.init, cfg)
    if int(meta.get("iteration", 0)) != 0:
        raise InputError(f"{args.init} is a model of iteration {meta['iteration']}, not the "
                         "initial one")

    data = Batches(cfg)
    batches = [data.next() for _ in range(iterations)]
    tables = {}
    for e in cfg.embeddings:
        all_keys = np.concatenate([b[2][e["input"]][1] for b in batches])
        keys, vectors = sparse_init[e["name"]]
        tables[e["name"]] = EmbeddingTable(e, keys, vectors, all_keys, device)
        t = tables[e["name"]]
        check = "" if t.init_check is None else f", initialiser vs model max|diff|={t.init_check:.3g}"
        print(f"embedding {e['name']}: {t.initial_from_model} rows from the initial model, "
              f"{t.created} created from keys{check}")
        if t.init_check is not None and t.init_check != 0.0:
            raise InputError(f"embedding {e['name']!r}: the key-derived initial rows differ from "
                             f"the initial model's by up to {t.init_check}")
    half = {"f16": torch.float16, "bf16": torch.bfloat16}.get(args.autocast)
    model = Model(cfg, dense_init, tables, device, half)
    # With autocast, the same model also trains in f32 beside it (no autocast, no loss scale), so
    # the summary tells apart what mixed precision itself changes (autocast against f32) from
    # what Ember does differently (Ember against either).
    shadow = None
    if half is not None:
        shadow = Model(cfg, dense_init, {n: t.copy_in_f32() for n, t in tables.items()}, device)
    shadow_rel = ember_vs_f32_rel = ember_vs_autocast_rel = 0.0

    max_abs = max_rel = 0.0
    compared, first, final = 0, None, None
    bad = []
    for it in range(1, iterations + 1):
        labels, dense, sparse = batches[it - 1]
        loss = model.forward(labels, dense, sparse)
        (loss * args.loss_scale if args.loss_scale != 1.0 else loss).backward()
        model.sgd_step(it, args.loss_scale)
        value = float(loss.item())
        if shadow is not None:
            f32_loss = shadow.forward(labels, dense, sparse)
            f32_loss.backward()
            shadow.sgd_step(it)
            f32_value = float(f32_loss.item())
            shadow_rel = max(shadow_rel, abs(value - f32_value) / max(abs(f32_value), 1e-30))
            if it in ember:
                ember_vs_f32_rel = max(ember_vs_f32_rel,
                                       abs(ember[it] - f32_value) / max(abs(f32_value), 1e-30))
        if it in ember:
            ref = ember[it]
            # Mixed precision approximates the f32 model: Ember's losses are held to it (the
            # autocast run drifts from it too, by as much as Ember or more: both are reported).
            base = f32_value if shadow is not None else value
            if shadow is not None:
                ember_vs_autocast_rel = max(ember_vs_autocast_rel,
                                            abs(value - ref) / max(abs(ref), 1e-30))
            diff = abs(base - ref)
            rel = diff / max(abs(ref), 1e-30)
            max_abs, max_rel = max(max_abs, diff), max(max_rel, rel)
            compared += 1
            first = base if first is None else first
            final = base
            if not diff <= args.atol + args.rtol * abs(ref):
                bad.append((it, ref, base))
            if args.verbose or it <= 3 or it % 50 == 0 or it == iterations:
                f32 = f" f32={f32_value:.9g}" if shadow is not None else ""
                print(f"iter={it} ember={ref:.9g} reference={value:.9g}{f32} abs_diff={diff:.3g}")
        # Ember logs the dense optimizer's learning rate (a float, 9 digits).
        if it in ember_lr and abs(ember_lr[it] - cfg.lr.at(it)) > 1e-7 * abs(ember_lr[it]):
            bad.append((it, f"lr {ember_lr[it]:.9g}", f"lr {cfg.lr.at(it):.9g}"))
    against = "f32 model" if shadow is not None else "reference"
    for it, ref, value in bad[:10]:
        fmt = (lambda v: v) if isinstance(ref, str) else (lambda v: f"{v:.9g}")
        print(f"MISMATCH iter={it} ember={fmt(ref)} {against}={fmt(value)}")

    weights_ok = True
    if args.final:
        final_meta = json.load(open(os.path.join(args.final, "meta.json")))
        if int(final_meta.get("iteration", -1)) != iterations:
            print(f"final model: skipped (it is of iteration {final_meta.get('iteration')}, the "
                  f"reference trained {iterations})")
        else:
            worst, moved = compare_final(args.final, model, cfg, dense_init)
            for name, d in worst.items():
                scale = f" (training moved it up to {moved[name]:.3g})" if name in moved else ""
                print(f"final weights {name}: max_abs_diff={d:.3g}{scale}")
            top = max(worst.values())
            weights_ok = top <= args.weight_tol
            print(f"final weights: max_abs_diff={top:.3g} tolerance={args.weight_tol:g} "
                  f"{'OK' if weights_ok else 'MISMATCH'}")

    if shadow is not None:
        # The verdict holds Ember's losses to the f32 model; how far autocast is from both.
        print(f"mixed precision: the reference under autocast differs from the same model in f32 "
              f"by max_rel_diff={shadow_rel:.3g}; Ember's mixed run differs from it by "
              f"max_rel_diff={ember_vs_f32_rel:.3g} and from the autocast reference by "
              f"max_rel_diff={ember_vs_autocast_rel:.3g}")
    ok = compared > 0 and not bad and weights_ok
    label = f" {args.label}" if args.label else ""
    if compared == 0:
        first = final = math.nan
    print(f"reference{label}: iterations={compared} max_abs_diff={max_abs:.3g} "
          f"max_rel_diff={max_rel:.3g} first_loss={first:.9g} last_loss={final:.9g} "
          f"{'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except InputError as err:
        print(f"dlrm_reference: {err}", file=sys.stderr)
        sys.exit(2)
