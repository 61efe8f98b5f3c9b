"""The generator's seeded random streams, one per random quantity, so the output is a
deterministic function of the config and a shorter stream a prefix of a longer one."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

CHUNK = 4096  # documents assembled per vectorised step

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def streams(seed: int) -> dict[str, np.random.Generator]:
    names = (
        "vocab",
        "stories",
        "birth",
        "choice",
        "hot",
        "length",
        "component",
        "pick",
        "residual",
        "gap",
        "source",
        "embedding",
        "burst",  # appended last: the streams before it are unchanged
    )
    children = np.random.SeedSequence(seed).spawn(len(names))
    return {name: np.random.default_rng(s) for name, s in zip(names, children, strict=True)}


class Uniforms:
    """A per-document sequence of U(0,1) draws that can be peeked ahead and consumed later."""

    def __init__(self, rng: np.random.Generator) -> None:
        self._rng = rng
        self._buf: FloatArray = np.empty(0)

    def peek(self, m: int) -> FloatArray:
        if len(self._buf) < m:
            self._buf = np.concatenate([self._buf, self._rng.random(max(m, CHUNK))])
        return self._buf[:m]

    def take(self, m: int) -> FloatArray:
        out = self.peek(m).copy()
        self._buf = self._buf[m:]
        return out
