#!/usr/bin/env python3
"""The PyTorch peers of bench_train: DLRM, DCN, DeepFM and Wide&Deep in plain PyTorch.

Each is the model of a configuration in configs/ (--config), written out here with the numbers
read from it (slot counts and vector sizes, layer widths, dropout rates, cross layers, the FM
width, the optimizer and its hyperparameters); --model says which graph it is:

  dlrm           bottom MLP fc1-fc3 over the dense features; DLRM's dot interaction in HugeCTR's
                 layout (the bottom MLP's output, then the strictly lower triangle of the pairwise
                 dot products of it and the embedding vectors, then one zero); top MLP fc4-fc8
  dcn            x0 = [embeddings flattened, dense]; a cross network of num_layers layers
                 x_{l+1} = x0 (x_l . w_l) + b_l + x_l beside the deep branch fc1-dropout-fc2-
                 dropout; fc4 over [deep, cross]
  deepfm         each slot's vector split into its FM part and a 1-wide linear part; the dense
                 features through WeightMultiply (x_i W_ij); deep branch fc1-fc3 over [FM parts,
                 dense weighted]; FM order 2 over the same fields; the logit is deep + the FM
                 term's sum + the linear terms' sum
  wide_and_deep  the deep branch fc1-fc4 over [deep embeddings flattened, dense] plus the wide
                 embedding (one 1-wide slot)

Embeddings: one nn.EmbeddingBag (sum, sparse gradients) per embedding layer over all its slots,
the keys carrying their slot offsets, run eagerly outside autocast (as PyTorch keeps them in
f32). Optimizers as the configuration's: SGD (torch.optim.SGD for the dense weights and the
embeddings) or Adam (torch.optim.Adam, fused where this PyTorch has it, for the dense weights;
torch.optim.SparseAdam for the embeddings), with its learning rate, betas and epsilon;
learning-rate schedules are left out (they do not change the step's work).

Precision modes (--modes, comma-separated; each runs a fresh model in this one process):
  fp32   fp32, TF32 off            tf32   fp32 with TF32 matrix products
  f16    autocast to float16       bf16   autocast to bfloat16
(f16 runs without a GradScaler, whose inf checks would only slow it.) --compile MODES runs those
modes again with the dense part and the loss under torch.compile (the embeddings' sparse
gradients and the optimizers stay eager).

It reads the Raw file bench_train generated (--data: float label and dense, one int32 key per
slot, the sparse inputs' slots in order, keys counted from 0 in each slot; --slot-sizes: every
slot's vocabulary in that order) and stages every batch on the GPU before timing, so it pays
nothing for input. Prints one JSON line per run:
{"model": ..., "mode": ..., "compiled": ..., "samples_per_s": ..., "ms_per_iter": ...}.
"""
import argparse
import json
import time

import numpy as np
import torch
from torch import nn


def find_layer(cfg, name):
    for layer in cfg["layers"]:
        if layer["name"] == name:
            return layer
    raise ValueError(f"the configuration has no layer {name!r}")


def mlp(cfg, names, width):
    """The chain of layers `names` (fully connected, Dropout, ReLU) over `width` inputs."""
    modules = []
    for name in names:
        layer = find_layer(cfg, name)
        kind = layer["type"]
        if kind in ("InnerProduct", "FusedInnerProduct"):
            out = layer["fc_param"]["num_output"]
            modules.append(nn.Linear(width, out))
            width = out
            if kind == "FusedInnerProduct" and layer.get("activation", "Relu") == "Relu":
                modules.append(nn.ReLU())
        elif kind == "Dropout":
            modules.append(nn.Dropout(layer.get("rate", 0.5)))
        elif kind == "ReLU":
            modules.append(nn.ReLU())
        else:
            raise ValueError(f"layer {name!r}: type {kind} is not part of an MLP here")
    return nn.Sequential(*modules), width


class DLRM(nn.Module):
    def __init__(self, cfg, dense_dim, emb_shapes):
        super().__init__()
        (slots, dim), = emb_shapes
        self.bottom, bottom_out = mlp(cfg, ["fc1", "fc2", "fc3"], dense_dim)
        assert bottom_out == dim, "the bottom MLP's output must have the embeddings' width"
        f1 = slots + 1
        self.register_buffer("pairs", torch.tril_indices(f1, f1, offset=-1))
        self.top, _ = mlp(cfg, ["fc4", "fc5", "fc6", "fc7", "fc8"], dim + f1 * (f1 - 1) // 2 + 1)

    def forward(self, dense, embs):
        x = self.bottom(dense)
        t = torch.cat([x.unsqueeze(1), embs[0].to(x.dtype)], dim=1)
        z = torch.bmm(t, t.transpose(1, 2))[:, self.pairs[0], self.pairs[1]]
        zero = torch.zeros(x.shape[0], 1, device=x.device, dtype=x.dtype)
        return self.top(torch.cat([x, z, zero], dim=1))


class Cross(nn.Module):
    """HugeCTR's MultiCross: x_{l+1} = x0 (x_l . w_l) + b_l + x_l."""

    def __init__(self, width, layers):
        super().__init__()
        bound = (6.0 / (2 * width)) ** 0.5
        self.w = nn.ParameterList(nn.Parameter(torch.empty(width).uniform_(-bound, bound))
                                  for _ in range(layers))
        self.b = nn.ParameterList(nn.Parameter(torch.zeros(width)) for _ in range(layers))

    def forward(self, x0):
        x = x0
        for w, b in zip(self.w, self.b):
            x = x0 * (x @ w).unsqueeze(1) + b + x
        return x


class DCN(nn.Module):
    def __init__(self, cfg, dense_dim, emb_shapes):
        super().__init__()
        (slots, dim), = emb_shapes
        width = slots * dim + dense_dim
        self.cross = Cross(width, find_layer(cfg, "multicross1")["mc_param"]["num_layers"])
        self.deep, deep_out = mlp(cfg, ["fc1", "dropout1", "fc2", "dropout2"], width)
        self.last, _ = mlp(cfg, ["fc4"], deep_out + width)

    def forward(self, dense, embs):
        x0 = torch.cat([embs[0].flatten(1), dense], dim=1)
        return self.last(torch.cat([self.deep(x0), self.cross(x0)], dim=1))


class DeepFM(nn.Module):
    def __init__(self, cfg, dense_dim, emb_shapes):
        super().__init__()
        (slots, dim), = emb_shapes
        self.fm_dim = find_layer(cfg, "fmorder2")["out_dim"]
        assert dim == self.fm_dim + 1, "each vector is its FM part and one linear weight"
        w1 = find_layer(cfg, "weight_multiply1")["weight_dims"]
        w2 = find_layer(cfg, "weight_multiply2")["weight_dims"]
        assert w1 == [dense_dim, self.fm_dim] and w2 == [dense_dim, 1]
        self.w1 = nn.Parameter(torch.empty(w1).uniform_(-0.1, 0.1))
        self.w2 = nn.Parameter(torch.empty(w2).uniform_(-0.1, 0.1))
        self.fields = slots + dense_dim
        self.deep, _ = mlp(cfg, ["fc1", "dropout1", "fc2", "dropout2", "fc3"],
                           self.fields * self.fm_dim)

    def forward(self, dense, embs):
        e, batch = embs[0], dense.shape[0]
        weighted = dense.unsqueeze(2) * self.w1  # WeightMultiply: [batch, dense, fm_dim]
        fields = torch.cat([e[:, :, : self.fm_dim].flatten(1), weighted.flatten(1)], dim=1)
        deep = self.deep(fields)
        v = fields.view(batch, self.fields, self.fm_dim)
        s = v.sum(dim=1)
        fm = 0.5 * (s * s - (v * v).sum(dim=1))
        linear = torch.cat([e[:, :, self.fm_dim], dense * self.w2[:, 0]], dim=1)
        return deep + fm.sum(dim=1, keepdim=True) + linear.sum(dim=1, keepdim=True)


class WideAndDeep(nn.Module):
    def __init__(self, cfg, dense_dim, emb_shapes):
        super().__init__()
        (wide_slots, wide_dim), (slots, dim) = emb_shapes
        assert wide_slots * wide_dim == 1, "the wide part is one 1-wide slot"
        self.deep, _ = mlp(cfg, ["fc1", "dropout1", "fc2", "dropout2", "fc4"],
                           slots * dim + dense_dim)

    def forward(self, dense, embs):
        deep = self.deep(torch.cat([embs[1].flatten(1), dense], dim=1))
        return deep + embs[0].flatten(1)


MODELS = {"dlrm": DLRM, "dcn": DCN, "deepfm": DeepFM, "wide_and_deep": WideAndDeep}
EMBEDDING_TYPES = ("DistributedSlotSparseEmbeddingHash", "LocalizedSlotSparseEmbeddingHash",
                   "LocalizedSlotSparseEmbeddingOneHot")


def sparse_inputs(cfg, slot_sizes):
    """Per sparse input of the Data layer, in order: (slots, vector size, its slots' sizes)."""
    data = cfg["layers"][0]
    inputs, first = [], 0
    for sparse in data["sparse"]:
        emb = [l for l in cfg["layers"] if l["type"] in EMBEDDING_TYPES
               and l["bottom"] == sparse["top"]]
        assert len(emb) == 1, f"sparse input {sparse['top']!r} needs one embedding"
        hparam = emb[0]["sparse_embedding_hparam"]
        assert hparam.get("combiner", "sum") in ("sum", 0), "the peers pool by sum"
        slots = sparse["slot_num"]
        inputs.append((slots, hparam["embedding_vec_size"], slot_sizes[first:first + slots]))
        first += slots
    assert first == len(slot_sizes), f"{len(slot_sizes)} slot sizes for {first} slots"
    return inputs


def optimizers(cfg, dense_params, sparse_params):
    opt = cfg["optimizer"]
    if opt["type"] == "SGD":
        lr = opt.get("sgd_hparam", {}).get("learning_rate", 0.01)
        return [torch.optim.SGD(dense_params, lr=lr), torch.optim.SGD(sparse_params, lr=lr)]
    if opt["type"] == "Adam":
        h = opt.get("adam_hparam", {})
        kw = dict(lr=h.get("learning_rate", 0.001), betas=(h.get("beta1", 0.9), h.get("beta2", 0.999)),
                  eps=h.get("epsilon", 1e-7))
        try:
            dense = torch.optim.Adam(dense_params, fused=True, **kw)
        except (TypeError, RuntimeError):  # a PyTorch without the fused Adam
            dense = torch.optim.Adam(dense_params, **kw)
        return [dense, torch.optim.SparseAdam(sparse_params, **kw)]
    raise ValueError(f"optimizer {opt['type']}: the peers implement SGD and Adam")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=sorted(MODELS), default="dlrm")
    p.add_argument("--config", required=True, help="the model's configs/*.json")
    p.add_argument("--data", required=True)
    p.add_argument("--slot-sizes", required=True)
    p.add_argument("--batch", type=int, default=65536)
    p.add_argument("--iters", type=int, default=40)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--json", action="store_true")
    p.add_argument("--modes", default="fp32")
    p.add_argument("--compile", default="", help="modes to run again under torch.compile")
    a = p.parse_args()

    with open(a.config) as f:
        cfg = json.load(f)
    dev = torch.device("cuda")
    dense_dim = cfg["layers"][0].get("dense", {}).get("dense_dim", 0)
    inputs = sparse_inputs(cfg, [int(s) for s in a.slot_sizes.split(",")])
    total_slots = sum(slots for slots, _, _ in inputs)

    width = 1 + dense_dim + total_slots
    raw = np.memmap(a.data, dtype=np.int32, mode="r")
    steps = a.warmup + a.iters
    assert raw.size // width >= steps * a.batch, f"{raw.size // width} samples < {steps} x {a.batch}"
    rows = raw[: steps * a.batch * width].reshape(steps * a.batch, width)
    floats = rows[:, : 1 + dense_dim].view(np.float32)
    offsets = [torch.tensor(np.concatenate([[0], np.cumsum(sizes)[:-1]]), dtype=torch.int64,
                            device=dev) for _, _, sizes in inputs]
    batches = []
    for i in range(steps):
        s = slice(i * a.batch, (i + 1) * a.batch)
        label = torch.from_numpy(np.ascontiguousarray(floats[s, :1])).to(dev)
        dense = torch.from_numpy(np.ascontiguousarray(floats[s, 1:])).to(dev)
        keys, column = [], 1 + dense_dim
        for (slots, _, _), off in zip(inputs, offsets):
            k = torch.from_numpy(np.ascontiguousarray(rows[s, column:column + slots])).to(dev)
            keys.append((k.long() + off).reshape(-1))
            column += slots
        batches.append((label, dense, keys))
    bag_offsets = [torch.arange(0, a.batch * slots, dtype=torch.int64, device=dev)
                   for slots, _, _ in inputs]

    def run(mode, compiled):
        torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
        torch.backends.cudnn.allow_tf32 = mode == "tf32"
        autocast = {"f16": torch.float16, "bf16": torch.bfloat16}.get(mode)
        embeddings = nn.ModuleList(nn.EmbeddingBag(sum(sizes), dim, mode="sum", sparse=True)
                                   for _, dim, sizes in inputs).to(dev)
        for e in embeddings:
            nn.init.uniform_(e.weight, -0.05, 0.05)
        model = MODELS[a.model](cfg, dense_dim, [(slots, dim) for slots, dim, _ in inputs]).to(dev)
        loss_fn = nn.BCEWithLogitsLoss()
        opts = optimizers(cfg, list(model.parameters()), list(embeddings.parameters()))

        def dense_part(dense, embs, label):
            return loss_fn(model(dense, embs).float().view(-1, 1), label)

        forward = torch.compile(dense_part) if compiled else dense_part

        def step(label, dense, keys):
            embs = [e(k, o).view(a.batch, slots, dim)
                    for e, k, o, (slots, dim, _) in zip(embeddings, keys, bag_offsets, inputs)]
            if autocast is not None:
                with torch.autocast("cuda", dtype=autocast):
                    loss = forward(dense, embs, label)
            else:
                loss = forward(dense, embs, label)
            for opt in opts:
                opt.zero_grad(set_to_none=True)
            loss.backward()
            for opt in opts:
                opt.step()
            return loss

        model.train()
        for i in range(a.warmup):
            step(*batches[i])
        torch.cuda.synchronize()
        start = time.perf_counter()
        for i in range(a.warmup, steps):
            loss = step(*batches[i])
        torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        result = {"model": a.model, "mode": mode, "compiled": compiled,
                  "samples_per_s": a.iters * a.batch / seconds,
                  "ms_per_iter": 1e3 * seconds / a.iters, "loss": float(loss),
                  "torch": torch.__version__, "device": torch.cuda.get_device_name()}
        del embeddings, model, opts
        torch.cuda.empty_cache()
        return result

    runs = [(m, False) for m in a.modes.split(",")]
    if a.compile:
        runs += [(m, True) for m in a.compile.split(",")]
    for mode, compiled in runs:
        try:
            r = run(mode, compiled)
        except Exception as e:  # a mode this PyTorch cannot run: say so and go on
            r = {"model": a.model, "mode": mode, "compiled": compiled,
                 "error": str(e).splitlines()[0][:200] if str(e) else type(e).__name__}
        name = f"{a.model} {mode}{' compiled' if compiled else ''}"
        if a.json:
            print(json.dumps(r), flush=True)
        elif "error" in r:
            print(f"{name}: failed: {r['error']}")
        else:
            print(f"{name}: {r['samples_per_s'] / 1e6:.3f} M samples/s "
                  f"({r['ms_per_iter']:.2f} ms per iteration)")


if __name__ == "__main__":
    main()
