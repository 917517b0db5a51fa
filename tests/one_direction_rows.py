"""Per-example losses of one direction for the extension's one-dimensional solves
(:mod:`dpcvx.certification.ball`, :mod:`dpcvx.certification.box`)."""

import numpy as np


def one_direction_rows(seed, k=24, d=4):
    """Unit directions and pieces: hinges steeper than C, absolute values, and
    epsilon-insensitive (three pieces) rows."""
    rng = np.random.default_rng(seed)
    u = rng.normal(size=(k, d))
    u /= np.linalg.norm(u, axis=1)[:, None]
    sigma = np.zeros((k, 3))
    beta = np.zeros((k, 3))
    for i in range(k):
        a = rng.uniform(0.3, 4.0)
        b = rng.normal()
        if i % 3 == 0:  # hinge: max(0, a (b - t)), the constant piece repeated
            sigma[i] = [0.0, -a, 0.0]
            beta[i] = [0.0, a * b, 0.0]
        elif i % 3 == 1:  # absolute: a |t - b|
            sigma[i] = [a, -a, -a]
            beta[i] = [-a * b, a * b, a * b]
        else:  # epsilon-insensitive: max(0, a |t - b| - 0.2)
            sigma[i] = [0.0, a, -a]
            beta[i] = [0.0, -a * b - 0.2, a * b - 0.2]
    return u, sigma, beta


def model_rows(rng, k=30, d=4):
    """Unit directions and two-piece losses for checks of the second-order model: hinges
    steeper than C (a kink holds the copy) and, every other row, absolute values whose kink
    lies far away (the copy's position follows ``w``)."""
    u = rng.normal(size=(k, d))
    u /= np.linalg.norm(u, axis=1)[:, None]
    a = rng.uniform(1.5, 3.0, k)
    far = rng.choice([-1.0, 1.0], k) * rng.uniform(3.0, 5.0, k)
    sigma = np.stack([np.zeros(k), a], axis=1)
    beta = np.stack([np.zeros(k), rng.normal(size=k)], axis=1)
    sigma[::2] = np.stack([a, -a], axis=1)[::2]
    beta[::2] = np.stack([-a * far, a * far], axis=1)[::2]
    return u, sigma, beta
