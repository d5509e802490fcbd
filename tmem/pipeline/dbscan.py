"""DBSCAN over one dimension (anchor timestamps, paper Sec. 4.2), exact and in sorted numpy.

The labels are scikit-learn's `DBSCAN(eps, min_samples).fit(values[:, None]).labels_` with exact distances (its
KD-tree path), without importing scikit-learn: that import alone cost about a second of the explorer's first
screen, for at most a few dozen points per question (tests/test_dbscan.py compares the two on thousands of random
inputs).

scikit-learn's semantics, reproduced here:
- i and j are neighbours when (x_i - x_j)^2 <= eps^2, computed in float64 (its KD tree compares squared
  distances); a point is its own neighbour. A point is *core* when it has at least `min_samples` neighbours.
- A cluster is a connected set of core points (core points that are neighbours are connected), plus every
  non-core neighbour of its core points (*border* points); all other points are noise (-1).
- Clusters are numbered 0, 1, ... in the order of their lowest-index core point (scikit-learn visits points in
  input order and expands each unlabelled core point's cluster at once). A border point within reach of two
  clusters joins the one numbered first.
In one dimension, sorted, every point's neighbours are a contiguous run and two clusters' core points are always
separated by a gap wider than eps between consecutive core points, which is what makes this a few array passes.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

NOISE = -1


def _neighbour_runs(xs: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """[lo_i, hi_i): the run of sorted positions that are neighbours of sorted position i."""
    # the float64 predicate (a - b)^2 <= eps^2 is monotone along the sorted array, so a search on xs -/+ eps
    # lands at most a step or two from the true edge; the steps below settle it with the predicate itself
    limit = np.float64(eps) * np.float64(eps)
    lo = np.searchsorted(xs, xs - eps, side="left")
    hi = np.searchsorted(xs, xs + eps, side="right")
    near = lambda i, j: (xs[i] - xs[j]) * (xs[i] - xs[j]) <= limit  # noqa: E731
    n = len(xs)
    for i in range(n):
        while lo[i] > 0 and near(i, lo[i] - 1):
            lo[i] -= 1
        while lo[i] < i and not near(i, lo[i]):
            lo[i] += 1
        while hi[i] < n and near(i, hi[i]):
            hi[i] += 1
        while hi[i] > i + 1 and not near(i, hi[i] - 1):
            hi[i] -= 1
    return lo, hi


def dbscan_1d(values: Sequence[float] | np.ndarray, eps: float, min_samples: int) -> np.ndarray:
    """Cluster labels (int array in input order, -1 = noise) of DBSCAN over 1-D `values`."""
    if not eps > 0 or min_samples < 1:
        raise ValueError(f"DBSCAN needs eps > 0 and min_samples >= 1 (got eps={eps}, min_samples={min_samples})")
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    labels = np.full(len(x), NOISE, dtype=np.int64)
    if not len(x):
        return labels
    order = np.argsort(x, kind="stable")  # sorted position -> input index
    xs = x[order]
    lo, hi = _neighbour_runs(xs, eps)
    core = (hi - lo) >= min_samples
    # components: runs of consecutive core points (sorted) whose neighbours reach each other
    component = np.full(len(xs), -1, dtype=np.int64)
    previous, count = -1, 0
    for i in np.flatnonzero(core):
        if previous < 0 or i >= hi[previous]:  # the previous core point does not reach this one: a new cluster
            count += 1
        component[i] = count - 1
        previous = i
    # number the clusters by their lowest input index among core points (scikit-learn's visiting order)
    first = np.full(count, len(x), dtype=np.int64)
    np.minimum.at(first, component[core], order[core])
    number = np.empty(count, dtype=np.int64)
    number[np.argsort(first, kind="stable")] = np.arange(count)
    for i in range(len(xs)):
        if core[i]:
            labels[order[i]] = number[component[i]]
            continue
        reached = component[lo[i]:hi[i]][core[lo[i]:hi[i]]]  # border point: the first-numbered cluster in reach
        if len(reached):
            labels[order[i]] = number[reached].min()
    return labels
