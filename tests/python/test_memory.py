"""A thousand Session constructions leave the process's memory where it was (nothing leaks per
session: replicas, threads, pipelines, the Python wrappers)."""

import gc
import os

import ember
from conftest import CONFIG


def rss_mib():
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def test_a_thousand_sessions_keep_rss_bounded(settings):
    settings = dict(settings, **{"solver.batchsize": 64, "solver.batchsize_eval": 64})

    def make(i):
        s = ember.Session(CONFIG, set=settings, quiet=True)
        if i % 10 == 0:
            s.train()  # every tenth with an input pipeline and its batches as well
        return s.iteration

    for i in range(100):  # allocator caches and pools reach their steady size
        make(i)
    gc.collect()
    settled = rss_mib()
    for i in range(900):
        assert make(i) == (1 if i % 10 == 0 else 0)
    gc.collect()
    grown = rss_mib() - settled
    assert grown < 32, f"RSS grew by {grown:.1f} MiB over 900 sessions"
