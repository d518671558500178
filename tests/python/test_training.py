"""Training from Python runs the C++ training loop itself: the per-step losses and a whole fit()
equal `ember train`'s on the same configuration, the GIL is free while a step runs, and Ctrl-C
stops fit() after a step."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import ember
from conftest import CONFIG, cli_set, metrics_losses, run_cli


def cli_losses(ember_exe, settings, tmp_path):
    run = tmp_path / "cli-run"
    run_cli(ember_exe, "train", CONFIG, "--no-progress", "--run-dir", str(run), *cli_set(settings))
    return metrics_losses(run / "metrics.csv")


def test_per_step_losses_equal_ember_train(ember_exe, settings, tmp_path):
    expected = cli_losses(ember_exe, settings, tmp_path)
    s = ember.Session(CONFIG, set=settings, quiet=True)
    assert s.get_current_loss() is None
    got = {}
    for _ in range(settings["solver.max_iter"]):
        assert s.train()
        got[s.iteration] = s.get_current_loss()
    assert sorted(got) == sorted(expected)
    for it, loss in expected.items():
        # metrics.csv keeps 9 significant digits of the same float
        assert got[it] == pytest.approx(loss, rel=2e-8, abs=0), it


def test_fit_equals_ember_train(ember_exe, settings, tmp_path):
    expected = cli_losses(ember_exe, settings, tmp_path)
    s = ember.Session(CONFIG, set=settings, run_dir=tmp_path / "py-run", quiet=True)
    result = s.fit()
    assert result["iterations"] == settings["solver.max_iter"] == s.iteration
    assert dict(result["losses"]) == pytest.approx(expected, rel=2e-8)
    assert metrics_losses(tmp_path / "py-run" / "metrics.csv") == expected
    assert set(result["eval"]) >= {"AUC", "AverageLoss", "samples"}
    assert result["eval"]["samples"] == 1024


def test_fit_prints_the_display_lines_to_sys_stdout(settings, capsys):
    settings = dict(settings, **{"solver.max_iter": 3})
    ember.Session(CONFIG, set=settings).fit()
    out = capsys.readouterr().out
    assert [line.split()[0] for line in out.splitlines() if line.startswith("iter=")] == \
        ["iter=1", "iter=2", "iter=3"]
    assert "eval iter=3 AUC=" in out


def test_steps_then_fit_continue_the_same_run(settings):
    whole = ember.Session(CONFIG, set=settings, quiet=True)
    whole.fit()
    parts = ember.Session(CONFIG, set=settings, quiet=True)
    for _ in range(5):
        parts.train()
    parts.fit()  # the remaining 7 steps of max_iter, on the batches an unbroken run sees
    assert parts.iteration == whole.iteration
    for name, w in whole.get_dense_weights().items():
        np.testing.assert_array_equal(parts.get_dense_weights()[name], w, err_msg=name)


def test_train_returns_false_when_an_epochs_run_is_out_of_data(settings):
    settings = dict(settings)
    del settings["solver.max_iter"]
    with open(CONFIG) as f:
        config = json.load(f)
    del config["solver"]["max_iter"]
    config["solver"]["num_epochs"] = 1
    s = ember.Session(config, set=settings, quiet=True)
    steps = 0
    while s.train():
        steps += 1
        assert steps <= 16
    assert steps == 8192 // 512
    assert not s.train()
    assert s.iteration == 16


def test_the_gil_is_released_while_training(settings):
    settings = dict(settings, **{"solver.max_iter": 40, "solver.eval_interval": 0})
    s = ember.Session(CONFIG, set=settings, quiet=True)
    done = threading.Event()
    ticks = 0

    def train():
        try:
            s.fit()
        finally:
            done.set()

    t = threading.Thread(target=train)
    t.start()
    while not done.is_set():
        ticks += 1  # Python code runs while the other thread is inside fit()
        time.sleep(0.0005)
    t.join()
    assert s.iteration == 40
    assert ticks > 20


def test_ctrl_c_stops_fit_after_a_step_with_a_snapshot(settings, tmp_path):
    settings = dict(settings, **{"solver.max_iter": 100000, "solver.eval_interval": 0})
    script = textwrap.dedent(f"""
        import ember, sys
        s = ember.Session({CONFIG!r}, set={settings!r}, run_dir={str(tmp_path)!r})
        try:
            s.fit()
        except KeyboardInterrupt as e:
            print("KeyboardInterrupt:", e, "iteration", s.iteration, flush=True)
            sys.exit(3)
    """)
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ, PYTHONUNBUFFERED="1"))
    lines = []
    for line in p.stdout:
        lines.append(line)
        if line.startswith("iter=3 "):
            p.send_signal(signal.SIGINT)
            break
    rest, _ = p.communicate(timeout=120)
    lines += rest.splitlines(keepends=True)
    assert p.returncode == 3, "".join(lines[-5:])
    last = lines[-1].split()
    assert last[0] == "KeyboardInterrupt:" and "training interrupted at iter=" in lines[-1]
    iteration = int(last[-1])
    assert 3 <= iteration < 100000
    assert (tmp_path / f"snapshot_{iteration}" / "meta.json").exists()
    # the session stays usable: it was stopped between steps
    assert any(line.startswith(f"interrupted iter={iteration} ") for line in lines)


def test_threads_sharing_a_session_take_turns(settings):
    shared = ember.Session(CONFIG, set=settings, quiet=True)
    threads = [threading.Thread(target=lambda: [shared.train() for _ in range(5)])
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert shared.iteration == 10
    alone = ember.Session(CONFIG, set=settings, quiet=True)
    for _ in range(10):
        alone.train()
    for name, w in alone.get_dense_weights().items():
        np.testing.assert_array_equal(shared.get_dense_weights()[name], w, err_msg=name)
