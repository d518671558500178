"""Ember from Python: the same C++ core as the `ember` command, driven from a script or notebook.

    import ember
    s = ember.Session("dlrm.json", device="cpu", set={"solver.max_iter": 100})
    while s.train():                 # one step; False when a num_epochs run is out of data
        if s.iteration % 10 == 0:
            print(s.iteration, s.get_current_loss())
        if s.iteration == 100:
            break
    print(s.evaluate())              # {"AUC": ..., "AverageLoss": ..., "samples": ...}
    scores = s.predict(dense, keys)  # numpy in, numpy out
    s.save("model")

ember.Model builds a configuration layer by layer, as hugectr.Model does (ember/model.py).
Errors are ember.Error and its subclasses: ConfigError (also a ValueError), DataError,
OutOfMemoryError (also a MemoryError), CudaUnavailableError. docs/python.md has the whole API.
"""

import os as _os

# OpenMP's idle threads spin by default and starve the input pipeline's and OpenBLAS's threads on
# machines with few cores (src/ember/core/openmp_policy.hpp: the `ember` command re-executes itself
# for this). libgomp reads the variable once, when it loads with the extension module below, so
# it is set first; a value the user set is kept.
_os.environ.setdefault("OMP_WAIT_POLICY", "passive")

from . import _ember  # noqa: E402
from ._ember import (ConfigError, CudaUnavailableError, DataError, Error, OutOfMemoryError,
                     check_config, cuda_compiled, load_config)
from .model import (Check_t, CommunicationType, CreateOptimizer, CreateSolver,
                    DataReaderParams, DataReaderSparseParam, DataReaderType_t, DenseLayer,
                    Embedding_t, HybridEmbeddingParam, HybridEmbeddingType, Initializer_t, Input,
                    Layer_t, Model, Optimizer_t, Regularizer_t, SparseEmbedding, Update_t)
from .session import Session

__version__ = getattr(_ember, "__version__", "0")

__all__ = [
    "Check_t", "CommunicationType", "ConfigError", "CreateOptimizer", "CreateSolver", "CudaUnavailableError",
    "DataError", "DataReaderParams", "DataReaderSparseParam", "DataReaderType_t", "DenseLayer",
    "Embedding_t", "Error", "HybridEmbeddingParam", "HybridEmbeddingType", "Initializer_t", "Input", "Layer_t", "Model", "Optimizer_t",
    "OutOfMemoryError", "Regularizer_t", "Session", "SparseEmbedding", "Update_t",
    "check_config", "cuda_compiled", "load_config",
]
