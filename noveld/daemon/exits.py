"""noveld's exit codes, in one place (docs/operations.md lists what each means to an operator)."""

EXIT_OK = 0
EXIT_IO = 1
EXIT_USAGE = 2
EXIT_CIRCUIT_OPEN = 3
EXIT_STATE_DIVERGED = 4
EXIT_REDIS_UNREACHABLE = 5
EXIT_STATE_DAMAGED = 6
EXIT_INTERRUPTED = 130
"""A run interrupted by SIGINT or SIGTERM before its pipeline started."""
