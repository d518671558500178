"""A model builder in the style of HugeCTR's Python API (hugectr.Model).

Every piece turns into a block of the HugeCTR v3 JSON configuration that `ember train` reads:
`Model.graph_to_json(path)` writes it, and `compile()` checks it with the C++ configuration
reader, so a model built here and the same model written by hand are one and the same thing.

    solver = ember.CreateSolver(batchsize=512, max_iter=200, display=10, lr=0.1)
    reader = ember.DataReaderParams(data_reader_type=ember.DataReaderType_t.Norm,
                                    source=["train/_file_list.txt"], eval_source="val/_file_list.txt",
                                    check_type=ember.Check_t.Sum)
    optimizer = ember.CreateOptimizer(optimizer_type=ember.Optimizer_t.SGD)
    model = ember.Model(solver, reader, optimizer)
    model.add(ember.Input(label_dim=1, label_name="label", dense_dim=13, dense_name="dense",
                          data_reader_sparse_param_array=[
                              ember.DataReaderSparseParam("data1", 1, True, 26)]))
    model.add(ember.SparseEmbedding(embedding_type=ember.Embedding_t.LocalizedSlotSparseEmbeddingHash,
                                    embedding_vec_size=16, combiner="sum",
                                    sparse_embedding_name="sparse_embedding1", bottom_name="data1",
                                    slot_size_array=[400] * 26))
    model.add(ember.DenseLayer(layer_type=ember.Layer_t.InnerProduct, bottom_names=["dense"],
                               top_names=["fc1"], num_output=64))
    ...
    model.compile()
    model.fit()

Keyword names follow HugeCTR's Python API where it has one (vvgpu, i64_input_key, lr,
weight_init_type, dropout_rate, ...); every key of the JSON schema is accepted under its JSON name
as well (max_iter, display, eval_interval, device, fc_param={...}, ...).
"""

import copy
import json

from . import _ember

__all__ = [
    "Check_t", "CommunicationType", "CreateOptimizer", "CreateSolver", "DataReaderParams",
    "DataReaderSparseParam", "DataReaderType_t", "DenseLayer", "Embedding_t",
    "HybridEmbeddingParam", "HybridEmbeddingType", "Initializer_t", "Input", "Layer_t", "Model",
    "Optimizer_t", "Regularizer_t", "SparseEmbedding", "Update_t",
]


class _Names:
    """HugeCTR's enums (hugectr.Layer_t.InnerProduct, ...) as the strings the JSON uses."""

    def __init_subclass__(cls, names=(), **kwargs):
        super().__init_subclass__(**kwargs)
        for name in names:
            setattr(cls, name, name)


class DataReaderType_t(_Names, names=("Norm", "Raw", "Parquet")):
    pass


class Check_t(_Names, names=("Sum", "None")):
    pass


class Optimizer_t(_Names, names=("SGD", "MomentumSGD", "Nesterov", "Adam", "AdaGrad")):
    pass


class Update_t(_Names, names=("Local", "Global", "LazyGlobal")):
    pass


class Embedding_t(_Names, names=("DistributedSlotSparseEmbeddingHash",
                                 "LocalizedSlotSparseEmbeddingHash",
                                 "LocalizedSlotSparseEmbeddingOneHot",
                                 "HybridSparseEmbedding")):
    pass


class Initializer_t(_Names, names=("Default", "Uniform", "XavierNorm", "XavierUniform", "Zero")):
    pass


class CommunicationType(_Names, names=("IB_NVLink_Hier", "IB_NVLink", "NVLink_SingleNode")):
    pass


class HybridEmbeddingType(_Names, names=("Distributed",)):
    pass


# HugeCTR's Python enum names of communication_type and the JSON's.
_COMMUNICATION_JSON = {"IB_NVLink_Hier": "IB_NVLink_Hierarchical"}


class HybridEmbeddingParam:
    """HugeCTR's HybridEmbeddingParam: the hybrid keys of a HybridSparseEmbedding's
    sparse_embedding_hparam. Positional as in HugeCTR (its older 8-argument form, or the newer one
    with use_train_precompute_indices and use_eval_precompute_indices before communication_type),
    or by keyword; Ember's frequent_rule ("hugectr" or "traffic", docs/embedding.md) by keyword
    only."""

    _KEYS = ("max_num_frequent_categories", "max_num_infrequent_samples", "p_dup_max",
             "max_all_reduce_bandwidth", "max_all_to_all_bandwidth",
             "efficiency_bandwidth_ratio", "communication_type", "hybrid_embedding_type")
    _KEYS_WITH_INDICES = _KEYS[:6] + ("use_train_precompute_indices",
                                      "use_eval_precompute_indices") + _KEYS[6:]
    _EMBER_KEYS = ("frequent_rule",)

    def __init__(self, *args, **kwargs):
        names = self._KEYS_WITH_INDICES if len(args) == 10 else self._KEYS
        if len(args) > len(names):
            raise TypeError(f"HybridEmbeddingParam takes at most 10 arguments, got {len(args)}")
        values = dict(zip(names, args))
        for key, value in kwargs.items():
            if key not in self._KEYS_WITH_INDICES + self._EMBER_KEYS:
                raise TypeError(f"HybridEmbeddingParam: unknown argument {key!r}")
            if key in values:
                raise TypeError(f"HybridEmbeddingParam: {key!r} given twice")
            values[key] = value
        if "communication_type" in values:
            name = _enum_value(values["communication_type"])
            values["communication_type"] = _COMMUNICATION_JSON.get(name, name)
        if "hybrid_embedding_type" in values:
            values["hybrid_embedding_type"] = _enum_value(values["hybrid_embedding_type"])
        self.hparam = _drop_none(values)


class Regularizer_t(_Names, names=("L1", "L2")):
    pass


class Layer_t(_Names, names=(
        "InnerProduct", "FusedInnerProduct", "ReLU", "Sigmoid", "ELU", "PReLU_Dice", "Dropout",
        "BatchNorm", "Concat", "Reshape", "Slice", "Interaction", "FmOrder2", "MultiCross",
        "WeightMultiply", "Add", "Sub", "ElementwiseMultiply", "DotProduct", "ReduceSum",
        "ReduceMean", "Softmax", "Scale", "Gather", "Cast", "FusedReshapeConcat", "MatrixMultiply",
        "BinaryCrossEntropyLoss", "CrossEntropyLoss", "MultiCrossEntropyLoss")):
    pass


def _drop_none(d):
    return {k: v for k, v in d.items() if v is not None}


def _enum_value(value):
    """An enum member of HugeCTR's module prints as 'Layer_t.InnerProduct': keep the last part."""
    if value is None or isinstance(value, (int, float, list, dict)):
        return value
    return str(value).rsplit(".", 1)[-1]


# ---------------------------------------------------------------------------------------------
# Solver, reader, optimizer


# CreateSolver's HugeCTR names that go to the optimizer block (the v3 JSON keeps the schedule
# there), and their JSON names.
_SCHEDULE_KEYS = {"lr": "learning_rate", "warmup_steps": "warmup_steps",
                  "decay_start": "decay_start", "decay_steps": "decay_steps",
                  "decay_power": "decay_power", "end_lr": "end_lr"}


class Solver:
    """The "solver" block. Build it with CreateSolver()."""

    def __init__(self, solver, schedule):
        self.solver = solver        # the JSON "solver" block
        self.schedule = schedule    # learning-rate keys for the optimizer block

    def __repr__(self):
        return f"ember.Solver({self.solver})"


def CreateSolver(*, vvgpu=None, i64_input_key=None, use_mixed_precision=None, scaler=None,
                 metrics_spec=None, repeat_dataset=None, **kwargs):
    """The solver: HugeCTR's CreateSolver() keywords, or the solver block's JSON keys.

    vvgpu=[[0, 1]] -> "gpu"; i64_input_key=True -> "input_key_type": "I64";
    use_mixed_precision=True with scaler -> "mixed_precision": scaler; metrics_spec={"AUC": 0.8}
    -> "eval_metrics": ["AUC:0.8"]; lr, warmup_steps, decay_* and end_lr go to the optimizer.
    repeat_dataset is accepted for HugeCTR's scripts: the JSON says max_iter or num_epochs.
    """
    solver, schedule = {}, {}
    for key, value in kwargs.items():
        if value is None:
            continue
        if key in _SCHEDULE_KEYS:
            schedule[_SCHEDULE_KEYS[key]] = value
        else:
            solver[key] = _enum_value(value)
    if vvgpu is not None:
        solver["gpu"] = vvgpu[0] if len(vvgpu) == 1 and isinstance(vvgpu[0], list) else vvgpu
    if i64_input_key is not None:
        solver["input_key_type"] = "I64" if i64_input_key else "I32"
    if use_mixed_precision:
        solver["mixed_precision"] = scaler if scaler is not None else 1024
    if metrics_spec is not None:
        solver["eval_metrics"] = [f"{k}:{v}" if k == "AUC" and v not in (None, 1.0) else k
                                  for k, v in metrics_spec.items()]
    del repeat_dataset
    return Solver(solver, schedule)


class DataReaderSparseParam:
    """One sparse input of the Data layer: HugeCTR's (top_name, nnz_per_slot, is_fixed_length,
    slot_num). nnz_per_slot may be one number or one per slot (Parquet)."""

    def __init__(self, top_name, nnz_per_slot, is_fixed_length, slot_num, *, type=None,
                 max_feature_num_per_sample=None, max_nnz=None):
        self.top_name = top_name
        self.nnz_per_slot = nnz_per_slot
        self.is_fixed_length = is_fixed_length
        self.slot_num = slot_num
        self.type = _enum_value(type)
        self.max_feature_num_per_sample = max_feature_num_per_sample
        self.max_nnz = max_nnz

    def to_json(self, input_type):
        per_slot = self.nnz_per_slot
        if isinstance(per_slot, (list, tuple)):
            max_features = sum(per_slot)
            nnz = list(per_slot)
        else:
            max_features = per_slot * self.slot_num
            nnz = None
        block = {"top": self.top_name, "type": self.type or input_type,
                 "max_feature_num_per_sample": self.max_feature_num_per_sample or max_features,
                 "slot_num": self.slot_num}
        if self.max_nnz is not None:
            block["max_nnz"] = self.max_nnz
        if self.is_fixed_length:
            block["is_fixed_length"] = True
        if nnz is not None:
            block["nnz_per_slot"] = nnz
        return block


class DataReaderParams:
    """Where the data comes from: HugeCTR's DataReaderParams, or the Data layer's JSON keys."""

    def __init__(self, *, data_reader_type=DataReaderType_t.Norm, source=None, eval_source=None,
                 check_type=Check_t.Sum, num_workers=None, slot_size_array=None, **kwargs):
        if isinstance(source, (list, tuple)):
            if len(source) != 1:
                raise _ember.ConfigError(
                    f"DataReaderParams: source must be one file list, got {len(source)} paths")
            source = source[0]
        self.block = _drop_none({"format": _enum_value(data_reader_type), "source": source,
                                 "eval_source": eval_source, "check": _enum_value(check_type),
                                 "num_workers": num_workers, "slot_size_array": slot_size_array})
        self.block.update(_drop_none(kwargs))


_HPARAM_BLOCK = {"SGD": "sgd_hparam", "MomentumSGD": "momentum_sgd_hparam",
                 "Nesterov": "nesterov_hparam", "Adam": "adam_hparam", "AdaGrad": "adagrad_hparam"}


class Optimizer:
    """The "optimizer" block (or an embedding's own). Build it with CreateOptimizer()."""

    def __init__(self, block):
        self.block = block

    def to_json(self, schedule=None):
        block = copy.deepcopy(self.block)
        if schedule:
            hparam = block.setdefault(_HPARAM_BLOCK[block["type"]], {})
            for key, value in schedule.items():
                hparam.setdefault(key, value)
        return block


def CreateOptimizer(*, optimizer_type=Optimizer_t.Adam, update_type=None, global_update=None,
                    **hparams):
    """An optimizer: its type, update type and hyper-parameters (learning_rate, beta1, beta2,
    epsilon, momentum_factor, initial_accu_value, atomic_update, warmup_steps, decay_start,
    decay_steps, decay_power, end_lr), which go to its <type>_hparam block."""
    kind = _enum_value(optimizer_type)
    if kind not in _HPARAM_BLOCK:
        raise _ember.ConfigError(f"CreateOptimizer: optimizer_type must be one of "
                                 f"{', '.join(_HPARAM_BLOCK)}, got '{kind}'")
    block = {"type": kind}
    if update_type is not None:
        block["update_type"] = _enum_value(update_type)
    if global_update is not None:
        block["global_update"] = global_update
    if "lr" in hparams:
        hparams["learning_rate"] = hparams.pop("lr")
    hparam = _drop_none(hparams)
    if hparam:
        block[_HPARAM_BLOCK[kind]] = hparam
    return Optimizer(block)


# ---------------------------------------------------------------------------------------------
# Layers


class Input:
    """The Data layer's tensors: the label, the dense features and the sparse inputs."""

    def __init__(self, *, label_dim, label_name="label", dense_dim, dense_name="dense",
                 data_reader_sparse_param_array=(), name="data"):
        self.label_dim = label_dim
        self.label_name = label_name
        self.dense_dim = dense_dim
        self.dense_name = dense_name
        self.sparse = list(data_reader_sparse_param_array)
        self.name = name


class SparseEmbedding:
    """A sparse embedding layer reading one sparse input (HugeCTR's SparseEmbedding)."""

    def __init__(self, *, embedding_type, embedding_vec_size, bottom_name, sparse_embedding_name,
                 combiner="sum", workspace_size_per_gpu_in_mb=None,
                 max_vocabulary_size_per_gpu=None, slot_size_array=None, optimizer=None,
                 hybrid_embedding_param=None, **kwargs):
        self.type = _enum_value(embedding_type)
        self.bottom = bottom_name
        self.name = sparse_embedding_name
        self.optimizer = optimizer
        hparam = {"embedding_vec_size": embedding_vec_size, "combiner": combiner,
                  "workspace_size_per_gpu_in_mb": workspace_size_per_gpu_in_mb,
                  "max_vocabulary_size_per_gpu": max_vocabulary_size_per_gpu,
                  "slot_size_array": slot_size_array}
        hparam.update(kwargs)
        if hybrid_embedding_param is not None:
            hparam.update(hybrid_embedding_param.hparam)
        self.hparam = _drop_none(hparam)

    def to_json(self):
        layer = {"name": self.name, "type": self.type, "bottom": self.bottom, "top": self.name,
                 "sparse_embedding_hparam": self.hparam}
        if self.optimizer is not None:
            layer["optimizer"] = self.optimizer.to_json()
        return layer


# HugeCTR's DenseLayer keywords: (JSON block or None for the layer itself, JSON key).
_DENSE_KEYWORDS = {
    "num_output": ("fc_param", "num_output"),
    "weight_init_type": ("fc_param", "weight_init"),
    "bias_init_type": ("fc_param", "bias_init"),
    "activation": ("fc_param", "activation"),
    "position": ("fc_param", "position"),
    "dropout_rate": (None, "rate"),
    "elu_alpha": ("elu_param", "alpha"),
    "factor": ("bn_param", "factor"),
    "eps": ("bn_param", "eps"),
    "gamma_init_type": ("bn_param", "gamma_init"),
    "beta_init_type": ("bn_param", "beta_init"),
    "num_layers": ("mc_param", "num_layers"),
    "leading_dim": (None, "leading_dim"),
    "selected": (None, "selected"),
    "time_step": (None, "time_step"),
    "ranges": (None, "ranges"),
    "out_dim": (None, "out_dim"),
    "weight_dims": (None, "weight_dims"),
    "axis": (None, "axis"),
    "indices": (None, "indices"),
    "target_weight_vec": (None, "target_weight"),
    "regularizer_type": (None, "regularizer"),
    "lambda_": (None, "lambda"),
}
# Blocks whose initializers HugeCTR names weight_init_type / bias_init_type as well.
_INIT_BLOCK = {"MultiCross": "mc_param"}


class DenseLayer:
    """A dense layer: its type, bottom and top tensor names and parameters, by HugeCTR's keyword
    names (num_output, weight_init_type, dropout_rate, ...) or as JSON blocks (fc_param={...})."""

    def __init__(self, *, layer_type, bottom_names, top_names, name=None, use_regularizer=None,
                 **params):
        self.type = _enum_value(layer_type)
        self.bottom = list(bottom_names) if not isinstance(bottom_names, str) else [bottom_names]
        self.top = list(top_names) if not isinstance(top_names, str) else [top_names]
        self.name = name
        self.params = {}
        if use_regularizer is False:
            params.pop("regularizer_type", None)
            params.pop("lambda_", None)
        for key, value in params.items():
            if value is None:
                continue
            value = _enum_value(value) if key.endswith("_type") else value
            block, json_key = _DENSE_KEYWORDS.get(key, (None, key))
            if block == "fc_param" and self.type in _INIT_BLOCK and json_key.endswith("_init"):
                block = _INIT_BLOCK[self.type]
            if self.type == "WeightMultiply" and key == "weight_init_type":
                block = None
            if self.type == "Scale" and key == "factor":
                block = None
            if block is None:
                self.params[json_key] = value
            else:
                self.params.setdefault(block, {})[json_key] = value

    def to_json(self, index):
        layer = {"name": self.name or self.top[0] or f"{self.type.lower()}{index}",
                 "type": self.type,
                 "bottom": self.bottom[0] if len(self.bottom) == 1 else self.bottom,
                 "top": self.top[0] if len(self.top) == 1 else self.top}
        layer.update(copy.deepcopy(self.params))
        return layer


# ---------------------------------------------------------------------------------------------
# The model


class Model:
    """A model put together layer by layer, as hugectr.Model; its configuration is the JSON that
    `ember train` reads (to_json(), graph_to_json()), checked by compile()."""

    def __init__(self, solver, reader, optimizer):
        self.solver = solver
        self.reader = reader
        self.optimizer = optimizer
        self.input = None
        self.embeddings = []
        self.dense = []
        self._compiled = None
        self._session = None

    def add(self, layer):
        if isinstance(layer, Input):
            if self.input is not None:
                raise _ember.ConfigError("Model.add: the model already has an Input")
            self.input = layer
        elif isinstance(layer, SparseEmbedding):
            self.embeddings.append(layer)
        elif isinstance(layer, DenseLayer):
            self.dense.append(layer)
        else:
            raise TypeError(f"Model.add takes ember.Input, ember.SparseEmbedding or "
                            f"ember.DenseLayer, got {type(layer).__name__}")
        self._compiled = None
        return self

    def _data_layer(self):
        if self.input is None:
            raise _ember.ConfigError("Model: no ember.Input was added (the Data layer)")
        reads = {e.bottom: e.type for e in self.embeddings}
        sparse = []
        for p in self.input.sparse:
            kind = reads.get(p.top_name, "")
            sparse.append(p.to_json("DistributedSlot" if kind.startswith("DistributedSlot")
                                    else "LocalizedSlot"))
        block = {"name": self.input.name, "type": "Data"}
        block.update(copy.deepcopy(self.reader.block))
        block["label"] = {"top": self.input.label_name, "label_dim": self.input.label_dim}
        block["dense"] = {"top": self.input.dense_name, "dense_dim": self.input.dense_dim}
        block["sparse"] = sparse
        return block

    def to_json(self):
        """The configuration as a dict (HugeCTR's v3 schema)."""
        layers = [self._data_layer()]
        layers += [e.to_json() for e in self.embeddings]
        layers += [d.to_json(i) for i, d in enumerate(self.dense)]
        return {"solver": copy.deepcopy(self.solver.solver),
                "optimizer": self.optimizer.to_json(self.solver.schedule),
                "layers": layers}

    def compile(self):
        """Checks the model with the configuration reader `ember train` uses; raises
        ember.ConfigError naming the layer and the key when something is wrong."""
        config = self.to_json()
        _ember.check_config(json.dumps(config), "ember.Model")
        self._compiled = config
        self._session = None
        return self

    def _config(self):
        return self._compiled if self._compiled is not None else self.compile()._compiled

    def graph_to_json(self, graph_config_file):
        """Writes the configuration, for `ember train` or ember.Session."""
        with open(graph_config_file, "w", encoding="utf-8") as f:
            json.dump(self._config(), f, indent=2)
            f.write("\n")

    def summary(self):
        """Prints the layers with their bottoms and tops, as HugeCTR's summary() does."""
        config = self._config()
        rows = [("layer", "type", "bottom", "top")]
        for layer in config["layers"]:
            if layer["type"] == "Data":
                tops = [layer["label"]["top"], layer["dense"]["top"]]
                tops += [s["top"] for s in layer["sparse"]]
                rows.append((layer["name"], "Data", "", ", ".join(tops)))
                continue
            bottom, top = layer.get("bottom", ""), layer.get("top", "")
            rows.append((layer["name"], layer["type"],
                         ", ".join(bottom) if isinstance(bottom, list) else bottom,
                         ", ".join(top) if isinstance(top, list) else top))
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        for r in rows:
            print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())

    def session(self, **kwargs):
        """The ember.Session that trains this model (keywords as ember.Session's)."""
        from .session import Session
        return Session(self._config(), **kwargs)

    def fit(self, num_epochs=None, max_iter=None, display=None, eval_interval=None,
            snapshot=None, snapshot_prefix=None, **session_kwargs):
        """Trains the whole run as `ember train` does, HugeCTR's fit() arguments overriding the
        solver's; returns the ember.Session (trained) for evaluate(), predict(), save()."""
        from .session import Session
        config = copy.deepcopy(self._config())
        solver = config["solver"]
        if max_iter is not None:
            solver.pop("num_epochs", None)
        if num_epochs is not None:
            solver.pop("max_iter", None)
        given = {"num_epochs": num_epochs, "max_iter": max_iter, "display": display,
                 "eval_interval": eval_interval, "snapshot": snapshot,
                 "snapshot_prefix": snapshot_prefix}
        solver.update(_drop_none(given))
        session = Session(config, **session_kwargs)
        session.fit()
        return session
