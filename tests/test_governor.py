"""The thread cap of compiled loops on a busy machine (astjax/kernels/governor.py).

The governor's decisions are checked on a simulated clock: a loop whose steps cost
what a quiet or a busy machine makes them cost at each thread count.  Then a real
compiled scan and a compiled gradient sweep, their caps forced down mid-loop, give the
same bits as without.
"""
from __future__ import annotations

import numpy as np
import pytest

import astjax
from astjax import lax
from astjax.kernels import governor as gov
from astjax.kernels import compile as cc, loops, runtime

import test_loops_sweeps as _sweep_corpus      # (its programs: every one is swept)


class Machine:
    """A clock, and a loop body whose steps cost ``cost(cap, step)`` seconds."""

    def __init__(self, cost):
        self.now = 0.0
        self.cost = cost
        self.calls = []          # (first step, last step + 1, thread counts)
        self.nthreads = None

    def perf_counter(self):
        return self.now

    def func(self, i, j, loop):
        counts = tuple(int(t) for t in self.nthreads)
        self.calls.append((i, j, counts))
        self.now += sum(self.cost(max(counts), s) for s in range(i, j))
        return 0

    def run(self, g, start, stop, threads=(2, 2), key="k"):
        self.nthreads = np.array(threads, dtype=np.int32)
        got = g.run(self.func, start, stop, None, self.nthreads, key)
        assert list(self.nthreads) == list(threads), "the kernels' counts came back"
        return got

    def covered(self, start, stop):
        """Every step ran once, in order."""
        at = start
        for i, j, _ in self.calls:
            assert i == at and j > i
            at = j
        assert at == stop

    def caps(self):
        return [max(t) for _, _, t in self.calls]

    def steps_at(self, cap):
        return sum(j - i for i, j, t in self.calls if max(t) == cap)


@pytest.fixture
def clock(monkeypatch):
    def make(cost):
        m = Machine(cost)
        monkeypatch.setattr(gov.time, "perf_counter", m.perf_counter)
        return m
    return make


def quiet(cap, step):
    return 100e-6 / cap                   # threads help: 2 threads twice as fast


def busy(cap, step):
    return 100e-6 if cap == 1 else 250e-6  # a barrier waits on the shared core


def test_quiet_machine_keeps_every_thread(clock):
    m = clock(quiet)
    g = gov.Governor()
    assert m.run(g, 0, 1000) == 0
    m.covered(0, 1000)
    assert m.steps_at(1) < 100, "one probe of half the threads, then the full team"
    assert m.caps()[-1] == 2
    first = len(m.calls)
    m.calls.clear()
    m.run(g, 0, 1000)                     # what it learned holds: no probe again
    assert m.caps() == [2] * len(m.calls) and len(m.calls) <= first


def test_busy_machine_drops_to_the_faster_cap(clock):
    m = clock(busy)
    g = gov.Governor()
    m.run(g, 5, 2005)
    m.covered(5, 2005)
    assert m.steps_at(1) > 0.8 * 2000
    ups = sum(1 for a, b in zip(m.caps(), m.caps()[1:]) if b > a)
    assert 1 <= ups <= 5, "probes up now and then, less often after each that lost"


def test_a_machine_that_gets_busy_then_quiet(clock):
    m = clock(lambda cap, s: busy(cap, s) if 1000 <= s < 3000 else quiet(cap, s))
    g = gov.Governor()
    m.run(g, 0, 6000)
    m.covered(0, 6000)
    caps = {}
    for (i, j, t), cap in zip(m.calls, m.caps()):
        caps.setdefault("busy" if 1000 <= i < 3000 else ("after" if i >= 3000 else "before"),
                        []).append((j - i, cap))
    share = {k: sum(n for n, c in v if c == 1) / sum(n for n, c in v) for k, v in caps.items()}
    assert share["busy"] > 0.7
    assert share["before"] < 0.2
    assert caps["after"][-1][1] == 2, "back to the full team once the machine is quiet"


def test_caps_only_lower_and_single_thread_loops_run_in_one_call(clock):
    m = clock(busy)
    m.run(gov.Governor(), 0, 500, threads=(1, 2, 1))
    assert {t for _, _, t in m.calls} <= {(1, 2, 1), (1, 1, 1)}
    assert (1, 1, 1) in {t for _, _, t in m.calls}
    for threads, steps in (((1, 1), 500), ((2, 2), gov.MIN_STEPS - 1)):
        m = clock(busy)
        m.run(gov.Governor(), 0, steps, threads=threads)
        assert m.calls == [(0, steps, threads)]


def test_a_failing_step_stops_the_loop(clock):
    m = clock(quiet)

    def func(i, j, loop):
        m.func(i, j, loop)
        return 1 if j > 300 else 0
    nthreads = np.array([2], dtype=np.int32)
    m.nthreads = nthreads
    assert gov.Governor().run(func, 0, 1000, None, nthreads, "k") == 1
    assert m.calls[-1][1] > 300 and list(nthreads) == [2]


def test_shapes_learn_apart(clock):
    m = clock(busy)
    g = gov.Governor()
    m.run(g, 0, 1000, key="small")
    assert g.learned["small"].cap == 1
    m.calls.clear()
    m.now = 0.0
    m.cost = quiet
    m.run(g, 0, 1000, key="large")
    assert g.learned["large"].cap == 2 and g.learned["small"].cap == 1


# ----------------------------------------------------------------- real compiled loops


def _simulate(u, xs):
    def step(carry, a):
        past, present = carry
        d = np.pad(present[1:, :] - present[:-1, :], ((0, 1), (0, 0))) / 3.0
        future = 0.5 * present + 0.2 * past + 0.3 * d * present + a * u
        return (present, future), future[1]
    (_, last), ys = lax.scan(step, (np.zeros_like(u), np.zeros_like(u)), xs)
    return last, ys


def _simulate_reversed(u, xs):
    def step(carry, a):
        d = np.pad(carry[1:, :] - carry[:-1, :], ((0, 1), (0, 0))) / 3.0
        new = 0.6 * carry + 0.3 * d * carry + a * u
        return new, new[2]
    return lax.scan(step, u * 0.5, xs, reverse=True)


def _loss(u, xs):
    last, ys = _simulate(u, xs)
    return 0.5 * np.sum(ys ** 2) + np.sum(last * last)


@pytest.mark.parametrize("what", ["scan", "reverse", "grad"])
def test_compiled_loops_give_the_same_bits_at_every_cap(what, monkeypatch, tmp_path):
    """A busy machine on the simulated clock forces the caps down mid-loop: the
    results are those of the quiet run, bit for bit."""
    if not cc.available()[0]:   # (CI has one: tests/test_ci_compiler.py)
        pytest.skip(f"no C compiler: {cc.available()[1]}")
    monkeypatch.setenv("ASTJAX_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(runtime, "MIN_PARALLEL_WORK", 1)     # every kernel threaded
    monkeypatch.setenv("ASTJAX_NUM_THREADS", "2")
    monkeypatch.setattr(gov, "MIN_STEPS", 8)
    monkeypatch.setattr(gov, "FIRST_CHUNK", 2)
    rng = np.random.default_rng(0)
    u, xs = rng.standard_normal((40, 33)) * 0.1, rng.standard_normal((300,)) * 0.01
    fn = {"scan": _simulate, "reverse": _simulate_reversed, "grad": astjax.grad(_loss)}[what]
    quiet_run = astjax.jit(fn, backend="c")(u, xs)
    seen = []
    real_run = gov.Governor.run

    def slow_full_team(self, func, start, stop, loop, nthreads, key):
        ticks = [0.0]

        def clocked(i, j, lp):
            seen.append(int(nthreads.max()))
            ticks[0] += (j - i) * (250e-6 if nthreads.max() > 1 else 100e-6)
            return func(i, j, lp)
        monkeypatch.setattr(gov.time, "perf_counter", lambda: ticks[0])
        return real_run(self, clocked, start, stop, loop, nthreads, key)
    monkeypatch.setattr(gov.Governor, "run", slow_full_team)
    counter = "back_steps" if what == "grad" else "steps"
    before = loops.STATS[counter]
    # new code, so new governors: the quiet run's, timed by the real clock, learned
    # cap 1 when another process kept the second core busy, and kept it
    astjax.clear_cache()
    busy_run = astjax.jit(fn, backend="c")(u, xs)
    assert 1 in seen and 2 in seen, "the loop ran at both caps"
    assert loops.STATS[counter] > before, "the steps ran in a compiled loop"
    pairs = [(quiet_run, busy_run)] if what == "grad" else zip(quiet_run, busy_run)
    for a, b in pairs:
        assert np.all(np.isfinite(a)) and np.max(np.abs(a)) > 1e-3
        np.testing.assert_array_equal(a, b)
    if what == "grad":     # (and the sweeps' tape rows are the steps' own)
        np.testing.assert_allclose(busy_run, astjax.grad(_loss)(u, xs), rtol=1e-10,
                                   atol=1e-12)
    else:
        for a, b in zip(busy_run, fn(u, xs)):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


# -------------------------------------------- every compiled loop of the sweep corpus


@pytest.mark.parametrize("how", ["forward", "value_and_grad", "vjp"])
@pytest.mark.parametrize("name", sorted(_sweep_corpus.CASES))
def test_every_compiled_loop_gives_the_same_bits_in_one_step_calls(name, how,
                                                                   monkeypatch):
    """The class of the tape-row bug (rows counted from each C call's first step):
    every loop of tests/test_loops_sweeps.py's corpus -- forward loops, forward and
    backward sweeps -- run in calls of one step each, against one call."""
    if not cc.available()[0]:   # (CI has one: tests/test_ci_compiler.py)
        pytest.skip(f"no C compiler: {cc.available()[1]}")
    import test_loops_sweeps as corpus
    from test_passes import identical
    monkeypatch.setattr(runtime, "MIN_PARALLEL_WORK", 1)   # threaded: governed
    monkeypatch.setenv("ASTJAX_NUM_THREADS", "2")
    f = corpus.CASES[name][0]
    t = {"forward": f, "value_and_grad": astjax.value_and_grad(f),
         "vjp": corpus.VJPS[name]}[how]
    args = corpus._args(np.float64)
    with monkeypatch.context() as m:
        m.setattr(gov, "MIN_STEPS", 1 << 60)
        want = astjax.jit(t, backend="c")(*args)
    calls = []
    real_run = gov.Governor.run

    def counted(self, func, start, stop, loop, nthreads, key):
        def one(i, j, lp):
            calls.append(j - i)
            return func(i, j, lp)
        return real_run(self, one, start, stop, loop, nthreads, key)
    monkeypatch.setattr(gov.Governor, "run", counted)
    monkeypatch.setattr(gov, "MIN_STEPS", 1)
    monkeypatch.setattr(gov, "FIRST_CHUNK", 1)
    monkeypatch.setattr(gov, "CHUNK_SECONDS", 0.0)        # every chunk: one step
    got = astjax.jit(t, backend="c")(*args)
    assert identical(got, want), (got, want)
    if how != "forward" and (corpus.CASES[name][1] or name in corpus.BACKWARD):
        assert len(calls) > 3 and set(calls) == {1}, "the sweeps ran in one-step calls"
    assert set(calls) <= {1}
