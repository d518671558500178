"""The module on a GPU (CTest label gpu; skipped without one): per-step losses equal `ember train
--device cuda`'s, and predict() on the GPU equals the CPU's and `ember predict`'s on the GPU for
the same model."""

import numpy as np
import pytest

import ember
from conftest import CONFIG, cli_set, metrics_losses, run_cli
from norm_file import read_file_list, read_norm


@pytest.fixture
def cuda_settings(settings):
    settings = dict(settings, **{"solver.device": "cuda"})
    try:
        ember.Session(CONFIG, set=settings, quiet=True).close()
    except ember.Error as e:  # CudaUnavailableError, or no device
        pytest.skip(f"no GPU: {e}")
    return settings


def test_gpu_steps_equal_ember_train_on_the_gpu(ember_exe, cuda_settings, tmp_path):
    run_cli(ember_exe, "train", CONFIG, "--no-progress", "--run-dir", str(tmp_path / "cli"),
            *cli_set(cuda_settings))
    expected = metrics_losses(tmp_path / "cli" / "metrics.csv")
    s = ember.Session(CONFIG, set=cuda_settings, quiet=True)
    assert s.devices.startswith("cuda")
    for it in sorted(expected):
        assert s.train()
        assert s.get_current_loss() == pytest.approx(expected[it], rel=1e-5), it


def test_gpu_predict_equals_the_cpu_and_ember_predict(ember_exe, dataset, cuda_settings,
                                                      tmp_path):
    gpu = ember.Session(CONFIG, set=cuda_settings, quiet=True)
    gpu.fit()
    gpu.save(tmp_path / "model")
    cpu = ember.Session(CONFIG, set=dict(cuda_settings, **{"solver.device": "cpu"}), quiet=True)
    cpu.load(tmp_path / "model")
    labels, dense, offsets, keys = read_norm(read_file_list(dataset["eval"])[0], 26)
    one_hot = keys.reshape(-1, 26)
    on_gpu = gpu.predict(dense, one_hot)
    np.testing.assert_allclose(on_gpu, cpu.predict(dense, one_hot), rtol=1e-5, atol=1e-7)
    run_cli(ember_exe, "predict", CONFIG, "--model", str(tmp_path / "model"), "--out",
            str(tmp_path / "cli.csv"), *cli_set(cuda_settings))
    cli = np.loadtxt(tmp_path / "cli.csv", delimiter=",", ndmin=2)
    np.testing.assert_allclose(on_gpu, cli[:, 1], rtol=1e-6, atol=1e-8)
    for rows in (1, 64):
        np.testing.assert_allclose(gpu.predict(dense[:rows], one_hot[:rows]), on_gpu[:rows],
                                   rtol=1e-5, atol=1e-7)
