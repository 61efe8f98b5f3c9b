"""Small labelled streams for tests whose point is the shape of the stream, not its size."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any


def fading_stories(n_docs: int, **options: Any) -> list[dict[str, Any]]:
    """:func:`iter_fading_stories` as a list."""
    return list(iter_fading_stories(n_docs, **options))


def iter_fading_stories(
    n_docs: int,
    seed: int = 0,
    story_docs: int = 40,
    own_words: int = 8,
    embedding_dim: int = 0,
    returns: float = 0.05,
) -> Iterator[dict[str, Any]]:
    """Short documents of stories that come and go, one at a time (long streams, little
    memory): two stories at a time, each with words of its own (its names) and a few shared
    words, and now and then an old story's word again. Under forgetting the words of stories
    gone from the stream go out of use; some return. With ``embedding_dim`` each document also
    has an embedding near its story's direction; ``returns`` is the share of documents (of
    later stories) with an old story's word."""
    rng = random.Random(seed)
    for i in range(n_docs):
        story = i // story_docs + rng.randrange(2)
        words = [f"s{story}w{rng.randrange(own_words)}" for _ in range(rng.randint(3, 5))]
        words += [f"common{rng.randrange(20)}" for _ in range(rng.randint(1, 2))]
        if story > 3 and rng.random() < returns:  # an old story's name comes back
            words.append(f"s{rng.randrange(story - 2)}w{rng.randrange(own_words)}")
        rng.shuffle(words)
        doc: dict[str, Any] = {"id": f"d{i}", "text": " ".join(words), "label": f"story{story}"}
        if embedding_dim:
            direction = random.Random(f"{seed}/{story}")
            doc["embedding"] = [
                round(3 * direction.gauss(0, 1) + rng.gauss(0, 1), 4) for _ in range(embedding_dim)
            ]
        yield doc
