"""The parameters of the synthetic stream, checked when made."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SynthConfig:
    """Parameters of the synthetic stream (:mod:`noveld.synth` describes the process).

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
