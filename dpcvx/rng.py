"""The one door for randomness.

Every randomized callable in dpcvx takes ``rng`` and passes it through :func:`make_rng`.

- ``None`` (the default): a fresh generator keyed with 128 bits from the operating system's
  cryptographic random source (:func:`secrets.randbits`) driving AES in counter mode
  (``randomgen.AESCounter``), so the noise is unpredictable even to someone who knows every
  earlier output.
- an ``int``: a reproducible generator (NumPy's PCG64 seeded with it). Results drawn this way are
  marked ``seeded=True``: fine for tests and papers, not for a real release.
- a :class:`numpy.random.Generator`: used as given, and also marked ``seeded=True`` since dpcvx
  cannot tell where its state came from.

Legacy global NumPy randomness (``np.random.seed`` and friends) is never used.
"""

from __future__ import annotations

import numbers
import secrets

import numpy as np

from dpcvx.errors import InvalidParameterError

__all__ = ["make_rng"]


def make_rng(rng: None | int | np.random.Generator) -> tuple[np.random.Generator, bool]:
    """Normalize ``rng`` into a generator and say whether it is seeded.

    Parameters
    ----------
    rng : None, int or numpy.random.Generator
        See the module docstring.

    Returns
    -------
    generator : numpy.random.Generator
    seeded : bool
        False only when the generator is backed by OS cryptographic randomness.
    """
    if rng is None:
        from randomgen import AESCounter

        return np.random.Generator(AESCounter(key=secrets.randbits(128))), False
    if isinstance(rng, np.random.Generator):
        return rng, True
    if isinstance(rng, numbers.Integral) and not isinstance(rng, bool):
        if int(rng) < 0:
            raise InvalidParameterError(
                f"The `rng` parameter must be None, a non-negative int or a numpy Generator. "
                f"Got the negative int {rng}."
            )
        return np.random.default_rng(int(rng)), True
    raise InvalidParameterError(
        "The `rng` parameter must be None (OS cryptographic randomness), a non-negative int "
        f"(reproducible) or a numpy.random.Generator. Got {type(rng).__name__}: {rng!r}."
    )
