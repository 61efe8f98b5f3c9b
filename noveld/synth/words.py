"""The stream's vocabulary: pronounceable pseudo-words, shortest (most frequent) first."""

from __future__ import annotations

import re

import numpy as np

from noveld.synth.config import SynthConfig
from noveld.synth.seeded import streams

_ONSETS = (
    "b",
    "c",
    "d",
    "f",
    "g",
    "h",
    "j",
    "k",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "t",
    "v",
    "w",
    "z",
    "b",
    "d",
    "k",
    "l",
    "m",
    "n",
    "r",
    "s",
    "t",
    "br",
    "ch",
    "cr",
    "dr",
    "fl",
    "gr",
    "kl",
    "pl",
    "pr",
    "sh",
    "sk",
    "sl",
    "st",
    "th",
    "tr",
)
_NUCLEI = ("a", "e", "i", "o", "u", "a", "e", "i", "o", "a", "e", "ai", "ea", "ou", "io", "ie")
_CODAS = ("", "", "", "", "", "", "n", "r", "s", "l", "m", "k", "nd", "st")
# Random syllables can spell rude words; demo output should not, so such words are redrawn.
_BLOCKED = re.compile(
    r"shit|fuc|cunt|nig|fag|slut|whor|rape|dick|cock|piss|porn|nazi|cum|tit|"
    r"anal|anus|butt|damn|hell|kill|die|dead|jew|gay|homo|sex|kkk"
)


def pseudo_words(n: int, rng: np.random.Generator) -> list[str]:
    """``n`` distinct lowercase pseudo-words of 1–3 consonant–vowel syllables, shortest first.

    Words containing a few rude or loaded substrings are redrawn, so demo output stays neutral.
    """
    onsets, nuclei, codas = (np.array(x) for x in (_ONSETS, _NUCLEI, _CODAS))
    found: dict[str, None] = {}
    while len(found) < n:
        m = max(256, 2 * (n - len(found)))
        syl = np.char.add(
            np.char.add(
                onsets[rng.integers(0, len(onsets), (m, 3))],
                nuclei[rng.integers(0, len(nuclei), (m, 3))],
            ),
            codas[rng.integers(0, len(codas), (m, 3))],
        )
        n_syl = rng.choice(3, size=m, p=[0.1, 0.6, 0.3]) + 1
        word = syl[:, 0]
        word = np.where(n_syl >= 2, np.char.add(word, syl[:, 1]), word)
        word = np.where(n_syl >= 3, np.char.add(word, syl[:, 2]), word)
        for w in word.tolist():
            if len(found) == n:
                break
            if not _BLOCKED.search(w):
                found[w] = None
    return sorted(found, key=len)  # stable: ties keep their (random) draw order


def vocabulary(cfg: SynthConfig) -> list[str]:
    """The stream's words in background-frequency rank order (most frequent first)."""
    return pseudo_words(cfg.vocab_size, streams(cfg.seed)["vocab"])
