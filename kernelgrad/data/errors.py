"""Errors of the data package. Each message names the file or dataset and the fix."""

from __future__ import annotations

__all__ = ["ChecksumError", "DatasetError", "DatasetNotFoundError", "DownloadError", "IDXError"]


class DatasetError(Exception):
    """Base class of the data errors a user can fix (a missing or broken dataset)."""


class IDXError(DatasetError, ValueError):
    """A malformed IDX file: bad magic number, unknown type code, sizes that do not match
    the header, or a truncated gzip stream."""


class DatasetNotFoundError(DatasetError, FileNotFoundError):
    """No complete copy of a dataset was found in any searched location."""


class DownloadError(DatasetError, OSError):
    """A dataset file could not be downloaded from any mirror."""


class ChecksumError(DownloadError):
    """A downloaded file does not match its published checksum (it is not kept)."""
