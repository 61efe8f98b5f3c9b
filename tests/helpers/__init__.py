"""Helpers that several test modules share: a test module imports none of another's."""
