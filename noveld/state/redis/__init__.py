"""The Redis state store: a namespace's statistics as a checkpoint plus a log of deltas, with
offsets, fencing, the shared vocabulary and the event outbox (:mod:`.store` composes the parts)."""
