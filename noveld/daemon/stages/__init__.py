"""The stages of the batch loop that :class:`noveld.daemon.pipeline.Pipeline` runs in order:
decode, featurize, model step, novelty, events, commit, outbox and vocabulary upkeep."""
