"""The error a user can fix (bad configuration, incompatible state, unreadable input),
which the command line prints as it is, without a traceback."""

from __future__ import annotations


class UserError(RuntimeError):
    """A problem the user can fix (bad config, incompatible state, unreadable input)."""
