"""Alignment of two weighted point clouds (token embeddings with idf weights): WMD and its cheap bounds.

Pure functions over NumPy arrays. `a` and `b` are non-negative weights (normalised here to
sum 1); `cost` is the matrix of Euclidean distances between the points. Kusner et al. (2015),
"From Word Embeddings To Document Distances": WCD <= WMD and RWMD <= WMD (Eqs. in Sec. 4).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import ot

from nlgbench.registry import Registry


def _normalise(w: np.ndarray) -> np.ndarray:
    total = float(w.sum())
    if total <= 0:
        raise ValueError("all transport weights are zero (nothing left to align)")
    return np.asarray(w, dtype=np.float64) / total


def euclidean_cost(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pairwise Euclidean distances between the rows of x [n, d] and y [m, d]."""
    return np.sqrt(np.maximum(ot.dist(np.asarray(x, np.float64), np.asarray(y, np.float64), metric="sqeuclidean"), 0.0))


def wmd(a: np.ndarray, b: np.ndarray, cost: np.ndarray) -> float:
    """Word Mover's Distance: the exact optimal-transport cost (POT's network simplex)."""
    return float(ot.emd2(_normalise(a), _normalise(b), np.ascontiguousarray(cost, dtype=np.float64)))


def rwmd(a: np.ndarray, b: np.ndarray, cost: np.ndarray) -> float:
    """Relaxed WMD: each side sends all its mass to its nearest point; the larger of the two relaxations."""
    a, b = _normalise(a), _normalise(b)
    return float(max(a @ cost.min(axis=1), b @ cost.min(axis=0)))


def wcd(x: np.ndarray, a: np.ndarray, y: np.ndarray, b: np.ndarray) -> float:
    """Word Centroid Distance: distance of the weighted centroids (no cost matrix needed)."""
    return float(np.linalg.norm(_normalise(a) @ np.asarray(x, np.float64) - _normalise(b) @ np.asarray(y, np.float64)))


@dataclass(frozen=True)
class AlignerInfo:
    name: str
    description: str
    needs_cost: bool  # True: called as fn(a, b, cost); False: fn(x, a, y, b)
    fn: Callable[..., float]


ALIGNERS: Registry[AlignerInfo] = Registry("aligner", AlignerInfo)
ALIGNERS.register("wmd", AlignerInfo("wmd", "exact Word Mover's Distance (optimal transport, POT emd)", True, wmd))
ALIGNERS.register("rwmd", AlignerInfo("rwmd", "relaxed WMD: max of the two nearest-neighbour relaxations (lower bound of WMD)", True, rwmd))
ALIGNERS.register("wcd", AlignerInfo("wcd", "word centroid distance: distance of weighted mean embeddings (lower bound of WMD)", False, wcd))


def get_aligner(name: str) -> AlignerInfo:
    """The named aligner; UserError with the closest names otherwise."""
    return ALIGNERS.get(name)


def cost_matrix(aligner: AlignerInfo, x: np.ndarray, y: np.ndarray) -> np.ndarray | None:
    """The cost matrix `aligner` needs between the points x and y (None for one that needs none, as WCD)."""
    return euclidean_cost(x, y) if aligner.needs_cost else None


def transport(aligner: AlignerInfo, x: np.ndarray, a: np.ndarray, y: np.ndarray, b: np.ndarray,
              cost: np.ndarray | None) -> float:
    """The aligner's distance between (x, a) and (y, b); `cost` is `cost_matrix(aligner, x, y)`."""
    return aligner.fn(a, b, cost) if aligner.needs_cost else aligner.fn(x, a, y, b)


def align(name: str, x: np.ndarray, a: np.ndarray, y: np.ndarray, b: np.ndarray) -> float:
    """Distance between (x, a) and (y, b) with the named aligner."""
    info = get_aligner(name)
    return transport(info, x, a, y, b, cost_matrix(info, x, y))
