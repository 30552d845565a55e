"""Aligners on hand-made embeddings with known distances, the lower-bound relations, POT parity of the
exact solver, and batched aligners equal to per-pair ones."""

from __future__ import annotations

import numpy as np
import ot
import pytest
import torch

from nlgbench.foundations.errors import UserError
from nlgbench.metrics.alignment import (
    ALIGNERS,
    align,
    euclidean_cost,
    exact_transport,
    get_aligner,
    pad_pairs,
    parallel,
    rwmd,
    transport_pairs,
    wcd,
    wmd,
)

pytestmark = pytest.mark.component


def test_identical_texts_are_at_distance_zero() -> None:
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=(5, 8)), rng.random(5)
    # the cost |x|^2 + |y|^2 - 2 x.y (float64) can leave round-off (d + 2) u 4 max|x|^2 in a zero distance,
    # and sqrt amplifies it: sqrt(10 * 1.1e-16 * 4 * 10) = 2e-7 here (seen: exactly 0)
    tol = float(np.sqrt((x.shape[1] + 2) * np.finfo(np.float64).eps / 2 * 4 * (x**2).sum(1).max()))
    for name in ALIGNERS:
        assert align(name, x, w, x, w) == pytest.approx(0.0, abs=tol)


def test_known_distances_by_hand() -> None:
    # two points at x=0 and x=2 against one point at x=1: every unit of mass moves 1
    x = np.array([[0.0], [2.0]])
    y = np.array([[1.0]])
    a, b = np.array([1.0, 1.0]), np.array([3.0])
    # float64 on small integers and O(25) squares: a few roundings, <= 1e-14 relative
    assert align("wmd", x, a, y, b) == pytest.approx(1.0, rel=1e-12)
    assert align("rwmd", x, a, y, b) == pytest.approx(1.0, rel=1e-12)
    assert align("wcd", x, a, y, b) == pytest.approx(0.0, abs=1e-12)  # same centroid
    # translation of a whole cloud by t: WMD = WCD = |t|
    rng = np.random.default_rng(1)
    pts, w, t = rng.normal(size=(4, 3)), rng.random(4), np.array([3.0, 4.0, 0.0])
    assert align("wmd", pts, w, pts + t, w) == pytest.approx(5.0, rel=1e-12)
    assert align("wcd", pts, w, pts + t, w) == pytest.approx(5.0, rel=1e-12)


def test_weights_are_normalised_and_zero_weight_points_ignored() -> None:
    x, y = np.array([[0.0], [10.0]]), np.array([[1.0]])
    assert align("wmd", x, np.array([2.0, 0.0]), y, np.array([7.0])) == pytest.approx(1.0, rel=1e-12)
    with pytest.raises(ValueError, match="zero"):
        align("wmd", x, np.zeros(2), y, np.ones(1))


@pytest.mark.parametrize("seed", range(20))
def test_wcd_and_rwmd_are_lower_bounds_of_wmd(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=(rng.integers(2, 12), 16)), rng.normal(size=(rng.integers(2, 12), 16))
    a, b = rng.random(len(x)), rng.random(len(y))
    cost = euclidean_cost(x, y)
    exact = wmd(a, b, cost)
    # float64: costs < 12, sums of <= 22 terms -> round-off <= 22 * 1.1e-16 * 12 = 3e-14
    assert rwmd(a, b, cost) <= exact + 1e-12
    assert wcd(x, a, y, b) <= exact + 1e-12


@pytest.mark.parametrize("name", sorted(ALIGNERS))
def test_permutation_invariance_and_symmetry(name: str) -> None:
    rng = np.random.default_rng(7)
    x, y = rng.normal(size=(6, 4)), rng.normal(size=(9, 4))
    a, b = rng.random(6), rng.random(9)
    base = align(name, x, a, y, b)
    px, py = rng.permutation(6), rng.permutation(9)
    # float64 sums of <= 15 terms in another order (costs within 5x of their mean): <= 15 * 5 u = 1e-14 relative
    assert align(name, x[px], a[px], y[py], b[py]) == pytest.approx(base, rel=1e-12)
    assert align(name, y, b, x, a) == pytest.approx(base, rel=1e-12)


def test_euclidean_cost_matches_direct() -> None:
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(3, 5)), rng.normal(size=(4, 5))
    direct = np.linalg.norm(x[:, None, :] - y[None, :, :], axis=-1)
    # |x|^2 + |y|^2 - 2 x.y loses u (|x|^2 + |y|^2) / d^2 relatively: |x|^2 < 16, |y|^2 < 6, d > 2 -> 6e-16
    assert np.allclose(euclidean_cost(x, y), direct, rtol=1e-13, atol=0)


def test_unknown_aligner_names_closest() -> None:
    with pytest.raises(UserError, match="'rwmd'"):
        get_aligner("rwdm")


def _clouds(rng: np.random.Generator, count: int, dim: int = 16) -> list[tuple[np.ndarray, np.ndarray]]:
    """Random clouds of 1..12 points; about one point in five has no mass (as idf-0 tokens)."""
    out = []
    for _ in range(count):
        n = int(rng.integers(1, 13))
        w = rng.random(n) * (rng.random(n) > 0.2)
        w[rng.integers(n)] += 0.5  # some mass in every cloud
        out.append((rng.normal(size=(n, dim)), w))
    return out


def test_exact_transport_is_pots_emd_and_emd2() -> None:
    rng = np.random.default_rng(11)
    for (x, a), (y, b) in zip(_clouds(rng, 30), _clouds(rng, 30), strict=True):
        a, b = a / a.sum(), b / b.sum()
        cost = euclidean_cost(x, y)
        plan, value = exact_transport(a, b, cost)
        # the same solver on the same prepared inputs: identical to the last bit, zero-mass points included
        np.testing.assert_array_equal(plan, ot.emd(a, b, cost))
        assert value == ot.emd2(a, b, cost)


@pytest.mark.parametrize(
    "device",
    [
        "cpu",
        pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")),
    ],
)
@pytest.mark.parametrize("name", sorted(ALIGNERS))
def test_batched_aligners_equal_per_pair(name: str, device: str) -> None:
    rng = np.random.default_rng(5)
    refs, hyps = _clouds(rng, 40), _clouds(rng, 40)
    per_pair = np.array([align(name, x, a, y, b) for (x, a), (y, b) in zip(refs, hyps, strict=True)])
    aligner = get_aligner(name)
    for threads, batch_pairs in ((1, 64), (3, 7)):  # one padded batch; 6 batches sorted by size, 3 threads
        batches = pad_pairs(
            aligner,
            [torch.from_numpy(x).to(device) for x, _ in refs],
            [torch.from_numpy(a) for _, a in refs],
            [torch.from_numpy(y).to(device) for y, _ in hyps],
            [torch.from_numpy(b) for _, b in hyps],
            threads,
            batch_pairs,
        )
        batched = transport_pairs(aligner, batches, threads)
        assert batched.device.type == "cpu" and batched.dtype == torch.float64 and batched.shape == (40,)
        # costs from torch's batched product instead of NumPy's: |x|^2, |y|^2 < 60 (d = 16), distances > 1,
        # so each cost moves by <= (d + 2) u 4 * 60 / (2 * 1) = 2.4e-13 and each distance (a mean of costs,
        # or a centroid distance) by as much; padding (no mass, masked) changes nothing
        assert np.allclose(batched.numpy(), per_pair, rtol=0, atol=1e-12)


def test_batched_rwmd_takes_points_without_mass_as_neighbours_as_rwmd() -> None:
    # x's point (10, 0) is nearest to y's massless (10, 0.5): 0.75 * 0.5 from x's side, 0.5 * 1 from y's side
    x, a = torch.tensor([[0.0, 0.0], [10.0, 0.0]]), torch.tensor([1.0, 3.0])
    y, b = torch.tensor([[0.0, 0.0], [10.0, 0.5], [10.0, 1.0]]), torch.tensor([1.0, 0.0, 1.0])
    short = [torch.tensor([[1.0, 0.0]]), torch.tensor([1.0])]  # a second pair, so that the first is padded
    aligner = get_aligner("rwmd")
    got = transport_pairs(aligner, pad_pairs(aligner, [x, short[0]], [a, short[1]], [y, short[0]], [b, short[1]]))
    # float64 on small numbers: a few roundings
    assert got[0].item() == pytest.approx(rwmd(a.numpy(), b.numpy(), euclidean_cost(x.numpy(), y.numpy())), rel=1e-12)
    assert got[0].item() == pytest.approx(0.5, rel=1e-12) and got[1].item() == 0.0


def test_parallel_runs_every_job_once_restores_torch_threads_and_raises() -> None:
    before = torch.get_num_threads()
    for threads in (1, 2, 5):
        seen: list[int] = []
        inside: list[int] = []
        with parallel(threads) as run:
            run(lambda i, seen=seen, inside=inside: (seen.append(i), inside.append(torch.get_num_threads())), 7)
        assert sorted(seen) == list(range(7))
        assert set(inside) == ({before} if threads == 1 else {1})  # one torch thread per job when parallel
        assert torch.get_num_threads() == before

        def fail(i: int) -> None:
            if i == 3:
                raise RuntimeError("job 3")

        with pytest.raises(RuntimeError, match="job 3"), parallel(threads) as run:
            run(fail, 7)
        assert torch.get_num_threads() == before
