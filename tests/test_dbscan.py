"""tmem.pipeline.dbscan: exact 1-D DBSCAN in sorted numpy must label exactly as scikit-learn's DBSCAN does.

scikit-learn (a dev dependency now) is the reference. Its KD-tree path compares exact squared distances; its
default `algorithm="auto"` switches to brute force below 12 points, whose float64 "x^2 - 2xy + y^2" distances
are off by up to a second for epoch-second values, so a pair exactly eps apart may or may not be neighbours there.
Hence: against `algorithm="kd_tree"` on every input (ties, duplicates, exact-eps gaps, epoch seconds), and against
the default on inputs where its arithmetic is exact (small integers, or 12 points and more), which is how the
pipeline called it before.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from tmem.pipeline.dbscan import NOISE, dbscan_1d


@functools.cache
def _sklearn_cluster():
    """Imported at the first reference call, not at collection: every xdist worker collects this file, and
    `import sklearn.cluster` costs 1.5 s of CPU (a worker that runs no test here never pays it)."""
    return pytest.importorskip("sklearn.cluster", reason="scikit-learn is the reference (requirements-dev)")


@pytest.fixture(scope="module", autouse=True)
def _one_thread_for_the_reference():
    """scikit-learn's neighbour search starts OpenMP (and BLAS) threads for each of the ~5,000 tiny reference calls,
    and on a busy machine their spin-waits cost far more than the call: measured on the loaded 2-core machine, 300
    calls took 2.4 s CPU (10.5 s wall) with the default 2 threads and 0.19 s (0.6 s) with one, same labels. The
    limit applies to the libraries loaded when it is set, so scikit-learn is imported here, when this file's first
    test runs (never at collection), and the limit is lifted when the file is done."""
    try:
        import sklearn.cluster  # noqa: F401 - loads the OpenMP and BLAS libraries the limit is set on
        from threadpoolctl import threadpool_limits
    except ImportError:  # the reference calls skip, each saying why (_sklearn_cluster)
        yield
        return
    with threadpool_limits(1):
        yield


def reference(values, eps, min_samples, algorithm="kd_tree"):
    cluster = _sklearn_cluster()  # skips the test when scikit-learn is absent
    import sklearn

    x = np.asarray(values, dtype=np.float64).reshape(-1, 1)
    # the arguments are valid and the values finite by construction: skipping scikit-learn's checks halves each of
    # the ~5,000 reference calls (1.7 -> 0.8 ms, measured) and leaves the clustering itself as it is
    with sklearn.config_context(skip_parameter_validation=True, assume_finite=True):
        return cluster.DBSCAN(eps=eps, min_samples=min_samples, algorithm=algorithm).fit(x).labels_


def _inputs(rng: np.random.Generator, n: int) -> tuple[np.ndarray, float]:
    """One random input of a kind chosen to hit the edge cases: ties, duplicates, gaps of exactly eps."""
    kind = rng.integers(6)
    if kind == 0:  # small integers: many ties and exact-eps gaps
        return rng.integers(0, 25, n).astype(float), float(rng.choice([1.0, 2.0, 3.0]))
    if kind == 1:  # epoch seconds on an hour grid, eps = 12 h: gaps of exactly eps
        return 1.7e9 + rng.integers(0, 60, n) * 3600.0, 43_200.0
    if kind == 2:  # epoch seconds, uniform over a week
        return 1.7e9 + rng.uniform(0, 7 * 86_400, n), 43_200.0
    if kind == 3:  # a few values repeated (duplicates only)
        return rng.choice(rng.uniform(0, 10, 4), n), 0.5
    if kind == 4:  # gaps a hair either side of eps
        steps = rng.choice([0.0, 43_200.0, 43_199.999, 43_200.001, 10.0], n)
        return rng.permutation(1.6e9 + np.cumsum(steps)), 43_200.0
    return rng.normal(0, 5, n), float(rng.uniform(0.1, 3))  # negative values too


def test_identical_labels_on_thousands_of_random_inputs():
    rng = np.random.default_rng(20240611)
    for _ in range(3000):
        values, eps = _inputs(rng, int(rng.integers(1, 80)))
        min_samples = int(rng.integers(1, 6))
        np.testing.assert_array_equal(dbscan_1d(values, eps, min_samples), reference(values, eps, min_samples),
                                      err_msg=f"eps={eps} min_samples={min_samples} values={values.tolist()}")


def test_identical_to_the_default_algorithm_where_its_arithmetic_is_exact():
    """What the pipeline ran before: sklearn's default `auto` (brute force below 12 points)."""
    rng = np.random.default_rng(7)
    for _ in range(1500):
        n = int(rng.integers(1, 40))
        values = rng.integers(0, 40, n).astype(float)  # squares stay exact in float64
        eps, min_samples = float(rng.integers(1, 5)), int(rng.integers(1, 5))
        np.testing.assert_array_equal(dbscan_1d(values, eps, min_samples),
                                      reference(values, eps, min_samples, algorithm="auto"))


@settings(max_examples=400, deadline=None)
@given(values=hs.lists(hs.integers(0, 30), min_size=1, max_size=50).map(lambda v: [float(x) for x in v]),
       eps=hs.sampled_from([0.5, 1.0, 2.0, 3.0]), min_samples=hs.integers(1, 6))
def test_identical_labels_hypothesis(values, eps, min_samples):
    np.testing.assert_array_equal(dbscan_1d(values, eps, min_samples), reference(values, eps, min_samples))


def test_border_point_joins_the_first_numbered_cluster_and_labels_follow_input_order():
    # clusters {0, 0, 0, 1} and {7, 8, 8, 8} (eps 3, MinPts 4); 4 reaches one core point of each (1 and 7) and is
    # not core itself. The cluster of the first input (8) is numbered 0, and it takes the border point.
    values = [8, 7, 4, 0, 8, 1, 0, 8, 0]
    labels = dbscan_1d(values, eps=3.0, min_samples=4)
    assert labels.tolist() == [0, 0, 0, 1, 0, 1, 1, 0, 1]
    assert labels.tolist() == reference(values, 3.0, 4).tolist()
    flipped = dbscan_1d([0, *values], eps=3.0, min_samples=4)  # now the other cluster comes first, and takes it
    assert flipped.tolist() == [0, 1, 1, 0, 0, 1, 0, 0, 1, 0] == reference([0, *values], 3.0, 4).tolist()


def test_a_gap_of_exactly_eps_links_and_noise_stays_noise():
    hour = 3600.0
    labels = dbscan_1d([0, 12 * hour, 30 * hour], eps=12 * hour, min_samples=2)
    assert labels.tolist() == [0, 0, NOISE]
    assert dbscan_1d([], 1.0, 2).tolist() == []
    assert dbscan_1d([5.0], 1.0, 1).tolist() == [0]  # min_samples 1: every point is core


@pytest.mark.parametrize("eps,min_samples", [(0.0, 2), (-1.0, 2), (1.0, 0)])
def test_bad_parameters_are_refused(eps, min_samples):
    with pytest.raises(ValueError, match="eps > 0"):
        dbscan_1d([1.0, 2.0], eps, min_samples)


@pytest.mark.integration
def test_the_runtime_never_imports_scikit_learn():
    """The point of tmem.pipeline.dbscan: the pipeline and the explorer's pages load without scikit-learn (~1 s)."""
    import subprocess
    import sys

    code = "import sys, pages, tmem.pipeline.run, tmem.cli; print('sklearn' in sys.modules, 'openai' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=__import__("pathlib").Path(__file__).resolve().parent.parent)
    assert out.stdout.split()[-2:] == ["False", "False"], out.stdout + out.stderr
