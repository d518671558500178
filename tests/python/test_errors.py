"""Ember's C++ errors arrive as Python exceptions of the matching class, with the message the
command line prints."""

import json

import pytest

import ember
from conftest import CONFIG, cli_set, run_cli


def test_the_exception_classes():
    assert issubclass(ember.ConfigError, ember.Error) and issubclass(ember.ConfigError, ValueError)
    assert issubclass(ember.DataError, ember.Error)
    assert issubclass(ember.OutOfMemoryError, MemoryError)
    assert issubclass(ember.Error, RuntimeError)
    assert ember.ConfigError.__module__ == "ember"


def test_a_bad_key_is_a_config_error_with_the_cli_message(ember_exe, settings, tmp_path):
    bad = dict(settings, **{"solver.batchsize_evl": 3})
    with pytest.raises(ember.ConfigError) as e:
        ember.Session(CONFIG, set=bad)
    r = run_cli(ember_exe, "train", CONFIG, *cli_set(bad), check=False)
    assert r.returncode != 0
    assert str(e.value) in r.stderr
    assert "batchsize_evl" in str(e.value)


def test_a_bad_value_is_a_value_error(settings):
    with pytest.raises(ValueError, match="solver.batchsize"):
        ember.Session(CONFIG, set=dict(settings, **{"solver.batchsize": 511}), cpu_ranks=2)


def test_missing_data_is_a_data_error(settings, tmp_path):
    missing = dict(settings, **{"layers.data.source": str(tmp_path / "none.txt")})
    s = ember.Session(CONFIG, set=missing, quiet=True)
    with pytest.raises(ember.DataError, match="none.txt"):
        s.train()


def test_an_impossible_layer_is_an_out_of_memory_error(settings):
    with open(CONFIG) as f:
        config = json.load(f)
    config["layers"][2]["fc_param"]["num_output"] = 1 << 40  # 13 x 2^40 weights: 208 TiB
    with pytest.raises(ember.OutOfMemoryError, match="could not allocate") as e:
        ember.Session(config, device="cpu", set=settings, quiet=True)
    assert isinstance(e.value, MemoryError)


def test_a_malformed_file_names_line_and_column(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"solver": {\n  "batchsize": ,\n}}\n')
    with pytest.raises(ember.ConfigError, match=r"broken.json:2:16: not valid JSON"):
        ember.Session(path)


def test_set_values_keep_their_python_types(settings):
    s = ember.Session(CONFIG, set=dict(settings, **{"solver.max_iter": 7}), quiet=True)
    assert s.config["solver"]["max_iter"] == 7
    # a str stays a string, as --set solver.max_iter='"7"' would
    with pytest.raises(ember.ConfigError, match='"max_iter" must be an integer >= 1, got "7"'):
        ember.Session(CONFIG, set=dict(settings, **{"solver.max_iter": "7"}))
    with pytest.raises(ember.ConfigError, match="nosuch"):
        ember.Session(CONFIG, set={"nosuch.key.path": 1})


def test_a_closed_session_says_so(settings):
    with ember.Session(CONFIG, set=settings, quiet=True) as s:
        s.train()
    with pytest.raises(ember.Error, match="closed"):
        s.train()
