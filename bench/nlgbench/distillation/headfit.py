"""Fitting a feature head (`nlgbench.metrics.featurehead`) on human scores.

The features are those of one layer set: the encoder's last layer, or its middle and last layers
(`layer_sets`; the pass computes both). Each projected feature family is centred and projected on
its first k principal axes (an SVD of the training pairs), the design matrix standardised, and a
ridge regression fitted in closed form. The ridge strength alpha, the projection size k and the
layer set are chosen by leave-one-group-out cross-validation on the training data only, a group
being one language pair of one dataset: the score a student must get right is the ranking of
translations within a language pair it never saw (WMT16 adds ro-en and tr-en to WMT15's four pairs;
WMT21 is zh-en), so a fold that holds out a whole pair asks exactly that, while random folds would
let the head learn each pair's own offsets and choose too weak a ridge. The criterion is the mean
over folds of the held-out pair's Pearson r. Deterministic: no random step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nlgbench.foundations.errors import UserError
from nlgbench.metrics.featurehead import FeatureHead, PairFeatures

ALPHAS: tuple[float, ...] = tuple(float(10.0 ** (e / 2)) for e in range(-4, 11))  # 1e-2 ... 1e5, half decades
COMPONENTS: tuple[int, ...] = (4, 8, 16)  # principal axes kept per projected family


@dataclass
class HeadFit:
    """The head fitted on all training pairs with the chosen (layers, k, alpha), and the cross-validation's record."""

    head: FeatureHead
    record: dict[str, Any]


def layer_sets(last: int) -> list[tuple[int, ...]]:
    """The layer sets a head may read from an encoder run to layer `last`: the last, and (from 2 layers
    on) the middle one (rounded up) with the last."""
    middle = (last + 1) // 2
    return [(last,)] if middle == last else [(last,), (middle, last)]


def fit_head(
    features: PairFeatures,
    targets: np.ndarray,
    groups: Sequence[str],
    alphas: Sequence[float] = ALPHAS,
    components: Sequence[int] = COMPONENTS,
) -> HeadFit:
    """Choose (layer set, k, alpha) by leave-one-group-out cross-validation (`cross_validate`) among
    the `layer_sets` of the features' deepest layer, then fit on every pair."""
    targets = np.asarray(targets, dtype=np.float64)
    names = sorted(set(groups))
    if len(names) < 2:
        raise UserError(
            f"the head's cross-validation leaves one language pair out at a time: the training data has "
            f"{len(names)} ({', '.join(names) or 'none'}); give data with at least two language pairs"
        )
    width = next(iter(features.families.values())).shape[1]
    components = sorted({min(k, width, len(targets) - 1) for k in components if k >= 1})
    candidates = [
        (layers, k, i) for layers in layer_sets(max(features.layers)) for k in components for i in range(len(alphas))
    ]
    curves = {
        layers: cross_validate(features.select(layers), targets, np.asarray(groups), alphas, components)
        for layers in layer_sets(max(features.layers))
    }
    layers, k, i = max(
        candidates,
        # ties: the stronger ridge, then the fewer axes, then the fewer layers
        key=lambda c: (_finite(curves[c[0]][c[1]][c[2]]), alphas[c[2]], -c[1], -len(c[0])),
    )
    chosen = features.select(layers)
    head = _fit(chosen, targets, k, alphas[i])
    record = {
        "model": "ridge over standardised features",
        "selection": "leave one language pair out (a group: dataset and language pair), "
        "mean Pearson of the held-out pair",
        "groups": {name: int(sum(1 for g in groups if g == name)) for name in names},
        "layer_sets": [list(c) for c in curves],
        "alphas": list(alphas),
        "components": components,
        "cv_curve": {
            ",".join(map(str, c)): {
                str(kk): [None if math.isnan(v) else round(v, 6) for v in curve[kk]] for kk in components
            }
            for c, curve in curves.items()
        },
        "chosen": {
            "layers": list(layers),
            "components": k,
            "alpha": alphas[i],
            "cv_pearson": round(curves[layers][k][i], 6),
        },
        "train_pearson": round(_pearson(head.predict(chosen), targets), 6),
        "features": head.feature_names,
        "coef": dict(zip(head.feature_names, head.coef, strict=True)),
    }
    return HeadFit(head, record)


def _finite(value: float) -> float:
    return value if math.isfinite(value) else -math.inf


def cross_validate(
    features: PairFeatures, targets: np.ndarray, groups: np.ndarray, alphas: Sequence[float], components: Sequence[int]
) -> dict[int, list[float]]:
    """Mean held-out Pearson r per k and alpha over the folds where it is defined (a fold of one item,
    or a constant prediction or target, has none; NaN where no fold has one), each group held out in
    turn; the projection, standardisation and ridge are fitted on the other groups only."""
    sums = {k: np.zeros(len(alphas)) for k in components}
    counts = {k: np.zeros(len(alphas)) for k in components}
    folds = sorted(set(groups.tolist()))
    for name in folds:
        held = groups == name
        train, test = features.take(np.flatnonzero(~held)), features.take(np.flatnonzero(held))
        axes = {key: _principal_axes(values) for key, values in train.families.items()}
        for k in components:
            design_train, design_test = (_design(part, axes, k) for part in (train, test))
            mean, scale = _standardisation(design_train)
            z_train, z_test = (design_train - mean) / scale, (design_test - mean) / scale
            y = targets[~held]
            for i, alpha in enumerate(alphas):
                coef = _ridge(z_train, y - y.mean(), alpha)
                r = _pearson(z_test @ coef, targets[held])
                if math.isfinite(r):
                    sums[k][i] += r
                    counts[k][i] += 1
    return {k: np.where(counts[k] > 0, sums[k] / np.maximum(counts[k], 1), np.nan).tolist() for k in components}


def _principal_axes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The centre [D] and the principal axes [min(n, D), D] of rows `values`, largest variance first,
    each axis's sign fixed (its largest coordinate positive) so that the fit is deterministic."""
    centre = values.mean(axis=0)
    _, _, vt = np.linalg.svd(values - centre, full_matrices=False)
    signs = np.sign(vt[np.arange(len(vt)), np.abs(vt).argmax(axis=1)])
    return centre, vt * np.where(signs == 0, 1.0, signs)[:, None]


def _design(part: PairFeatures, axes: dict[str, tuple[np.ndarray, np.ndarray]], k: int) -> np.ndarray:
    columns = [part.base]
    for key, (centre, vt) in axes.items():
        columns.append((part.families[key] - centre) @ vt[:k].T)
    return np.hstack(columns)


def _standardisation(design: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Column means and standard deviations; 1 for a column constant up to float32 noise (a spread below
    1e-5 of its size), which would otherwise blow up any new value of it."""
    mean, scale = design.mean(axis=0), design.std(axis=0)
    return mean, np.where(scale > 1e-5 * np.maximum(1.0, np.abs(mean)), scale, 1.0)


def _ridge(z: np.ndarray, y: np.ndarray, alpha: float) -> np.ndarray:
    """argmin |y - z w|^2 + alpha |w|^2 for centred y and standardised z (no intercept term)."""
    return np.linalg.solve(z.T @ z + alpha * np.eye(z.shape[1]), z.T @ y)


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    x, y = x - x.mean(), y - y.mean()
    denominator = math.sqrt(float(x @ x) * float(y @ y))
    return float(x @ y) / denominator if denominator > 0 else math.nan


def _fit(features: PairFeatures, targets: np.ndarray, k: int, alpha: float) -> FeatureHead:
    """The head on every training pair: projection, standardisation, ridge, intercept the targets' mean."""
    axes = {key: _principal_axes(values) for key, values in features.families.items()}
    design = _design(features, axes, k)
    mean, scale = _standardisation(design)
    coef = _ridge((design - mean) / scale, targets - targets.mean(), alpha)
    return FeatureHead(
        layers=list(features.layers),
        centres={key: centre.tolist() for key, (centre, _) in axes.items()},
        axes={key: vt[:k].tolist() for key, (_, vt) in axes.items()},
        mean=mean.tolist(),
        scale=scale.tolist(),
        coef=coef.tolist(),
        intercept=float(targets.mean()),
    )
