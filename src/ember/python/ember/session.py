"""ember.Session: a model configuration on a set of devices, trained step by step or as a whole
run, evaluated, used for prediction on numpy arrays, saved and loaded (the C++ train::Session)."""

import json
import os
import tempfile

import numpy as np

from . import _ember

__all__ = ["Session"]


def _override(key, value):
    """One `set` entry as the command line's --set writes it: the value as JSON."""
    if isinstance(value, str):
        text = value  # read as JSON when it parses (a number, true), else as the string itself
        try:
            json.loads(text)
            text = json.dumps(value)  # a str stays a str: "1" is the string "1"
        except ValueError:
            pass
    else:
        if isinstance(value, np.generic):
            value = value.item()
        text = json.dumps(value)
    return f"{key}={text}"


def _config_source(config):
    """(text, is_json) for the C++ side: a path, a dict, or an ember.Model."""
    from .model import Model
    if isinstance(config, Model):
        config = config._config()
    if isinstance(config, dict):
        return json.dumps(config), True
    if isinstance(config, (str, os.PathLike)):
        return os.fspath(config), False
    raise TypeError(f"ember.Session: config must be a path, a dict or an ember.Model, "
                    f"got {type(config).__name__}")


def _csr(offsets, values, what):
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    values = np.ascontiguousarray(values, dtype=np.int64)
    if offsets.ndim != 1 or values.ndim != 1:
        raise _ember.ConfigError(f"predict: {what}: a CSR pair is two 1-D arrays (row offsets, "
                                 f"keys), got shapes {offsets.shape} and {values.shape}")
    return offsets, values


def _one_hot(keys, rows, slots, what):
    keys = np.asarray(keys)
    if keys.ndim != 2 or keys.shape != (rows, slots):
        raise _ember.ConfigError(f"predict: {what}: one-hot keys are an array [samples, slots] = "
                                 f"[{rows}, {slots}], got shape {keys.shape}")
    if not np.issubdtype(keys.dtype, np.integer):
        raise _ember.ConfigError(f"predict: {what}: keys must be integers, got {keys.dtype}")
    values = np.ascontiguousarray(keys, dtype=np.int64).reshape(-1)
    return np.arange(rows * slots + 1, dtype=np.int64), values


class Session:
    """A training session over a HugeCTR v3 JSON configuration (what `ember train` runs).

    config: a path to the JSON file, the configuration as a dict, or an ember.Model.
    device: "cpu" or "cuda" (default: the solver's, else cuda when present); gpus: GPU ids
    (overrides solver.gpu); cpu_ranks: CPU data-parallel ranks; set: overrides as --set takes
    them, {"solver.max_iter": 100, "layers.data.source": "train/_file_list.txt"}; run_dir: where
    metrics.csv (and snapshots without a snapshot_prefix) go; progress: a progress bar on a
    terminal during fit(); quiet: no display or evaluation lines (they go to sys.stdout).
    """

    def __init__(self, config, device=None, gpus=None, set=None, *, cpu_ranks=0, run_dir=None,
                 progress=False, quiet=False):
        text, is_json = _config_source(config)
        overrides = [_override(k, v) for k, v in (set or {}).items()]
        if isinstance(gpus, int):
            gpus = [gpus]
        self._s = _ember._Session(text, is_json, overrides, device or "", list(gpus or []),
                                  int(cpu_ranks or 0), os.fspath(run_dir) if run_dir else "",
                                  bool(progress), bool(quiet))

    # ---- lifetime ---------------------------------------------------------------------------

    def close(self):
        """Frees the session's memory, threads and devices now (also done when collected)."""
        self._s.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # ---- training ---------------------------------------------------------------------------

    def train(self):
        """One training step on the next batch (no display line, evaluation or snapshot).
        Returns False, without a step, when a num_epochs run has no more data; in a max_iter
        run the data repeats and stopping is the caller's."""
        return self._s.train()

    def get_current_loss(self):
        """The loss of the last step (the ranks' mean; waits for the device), None before the
        first step."""
        return self._s.get_current_loss()

    @property
    def iteration(self):
        """Training steps taken (a loaded checkpoint's count included)."""
        return self._s.iteration

    def fit(self):
        """The whole configured run, as `ember train` does it: display lines, evaluations,
        snapshots, the AUC target; a resumed session continues where it stopped. Returns a dict
        (iterations, loss, eval, seconds, samples_per_second, losses, ...). Ctrl-C ends the run
        after the current step with a snapshot, then raises KeyboardInterrupt."""
        return self._s.fit()

    def evaluate(self):
        """Evaluates on the configuration's eval_source: {"AUC", "AverageLoss", "samples"}."""
        return self._s.evaluate()

    # ---- prediction -------------------------------------------------------------------------

    def _sparse_arrays(self, keys, rows):
        inputs = self._s.sparse_inputs  # [(top, slot_num)], in the Data layer's order
        if not inputs:
            return []
        if isinstance(keys, dict):
            unknown = sorted(set(keys) - {name for name, _ in inputs})
            if unknown:
                raise _ember.ConfigError(f"predict: no sparse input {unknown[0]!r} (the model "
                                         f"has {[name for name, _ in inputs]})")
            missing = [name for name, _ in inputs if name not in keys]
            if missing:
                raise _ember.ConfigError(f"predict: no keys for sparse input {missing[0]!r}")
            per_input = [keys[name] for name, _ in inputs]
        elif isinstance(keys, tuple) and len(inputs) == 1 and len(keys) == 2 and \
                all(np.ndim(k) == 1 for k in keys):
            per_input = [keys]
        elif isinstance(keys, (list, tuple)):
            if len(keys) != len(inputs):
                raise _ember.ConfigError(f"predict: the model has {len(inputs)} sparse inputs, "
                                         f"got keys for {len(keys)}")
            per_input = list(keys)
        else:
            keys = np.asarray(keys)
            total = sum(slots for _, slots in inputs)
            if keys.ndim != 2 or keys.shape != (rows, total):
                raise _ember.ConfigError(f"predict: one-hot keys are an array [samples, slots] "
                                         f"= [{rows}, {total}], got shape {keys.shape}")
            per_input, at = [], 0
            for _, slots in inputs:
                per_input.append(keys[:, at:at + slots])
                at += slots
        out = []
        for (name, slots), k in zip(inputs, per_input):
            what = f"sparse input {name!r}"
            if isinstance(k, tuple):
                if len(k) != 2:
                    raise _ember.ConfigError(f"predict: {what}: a CSR pair is (row offsets, keys)")
                out.append(_csr(k[0], k[1], what))
            else:
                out.append(_one_hot(k, rows, slots, what))
        return out

    def predict(self, dense, keys):
        """The predicted probability of each sample, as a numpy array [samples] (float64;
        [samples, columns] for MultiCrossEntropyLoss).

        dense: float32 [samples, dense_dim]. keys: for one-hot inputs an integer array
        [samples, slots] (all sparse inputs' slots side by side, in the Data layer's order); for
        multi-hot a CSR pair (row_offsets, keys) with row_offsets [samples * slot_num + 1]
        (bag = sample * slot_num + slot); with several sparse inputs a list or a dict by input
        name of such arrays or pairs. Keys are as the embedding reads them (Raw and Parquet
        data: with slot_size_array's offsets added)."""
        dense = np.ascontiguousarray(dense, dtype=np.float32)
        dense_dim = self._s.dense_dim
        if dense.ndim == 1 and dense_dim == 0:
            dense = dense.reshape(-1, 0)
        if dense.ndim != 2 or dense.shape[1] != dense_dim:
            raise _ember.ConfigError(f"predict: dense features are an array [samples, "
                                     f"{dense_dim}], got shape {dense.shape}")
        rows = dense.shape[0]
        return self._s.predict(dense, self._sparse_arrays(keys, rows), rows)

    def predict_file(self, out=None):
        """Predicts every sample of the configuration's eval_source (set "layers.data.eval_source"
        to choose the data) as `ember predict` does. Writes the "label,score" lines to `out` when
        given; returns (scores, labels) as numpy arrays."""
        with tempfile.TemporaryDirectory(prefix="ember-predict-") as tmp:
            path = os.fspath(out) if out else os.path.join(tmp, "predictions.csv")
            self._s.predict_file(path)
            table = np.loadtxt(path, delimiter=",", dtype=np.float64, ndmin=2)
        if table.size == 0:
            return np.zeros(0), np.zeros(0, dtype=np.float32)
        return table[:, 1], table[:, 0].astype(np.float32)

    # ---- the model --------------------------------------------------------------------------

    def save(self, dir):
        """Writes a checkpoint directory, the one `ember train --model-out` writes."""
        self._s.save(os.fspath(dir))

    def load(self, dir, with_optimizer_states=True):
        """Reads a checkpoint (from save(), `ember train --model-out` or a snapshot); the next
        step continues where it stopped."""
        self._s.load(os.fspath(dir), with_optimizer_states)

    def get_embedding(self, name):
        """The embedding `name` from every rank: (keys int64 [rows], vectors float32
        [rows, vec_size]), sorted by key."""
        return self._s.get_embedding(name)

    def get_dense_weights(self):
        """The dense tensors ("<layer>.<parameter>" -> float32 array of its shape), in order."""
        return self._s.get_dense_weights()

    def set_dense_weights(self, weights):
        """Replaces the named dense tensors (each with its shape) on every rank."""
        self._s.set_dense_weights(dict(weights))

    @property
    def config(self):
        """The configuration as trained (after `set`), as a dict."""
        return json.loads(self._s.config_json)

    @property
    def devices(self):
        """"cpu", "cpu x2", "cuda:0,cuda:1", ..."""
        return self._s.devices

    @property
    def skipped_batches(self):
        """Batches skipped by solver.nan_policy "skip"."""
        return self._s.skipped_batches

    def __repr__(self):
        return f"ember.Session(devices={self.devices!r}, iteration={self.iteration})"
