"""Fixtures of the Python module's tests: the `ember` executable (EMBER_EXE, set by CTest), a
small learnable dataset made once per test run by `ember datagen`, and the configuration the
tests train (tests/reference/dlrm_small.json, a small DLRM)."""

import json
import os
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CONFIG = os.path.join(ROOT, "tests", "reference", "dlrm_small.json")


@pytest.fixture(scope="session")
def ember_exe():
    exe = os.environ.get("EMBER_EXE") or os.path.join(ROOT, "build", "ember")
    if not os.access(exe, os.X_OK):
        pytest.skip(f"no ember executable at {exe} (set EMBER_EXE)")
    return exe


@pytest.fixture(scope="session")
def dataset(ember_exe, tmp_path_factory):
    """8192 training samples in two Norm files, 1024 evaluation samples (26 one-hot slots)."""
    out = tmp_path_factory.mktemp("data")
    subprocess.run([ember_exe, "datagen", "--like", CONFIG, "--out", str(out), "--samples", "8192",
                    "--files", "2", "--eval-samples", "1024", "--seed", "5", "--threads", "2"],
                   check=True, stdout=subprocess.DEVNULL)
    return {"train": str(out / "train.txt"), "eval": str(out / "eval.txt"), "dir": str(out)}


@pytest.fixture
def settings(dataset):
    """The overrides every test run uses: the dataset, a short run on the CPU."""
    return {"layers.data.source": dataset["train"], "layers.data.eval_source": dataset["eval"],
            "solver.max_iter": 12, "solver.display": 1, "solver.device": "cpu"}


def cli_set(settings):
    """The same overrides as --set arguments."""
    args = []
    for key, value in settings.items():
        args += ["--set", f"{key}={value if isinstance(value, str) else json.dumps(value)}"]
    return args


def run_cli(ember_exe, *args, check=True):
    r = subprocess.run([ember_exe, *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"ember {' '.join(args)} failed ({r.returncode}):\n{r.stderr}")
    return r


def metrics_losses(path):
    """{iteration: loss} from a run's metrics.csv."""
    losses = {}
    with open(path) as f:
        next(f)
        for line in f:
            it, phase, metric, value = line.strip().split(",")
            if phase == "train" and metric == "loss":
                losses[int(it)] = float(value)
    return losses
