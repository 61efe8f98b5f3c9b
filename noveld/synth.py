"""Synthetic labelled document stream with stories born over time (for demos, tests, benchmarks).

The generative process is a Dirichlet-process-style mixture of multinomials whose components
("stories") appear one by one as the stream goes on, so both the clustering and the novelty
detector (DESIGN §5.4, §11) have a known ground truth.

Vocabulary
    ``vocab_size`` unique pronounceable pseudo-words (consonant–vowel syllables, e.g. "brafo",
    "stiemun") drawn deterministically from the seed and sorted by length, so the most frequent
    words are the shortest. A Zipf background ``p_bg(rank r) ∝ 1/r`` over them plays the role
    of the common words every story uses.

Story k's word distribution (drawn once, when the generator starts)
    ``φ_k ~ Dirichlet(c · m_k)`` with total concentration ``c = topic_concentration ·
    vocab_size`` (the scale of a symmetric Dirichlet(β) prior) and base measure
    ``m_k = (1 − λ) p_bg + λ · Uniform(S_k)``, where ``λ = specific_mass`` and ``S_k`` is a set
    of ``story_words`` words drawn uniformly from all but the 2 % most frequent ranks. It is
    sampled exactly through the Gamma representation of the Dirichlet:
    ``φ_k = w_k G_k + (1 − w_k) θ_k`` with ``w_k ~ Beta(c(1−λ), cλ)``,
    ``θ_k ~ Dirichlet(cλ/|S_k|)`` on S_k and ``G_k ~ Dirichlet(c(1−λ) p_bg)``, the latter
    represented as a Dirichlet process draw by 256 stick-breaking atoms from ``p_bg`` with the
    leftover stick mass put back on ``p_bg`` itself (exact in the limit; a close approximation
    when ``c(1−λ)`` is large, where ``G_k`` is close to ``p_bg`` anyway). So stories share the
    common words and each concentrates most of its mass on about ``story_words`` own words;
    smaller ``topic_concentration`` makes stories more idiosyncratic.

Which story a document belongs to
    Document 0 opens story 0. Each later document opens the next story with probability
    ``birth_rate`` while fewer than ``n_stories`` exist (so a short stream or a low rate may end
    with fewer stories), otherwise it joins born story k with probability proportional to
    ``(n_k + h_k · t · exp(−a_k / burst_docs)) · exp(−a_k / lifetime)``: the Chinese-restaurant
    count ``n_k`` (rich get richer) plus a recency burst for a newborn story (``t`` documents so
    far, ``a_k`` documents since the story's birth, ``h_k ~ Gamma(0.5, 2·burst_strength)`` so
    some stories take off and some stay small), times the optional fading factor: with
    ``lifetime`` set, a story's weight decays as ``exp(−a_k / lifetime)`` with its age, so later
    documents favour recent stories; with ``lifetime=None`` stories never fade.
    For speed the weights are refreshed in blocks of a few documents (one at a time at the
    start, later at most ``burst_docs/4``, ``lifetime/8`` and 256) and at every birth.

Context (optional)
    With ``n_sources > 0`` each story has a home source drawn uniformly from ``n_sources``
    and each document carries ``"context": {"source": "src<j>"}``: its story's home source with
    probability ``source_fidelity``, else a uniformly drawn one — a categorical field
    correlated with, but not identical to, the story (DESIGN §4 ``context``).

Documents
    Length ``max(2, Poisson(doc_len_mean))``; words i.i.d. from the story's ``φ_k``, or, with
    ``burstiness`` b > 0, by a Pólya urn: the i-th word of a document repeats a uniformly chosen
    earlier word of it with probability i/(b+i), else it is drawn from ``φ_k``. That is the
    Dirichlet compound multinomial, words drawn from a document's own θ_d ~ Dirichlet(b·φ_k)
    (paper 002 §2): small b makes documents bursty (the ``edcm`` likelihood's case). Output
    records are ``{"id": "d000000", "text": "...", "label": "s0", "ts": 1700000000.0}`` in
    stream order with strictly increasing epoch-second timestamps (about one document a
    second). Every random quantity has its own seeded stream, so the output is a deterministic
    function of the config and a shorter stream is a prefix of a longer one with the same seed.
    Memory is bounded by the story tables and one chunk of documents, whatever ``n_docs`` is.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
import numpy.typing as npt

_CHUNK = 4096  # documents assembled per vectorised step
_ATOMS = 256  # stick-breaking atoms per story for its take on the background
_MAX_BLOCK = 256  # documents seated with one refresh of the story weights, at most
_START_MS = 1_700_000_000_000  # 2023-11-14T22:13:20Z, the first document's timestamp

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

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class SynthConfig:
    """Parameters of the synthetic stream (see the module docstring for the process).

    ``birth_rate`` is the probability that a document opens a new story while fewer than
    ``n_stories`` exist; ``topic_concentration`` is the Dirichlet β (total concentration
    β·vocab_size) of the story word distributions around their base measure; ``story_words``
    is how many story-specific words each story concentrates on; ``specific_mass`` is the share
    of a story's base measure on those words. ``lifetime`` (documents, optional) makes stories
    fade after their birth so later documents favour recent stories. ``burst_docs`` and
    ``burst_strength`` shape the burst of documents a newborn story receives.
    """

    n_docs: int = 5000
    n_stories: int = 40
    vocab_size: int = 2000
    doc_len_mean: float = 8.0
    birth_rate: float = 0.01
    topic_concentration: float = 0.05
    story_words: int = 30
    seed: int = 0
    lifetime: float | None = None
    specific_mass: float = 0.7
    burst_docs: float = 100.0
    burst_strength: float = 1.0
    n_sources: int = 0
    source_fidelity: float = 0.9
    embedding_dim: int = 0
    embedding_cosine: float = 0.8
    burstiness: float = 0.0

    def __post_init__(self) -> None:
        """Reject settings the process cannot run with (ValueError, with the reason)."""
        checks: list[tuple[bool, str]] = [
            (self.n_docs >= 0, "n_docs must be >= 0"),
            (self.burstiness >= 0, "burstiness must be >= 0 (0 = words drawn i.i.d.)"),
            (1 <= self.n_stories <= 100_000, "n_stories must be in [1, 100000]"),
            (10 <= self.vocab_size <= 5_000_000, "vocab_size must be in [10, 5000000]"),
            (0 < self.doc_len_mean <= 10_000, "doc_len_mean must be in (0, 10000]"),
            (0.0 <= self.birth_rate <= 1.0, "birth_rate must be in [0, 1]"),
            (self.topic_concentration > 0, "topic_concentration must be > 0"),
            (
                1 <= self.story_words <= self.vocab_size - self.vocab_size // 50,
                f"story_words (each story's own words, {self.story_words}) must be in [1, "
                "vocab_size minus its 2% most frequent words]: a larger vocabulary is needed",
            ),
            (self.seed >= 0, "seed must be >= 0"),
            (self.lifetime is None or self.lifetime > 0, "lifetime must be > 0 or None"),
            (0.0 < self.specific_mass < 1.0, "specific_mass must be in (0, 1)"),
            (self.burst_docs > 0, "burst_docs must be > 0"),
            (self.burst_strength >= 0, "burst_strength must be >= 0"),
            (self.n_sources >= 0, "n_sources must be >= 0"),
            (0.0 <= self.source_fidelity <= 1.0, "source_fidelity must be in [0, 1]"),
            (
                self.embedding_dim == 0 or 2 <= self.embedding_dim <= 65_536,
                "embedding_dim must be 0 or in [2, 65536]",
            ),
            # closer to 1 the rejection sampler's κ loses its precision and never accepts
            (0.0 < self.embedding_cosine <= 0.9999, "embedding_cosine must be in (0, 0.9999]"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)


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


def _streams(seed: int) -> dict[str, np.random.Generator]:
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


def vocabulary(cfg: SynthConfig) -> list[str]:
    """The stream's words in background-frequency rank order (most frequent first)."""
    return pseudo_words(cfg.vocab_size, _streams(cfg.seed)["vocab"])


class _Uniforms:
    """A per-document sequence of U(0,1) draws that can be peeked ahead and consumed later."""

    def __init__(self, rng: np.random.Generator) -> None:
        self._rng = rng
        self._buf: FloatArray = np.empty(0)

    def peek(self, m: int) -> FloatArray:
        if len(self._buf) < m:
            self._buf = np.concatenate([self._buf, self._rng.random(max(m, _CHUNK))])
        return self._buf[:m]

    def take(self, m: int) -> FloatArray:
        out = self.peek(m).copy()
        self._buf = self._buf[m:]
        return out


class _Stories:
    """Word distributions of all stories as flat, offset cumulative tables for batch sampling.

    Row k of a table holds story k's cumulative probabilities plus k, so one ``searchsorted``
    of ``k + u`` samples from the right story for a whole array of tokens at once.
    """

    def __init__(self, cfg: SynthConfig, rng: np.random.Generator) -> None:
        v, k_n, s = cfg.vocab_size, cfg.n_stories, cfg.story_words
        ranks = np.arange(1, v + 1, dtype=np.float64)
        p_bg = 1.0 / ranks
        self.bg_cum: FloatArray = np.cumsum(p_bg / p_bg.sum())
        self.bg_cum[-1] = 1.0
        c = cfg.topic_concentration * v
        c_bg, c_sp = c * (1.0 - cfg.specific_mass), c * cfg.specific_mass
        self.w_bg: FloatArray = rng.beta(c_bg, c_sp, size=k_n)
        # Specific part: θ_k ~ Dir(c_sp/S) on S words outside the top 2% of ranks.
        skip = v // 50
        self.sp_words: IntArray = np.stack(
            [rng.choice(v - skip, size=s, replace=False) + skip for _ in range(k_n)]
        ).astype(np.int64)
        theta = rng.gamma(c_sp / s, size=(k_n, s)) + 1e-300
        self.sp_flat = self._offset_cum(theta / theta.sum(axis=1, keepdims=True))
        # Background part: stick-breaking atoms from p_bg, leftover mass on p_bg itself (-1).
        sticks = rng.beta(1.0, c_bg, size=(k_n, _ATOMS))
        left = np.cumprod(1.0 - sticks, axis=1)
        pi = sticks * np.concatenate([np.ones((k_n, 1)), left[:, :-1]], axis=1)
        atoms = self._draw_bg(rng.random((k_n, _ATOMS)))
        self.bg_words: IntArray = np.concatenate(
            [atoms, np.full((k_n, 1), -1, dtype=np.int64)], axis=1
        )
        self.bg_flat = self._offset_cum(np.concatenate([pi, left[:, -1:]], axis=1))

    @staticmethod
    def _offset_cum(prob: FloatArray) -> FloatArray:
        cum = np.cumsum(prob, axis=1)
        cum[:, -1] = 1.0
        return (cum + np.arange(len(prob))[:, None]).ravel()

    def _draw_bg(self, u: FloatArray) -> IntArray:
        idx = np.searchsorted(self.bg_cum, u, side="right")
        return np.minimum(idx, len(self.bg_cum) - 1).astype(np.int64)

    @staticmethod
    def _pick(flat: FloatArray, width: int, story: IntArray, u: FloatArray) -> IntArray:
        pos = np.searchsorted(flat, story + u, side="right")
        return np.minimum(pos, (story + 1) * width - 1).astype(np.int64)

    def sample(
        self, story: IntArray, u_comp: FloatArray, u_pick: FloatArray, residual: np.random.Generator
    ) -> IntArray:
        """Word ids (ranks) for tokens of the given stories."""
        out = np.empty(len(story), dtype=np.int64)
        is_bg = u_comp < self.w_bg[story]
        sp = ~is_bg
        width = self.sp_words.shape[1]
        out[sp] = self.sp_words.ravel()[self._pick(self.sp_flat, width, story[sp], u_pick[sp])]
        width = self.bg_words.shape[1]
        words = self.bg_words.ravel()[self._pick(self.bg_flat, width, story[is_bg], u_pick[is_bg])]
        left = words < 0
        words[left] = self._draw_bg(residual.random(int(left.sum())))
        out[is_bg] = words
        return out


class _Sequencer:
    """Which story each document belongs to: births, then CRP counts plus recency (see module)."""

    def __init__(self, cfg: SynthConfig, rngs: dict[str, np.random.Generator]) -> None:
        self.cfg = cfg
        self.t = 0
        self.born = 0
        self.counts = np.zeros(cfg.n_stories, dtype=np.float64)
        self.birth_at = np.zeros(cfg.n_stories, dtype=np.float64)
        self.hot: FloatArray = rngs["hot"].gamma(0.5, 2.0 * cfg.burst_strength, cfg.n_stories)
        self.u_birth = _Uniforms(rngs["birth"])
        self.u_choice = _Uniforms(rngs["choice"])
        limit = cfg.burst_docs / 4
        if cfg.lifetime is not None:
            limit = min(limit, cfg.lifetime / 8)
        self.max_block = int(max(1, min(_MAX_BLOCK, limit)))
        self.pending: list[IntArray] = []
        self.n_pending = 0

    def _open(self) -> IntArray:
        k = self.born
        self.born += 1
        self.counts[k] = 1.0
        self.birth_at[k] = self.t
        self.t += 1
        self.u_choice.take(1)  # keep one choice draw per document, used or not
        return np.array([k], dtype=np.int64)

    def _block(self) -> IntArray:
        """Seat the next block of documents (at least one)."""
        if self.t == 0:
            self.u_birth.take(1)
            return self._open()
        b = max(1, min(self.max_block, self.t // 32))
        if self.born < self.cfg.n_stories:
            hits = np.flatnonzero(self.u_birth.peek(b) < self.cfg.birth_rate)
            if len(hits) and hits[0] == 0:
                self.u_birth.take(1)
                return self._open()
            if len(hits):
                b = int(hits[0])
        self.u_birth.take(b)
        nb, cfg = self.born, self.cfg
        age = self.t - self.birth_at[:nb]
        base = self.counts[:nb] + self.hot[:nb] * self.t * np.exp(-age / cfg.burst_docs)
        if cfg.lifetime is None:
            w = base
        else:
            logw = np.log(base) - age / cfg.lifetime
            w = np.exp(logw - logw.max())
        cum = np.cumsum(w)
        pos = np.searchsorted(cum, self.u_choice.take(b) * cum[-1], side="right")
        picks: IntArray = np.minimum(pos, nb - 1).astype(np.int64)
        self.counts[:nb] += np.bincount(picks, minlength=nb)
        self.t += b
        return picks

    def next(self, n: int) -> IntArray:
        """Story ids of the next ``n`` documents."""
        while self.n_pending < n:
            block = self._block()
            self.pending.append(block)
            self.n_pending += len(block)
        flat = np.concatenate(self.pending)
        self.pending = [flat[n:]]
        self.n_pending = len(flat) - n
        return flat[:n]


Chunk = tuple[int, IntArray, npt.NDArray[np.int64], list[str], list[str] | None, FloatArray | None]


def sample_vmf(mu: FloatArray, kappa: float, rng: np.random.Generator) -> FloatArray:
    """One draw from vMF(μ_i, κ) per row of ``mu`` (unit rows), by Wood's (1994) rejection
    sampler for the cosine w to the mean and a uniform direction orthogonal to it."""
    n, p = mu.shape
    b = (-2.0 * kappa + np.sqrt(4.0 * kappa * kappa + (p - 1.0) ** 2)) / (p - 1.0)
    x0 = (1.0 - b) / (1.0 + b)
    c = kappa * x0 + (p - 1.0) * np.log(1.0 - x0 * x0)
    w = np.empty(n)
    todo = np.arange(n)
    while todo.shape[0]:
        z = rng.beta((p - 1.0) / 2.0, (p - 1.0) / 2.0, todo.shape[0])
        cand = (1.0 - (1.0 + b) * z) / (1.0 - (1.0 - b) * z)
        u = rng.random(todo.shape[0])
        ok = kappa * cand + (p - 1.0) * np.log(1.0 - x0 * cand) - c >= np.log(u)
        w[todo[ok]] = cand[ok]
        todo = todo[~ok]
    v = rng.standard_normal((n, p))
    v -= (v * mu).sum(axis=1, keepdims=True) * mu
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    out: FloatArray = w[:, None] * mu + np.sqrt(np.maximum(1.0 - w * w, 0.0))[:, None] * v
    return out


def polya_repeats(
    ids: np.ndarray, lengths: np.ndarray, burstiness: float, rng: np.random.Generator
) -> np.ndarray:
    """Documents' words (concatenated, ``lengths`` each) after the Pólya urn of the module
    docstring: word i of a document repeats a uniformly chosen earlier word with probability
    i/(b+i) — earlier words as they came out of the urn — else it keeps its fresh draw."""
    m = ids.shape[0]
    begins = np.repeat(np.cumsum(lengths) - lengths, lengths)
    pos = np.arange(m) - begins
    repeat = rng.random(m) < pos / (burstiness + pos)
    source = np.arange(m)
    pick = begins + np.floor(rng.random(m) * pos).astype(np.int64)
    source[repeat] = pick[repeat]
    while True:  # follow each repeat back to a fresh draw (sources only point backwards)
        nxt = source[source]
        if np.array_equal(nxt, source):
            break
        source = nxt
    out: np.ndarray = ids[source]
    return out


def _chunks(cfg: SynthConfig) -> Iterator[Chunk]:
    """(first stream index, story ids, timestamps in ms, texts, sources or None) for successive
    chunks."""
    rngs = _streams(cfg.seed)
    home = rngs["source"].integers(0, max(cfg.n_sources, 1), cfg.n_stories)
    words = pseudo_words(cfg.vocab_size, rngs["vocab"])
    word_arr = np.array(words, dtype=object)
    stories = _Stories(cfg, rngs["stories"])
    seq = _Sequencer(cfg, rngs)
    means: FloatArray | None = None
    if cfg.embedding_dim:
        p = cfg.embedding_dim
        means = rngs["embedding"].standard_normal((cfg.n_stories, p))
        means /= np.linalg.norm(means, axis=1, keepdims=True)
        c = cfg.embedding_cosine
        kappa = (c * p - c**3) / (1.0 - c * c)  # paper 003 eq. 10
    ms = _START_MS
    for start in range(0, cfg.n_docs, _CHUNK):
        n = min(_CHUNK, cfg.n_docs - start)
        story = seq.next(n)
        lengths = np.maximum(rngs["length"].poisson(cfg.doc_len_mean, n), 2).astype(np.int64)
        tok_story = np.repeat(story, lengths)
        m = len(tok_story)
        ids = stories.sample(
            tok_story, rngs["component"].random(m), rngs["pick"].random(m), rngs["residual"]
        )
        if cfg.burstiness > 0:
            ids = polya_repeats(ids, lengths, cfg.burstiness, rngs["burst"])
        toks: list[str] = word_arr[ids].tolist()
        ends = np.cumsum(lengths).tolist()
        begins = [0, *ends[:-1]]
        texts = [" ".join(toks[a:b]) for a, b in zip(begins, ends, strict=True)]
        gaps = 1 + np.floor(rngs["gap"].exponential(999.0, n)).astype(np.int64)
        stamps = ms + np.cumsum(gaps)
        ms = int(stamps[-1])
        sources = None
        if cfg.n_sources > 0:
            u = rngs["source"].random(n)
            other = rngs["source"].integers(0, cfg.n_sources, n)
            src = np.where(u < cfg.source_fidelity, home[story], other)
            sources = [f"src{j}" for j in src.tolist()]
        emb = None if means is None else sample_vmf(means[story], kappa, rngs["embedding"])
        yield start, story, stamps, texts, sources, emb


def generate(cfg: SynthConfig) -> Iterator[dict[str, Any]]:
    """Yield ``{"id", "text", "label", "ts"}`` records (and ``context`` with ``n_sources``,
    ``embedding`` with ``embedding_dim``) in stream order, deterministic per seed."""
    for start, story, stamps, texts, sources, emb in _chunks(cfg):
        for j, (k, ms, text) in enumerate(zip(story.tolist(), stamps.tolist(), texts, strict=True)):
            rec: dict[str, Any] = {
                "id": f"d{start + j:06d}",
                "text": text,
                "label": f"s{k}",
                "ts": ms / 1000,
            }
            if sources is not None:
                rec["context"] = {"source": sources[j]}
            if emb is not None:
                rec["embedding"] = _rounded(emb[j])
            yield rec


def write_jsonl(cfg: SynthConfig, path_or_stream: str | os.PathLike[str] | IO[str]) -> int:
    """Write the stream as JSON lines (same records as ``generate``) and return the count.

    A path is created/overwritten (UTF-8); a text stream is written to and left open. Lines are
    formatted directly (ids, labels and pseudo-words never need JSON escaping) and are identical
    to ``json.dumps(record)``.
    """
    if isinstance(path_or_stream, (str, os.PathLike)):
        with Path(path_or_stream).open("w", encoding="utf-8", newline="\n") as fh:
            return _write(cfg, fh)
    return _write(cfg, path_or_stream)


def _rounded(x: FloatArray) -> list[float]:
    """An embedding as JSON-friendly floats (6 decimals: files stay small, directions exact
    to ~1e-6)."""
    return [round(v, 6) for v in x.tolist()]


def _write(cfg: SynthConfig, out: IO[str]) -> int:
    n = 0
    for start, story, stamps, texts, sources, emb in _chunks(cfg):
        ctx = [""] * len(texts) if sources is None else [
            f', "context": {{"source": "{x}"}}' for x in sources
        ]  # fmt: skip
        if emb is not None:
            ctx = [
                f'{c}, "embedding": {json.dumps(_rounded(e))}'
                for c, e in zip(ctx, emb, strict=True)
            ]
        lines = [
            f'{{"id": "d{start + j:06d}", "text": "{text}", "label": "s{k}", '
            f'"ts": {ms / 1000!r}{ctx[j]}}}\n'
            for j, (k, ms, text) in enumerate(
                zip(story.tolist(), stamps.tolist(), texts, strict=True)
            )
        ]
        out.write("".join(lines))
        n += len(lines)
    return n


def main() -> None:
    """``python -m noveld.synth [n_docs]``: write a stream to stdout and its timing to stderr."""
    import time

    n_docs = int(sys.argv[1]) if len(sys.argv) > 1 else SynthConfig().n_docs
    t0 = time.perf_counter()
    n = write_jsonl(SynthConfig(n_docs=n_docs), sys.stdout)
    sys.stderr.write(
        f"{n} documents in {time.perf_counter() - t0:.2f} s "
        f"({n / max(time.perf_counter() - t0, 1e-9):,.0f} docs/s)\n"
    )


if __name__ == "__main__":
    main()
