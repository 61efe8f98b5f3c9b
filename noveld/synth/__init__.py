"""Synthetic labelled document stream with stories born over time (for demos, tests, benchmarks).

The generative process is a Dirichlet-process-style mixture of multinomials whose components
("stories") appear one by one as the stream goes on, so both the clustering and the novelty
detector have a known ground truth.

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
    correlated with, but not identical to, the story.

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

from noveld.synth.config import SynthConfig
from noveld.synth.draws import polya_repeats, sample_vmf
from noveld.synth.stream import generate, write_jsonl
from noveld.synth.words import pseudo_words, vocabulary

__all__ = [
    "SynthConfig",
    "generate",
    "polya_repeats",
    "pseudo_words",
    "sample_vmf",
    "vocabulary",
    "write_jsonl",
]
