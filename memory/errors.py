"""Errors a person or a calling tool can act on: each says what went wrong and what to do."""


class MiradorError(Exception):
    """Base class; the message is shown to the person as one line."""

    exit_code = 1


class InputError(MiradorError):
    """Bad input from the caller: an unknown id, an empty text, an invalid value."""

    exit_code = 2


class NotFoundError(InputError):
    """An id that is not in the store (or was forgotten)."""


class ConfigError(MiradorError):
    """The config file is unreadable or holds an unknown key or a bad value."""

    exit_code = 3


class SharedOfflineError(MiradorError):
    """A row that may live in a shared scope could not be read because that scope's store does not answer."""

    exit_code = 4


class StorageError(MiradorError):
    """The data folder's disk refused a read or write: full, over quota, read-only or failing (EIO).

    memory/store/io_faults.py words it (which folder, how much is free, what to do); `errno` says which fault."""

    exit_code = 5

    def __init__(self, message: str, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno


class DiskFullError(StorageError):
    """No space left (ENOSPC) or the disk quota is used up (EDQUOT): it passes once space is freed."""
