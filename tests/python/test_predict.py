"""predict() on numpy arrays gives `ember predict`'s scores for the same samples; predict_file()
is `ember predict` itself; the accepted key layouts give the same scores."""

import numpy as np
import pytest

import ember
from conftest import CONFIG, cli_set, run_cli
from norm_file import read_file_list, read_norm


@pytest.fixture(scope="module")
def trained(ember_exe, dataset, tmp_path_factory):
    """A model trained 12 steps by Python, saved, and its CLI predictions."""
    settings = {"layers.data.source": dataset["train"], "layers.data.eval_source": dataset["eval"],
                "solver.max_iter": 12, "solver.device": "cpu"}
    tmp = tmp_path_factory.mktemp("predict")
    s = ember.Session(CONFIG, set=settings, quiet=True)
    s.fit()
    s.save(tmp / "model")
    out = tmp / "cli.csv"
    run_cli(ember_exe, "predict", CONFIG, "--model", str(tmp / "model"), "--out", str(out),
            *cli_set(settings))
    cli = np.loadtxt(out, delimiter=",", ndmin=2)
    files = read_file_list(dataset["eval"])
    assert len(files) == 1
    samples = read_norm(files[0], 26)
    return s, cli, samples, tmp


def test_predict_on_numpy_equals_ember_predict(trained):
    s, cli, (labels, dense, offsets, keys), _ = trained
    assert np.all(np.diff(offsets) == 1), "the fixture's data is one-hot"
    scores = s.predict(dense, keys.reshape(-1, 26))
    assert scores.shape == (1024,) and scores.dtype == np.float64
    np.testing.assert_array_equal(cli[:, 0], labels[:, 0])
    np.testing.assert_allclose(scores, cli[:, 1], rtol=1e-7, atol=1e-9)  # the CLI's 8 digits


def test_predict_batches_of_any_size_agree(trained):
    s, _, (_, dense, offsets, keys), _ = trained
    one_hot = keys.reshape(-1, 26)
    whole = s.predict(dense, one_hot)
    for rows in (1, 7, 513):  # under, and just over, batchsize_eval 512
        np.testing.assert_allclose(s.predict(dense[:rows], one_hot[:rows]), whole[:rows],
                                   rtol=1e-6, atol=1e-9)
    assert s.predict(dense[:0], one_hot[:0]).shape == (0,)


def test_key_layouts_give_the_same_scores(trained):
    s, _, (_, dense, offsets, keys), _ = trained
    rows = 64
    one_hot = keys.reshape(-1, 26)[:rows]
    expected = s.predict(dense[:rows], one_hot)
    csr = (offsets[:rows * 26 + 1], keys[:rows * 26])
    np.testing.assert_array_equal(s.predict(dense[:rows], csr), expected)
    np.testing.assert_array_equal(s.predict(dense[:rows], {"data1": one_hot}), expected)
    np.testing.assert_array_equal(s.predict(dense[:rows], [one_hot.astype(np.uint32)]), expected)
    np.testing.assert_array_equal(s.predict(dense[:rows].astype(np.float64), one_hot), expected)


def test_multi_hot_bags_are_pooled(trained):
    s, _, (_, dense, offsets, keys), _ = trained
    k = keys[:26]
    # sample 0 with slot 1's key moved into slot 0's bag (two keys there, none in slot 1)
    moved = (np.concatenate([[0, 2], np.arange(2, 26 + 1)]), k)
    assert moved[0].size == 27
    pooled = s.predict(dense[:1], moved)
    one_hot = s.predict(dense[:1], k.reshape(1, 26))
    assert pooled.shape == (1,) and pooled[0] != one_hot[0]
    too_many = (np.concatenate([[0, 2], np.arange(3, 27 + 1)]), np.concatenate([k, [7]]))
    with pytest.raises(ember.DataError, match="sample 0 has 27 keys, more than "
                                              "max_feature_num_per_sample 26"):
        s.predict(dense[:1], too_many)


def test_predict_file_equals_ember_predict(trained):
    s, cli, _, tmp = trained
    scores, labels = s.predict_file(tmp / "py.csv")
    np.testing.assert_allclose(scores, cli[:, 1], rtol=1e-7, atol=1e-9)
    np.testing.assert_array_equal(labels, cli[:, 0])
    assert (tmp / "py.csv").read_text() == (tmp / "cli.csv").read_text()


def test_bad_arrays_raise_config_errors(trained):
    s, _, (_, dense, _, keys), _ = trained
    one_hot = keys.reshape(-1, 26)
    with pytest.raises(ember.ConfigError, match=r"dense features are an array \[samples, 13\]"):
        s.predict(dense[:, :12], one_hot)
    with pytest.raises(ember.ConfigError, match=r"\[samples, slots\] = \[1024, 26\]"):
        s.predict(dense, one_hot[:, :25])
    with pytest.raises(ember.ConfigError, match="no sparse input 'nope'"):
        s.predict(dense, {"nope": one_hot})
    with pytest.raises(ember.ConfigError, match="row offsets"):
        s.predict(dense[:2], (np.array([0, 1, 2]), np.array([1, 2])))
    with pytest.raises(ember.DataError, match=r"key -1 \(entry 0\) is outside"):
        s.predict(dense[:1], -np.ones((1, 26), np.int64))
