"""Downloading files with checksum verification, written atomically.

``download_file`` streams a URL (``https://``, ``http://`` or ``file://``) into a
temporary file beside the destination while hashing it, compares the digest with the
published one, and only then renames the file into place. A checksum mismatch or a
broken connection leaves no file behind.

>>> import hashlib, os, pathlib, tempfile
>>> from kernelgrad.data import download_file
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> source = folder / "source.bin"
>>> _ = source.write_bytes(b"some bytes")
>>> digest = hashlib.md5(b"some bytes").hexdigest()
>>> download_file(source.as_uri(), folder / "copy.bin", md5=digest).read_bytes()
b'some bytes'
"""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from ._files import atomic_writer
from .errors import ChecksumError, DownloadError

__all__ = ["download_file", "file_digest"]

_CHUNK = 1 << 20
ProgressCallback = Callable[[str, int, int | None], None]


def file_digest(path: str | os.PathLike[str], algorithm: str = "sha256") -> str:
    """The hex digest of a file (``algorithm``: any name :mod:`hashlib` knows)."""
    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _expected(md5: str | None, sha256: str | None) -> tuple[str, str] | None:
    if sha256:
        return "sha256", sha256.lower()
    if md5:
        return "md5", md5.lower()
    return None


def download_file(
    url: str,
    destination: str | os.PathLike[str],
    *,
    md5: str | None = None,
    sha256: str | None = None,
    timeout: float = 30.0,
    progress: ProgressCallback | None = None,
) -> Path:
    """Download ``url`` to ``destination`` and check its MD5 or SHA-256 digest.

    The file is written under a temporary name in the destination folder and renamed
    when complete and verified, so ``destination`` is either absent or whole.
    ``progress(url, bytes_done, bytes_total_or_None)`` is called as data arrives.

    Raises :class:`ChecksumError` on a digest mismatch and :class:`DownloadError` when
    the URL cannot be read; neither leaves a file behind.
    """
    destination = Path(destination)
    expected = _expected(md5, sha256)
    digest = hashlib.new(expected[0] if expected else "sha256")
    request = urllib.request.Request(url, headers={"User-Agent": "kernelgrad"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            length = response.headers.get("Content-Length") if response.headers else None
            total = int(length) if length and length.isdigit() else None
            done = 0
            with atomic_writer(destination) as handle:
                while chunk := response.read(_CHUNK):
                    handle.write(chunk)
                    digest.update(chunk)
                    done += len(chunk)
                    if progress is not None:
                        progress(url, done, total)
                if total is not None and done != total:
                    raise DownloadError(
                        f"{url}: the connection closed after {done} of {total} bytes"
                    )
                if expected is not None and digest.hexdigest() != expected[1]:
                    raise ChecksumError(
                        f"{url}: {expected[0]} checksum mismatch: expected {expected[1]}, got "
                        f"{digest.hexdigest()} ({done} bytes). The file was not kept; the "
                        "mirror may be serving a different or damaged file."
                    )
    except (urllib.error.URLError, OSError, ValueError) as error:
        if isinstance(error, DownloadError):
            raise
        reason = getattr(error, "reason", None) or error
        raise DownloadError(f"{url}: cannot download ({reason})") from None
    return destination
