"""Checkpoints cross between Python and the command line both ways: a model saved by
Session.save() resumes in `ember train` and evaluates in `ember eval`, and `ember train
--model-out` loads back into a Session; weights read and written as numpy arrays."""

import numpy as np
import pytest

import ember
from conftest import CONFIG, cli_set, run_cli


def test_save_in_python_resume_in_cli_and_load_back(ember_exe, settings, tmp_path):
    half = dict(settings, **{"solver.max_iter": 6})
    s = ember.Session(CONFIG, set=half, quiet=True)
    for _ in range(6):
        s.train()
    s.save(tmp_path / "py6")
    run_cli(ember_exe, "train", CONFIG, "--no-progress", "--resume", str(tmp_path / "py6"),
            "--model-out", str(tmp_path / "cli12"), *cli_set(settings))
    # an unbroken Python run of the 12 steps
    whole = ember.Session(CONFIG, set=settings, quiet=True)
    whole.fit()
    back = ember.Session(CONFIG, set=settings, quiet=True)
    back.load(tmp_path / "cli12")
    assert back.iteration == 12
    expected = whole.get_dense_weights()
    got = back.get_dense_weights()
    assert list(got) == list(expected)
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
    keys, vectors = back.get_embedding("sparse_embedding1")
    keys_w, vectors_w = whole.get_embedding("sparse_embedding1")
    np.testing.assert_array_equal(keys, keys_w)
    np.testing.assert_array_equal(vectors, vectors_w)


def test_cli_eval_of_a_python_model_equals_evaluate(ember_exe, settings, tmp_path):
    s = ember.Session(CONFIG, set=settings, quiet=True)
    s.fit()
    s.save(tmp_path / "model")
    mine = s.evaluate()
    out = run_cli(ember_exe, "eval", CONFIG, "--model", str(tmp_path / "model"),
                  *cli_set(settings)).stdout
    last = out.strip().splitlines()[-1]
    values = dict(kv.split("=") for kv in last.split())
    assert float(values["AUC"]) == pytest.approx(mine["AUC"], rel=1e-5)
    assert float(values["AverageLoss"]) == pytest.approx(mine["AverageLoss"], rel=1e-5)


def test_load_without_optimizer_states_and_resume_counts(settings, tmp_path):
    s = ember.Session(CONFIG, set=settings, quiet=True)
    s.fit()
    s.save(tmp_path / "m")
    t = ember.Session(CONFIG, set=settings, quiet=True)
    t.load(tmp_path / "m", with_optimizer_states=False)
    assert t.iteration == 12
    assert t.evaluate()["AverageLoss"] == pytest.approx(s.evaluate()["AverageLoss"], rel=1e-12)


def test_dense_weights_round_trip_and_change_the_model(settings):
    s = ember.Session(CONFIG, set=settings, quiet=True)
    weights = s.get_dense_weights()
    assert weights["fc1.weight"].shape == (13, 64) and weights["fc1.weight"].dtype == np.float32
    before = s.evaluate()["AverageLoss"]
    changed = {name: w * 0.5 for name, w in weights.items()}
    s.set_dense_weights(changed)
    for name, w in s.get_dense_weights().items():
        np.testing.assert_array_equal(w, changed[name])
    assert s.evaluate()["AverageLoss"] != before
    with pytest.raises(ember.ConfigError, match="no dense tensor 'fc9.weight'"):
        s.set_dense_weights({"fc9.weight": np.zeros((1, 1), np.float32)})
    with pytest.raises(ember.ConfigError, match=r"'fc1.weight' is \[13, 64\], got \[64, 13\]"):
        s.set_dense_weights({"fc1.weight": np.zeros((64, 13), np.float32)})


def test_get_embedding_of_an_unknown_name(settings):
    s = ember.Session(CONFIG, set=settings, quiet=True)
    with pytest.raises(ember.ConfigError, match="no embedding 'x' .*'sparse_embedding1'"):
        s.get_embedding("x")
    keys, vectors = s.get_embedding("sparse_embedding1")
    assert keys.shape == (0,) and vectors.shape[0] == 0  # rows appear as keys are trained
    s.train()
    keys, vectors = s.get_embedding("sparse_embedding1")
    assert keys.dtype == np.int64 and vectors.shape == (keys.size, 16)
    assert np.all(np.diff(keys) > 0)
