"""The one descriptor of a GGUF file: opened once, regular files only, read at byte offsets.

``open_regular`` opens the path non-blocking (a FIFO cannot block the open) and refuses the
descriptor unless ``fstat`` of it says a regular file: what is checked is what is read, whatever
is renamed onto the path afterwards. Reads go through ``FileBytes`` into the caller's buffer
(``readinto``), so a file that shrinks underneath gives a short read and a ``GGUFError``, where
a memory map would give SIGBUS.
"""

from __future__ import annotations

import io
import os
import stat
import threading
from pathlib import Path

from .errors import GGUFError

READ_CHUNK = 1 << 26  # bytes per read() call: Linux returns at most 2**31 - 4096, macOS refuses more than 2**31 - 1
OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)


class FileBytes:
    """The bytes of one open regular file of ``size`` bytes (at the open), read at given
    offsets; ``GGUFError`` for a read that comes back short or fails."""

    def __init__(self, file: io.FileIO, size: int, path: Path):
        self.file, self.size, self.path = file, size, path
        self._lock = threading.Lock()  # one file position, shared by the reads

    def read_into(self, offset: int, out: memoryview, what: str) -> None:
        """Fill ``out`` (a writable 1-D byte view) with the bytes from byte ``offset``."""
        done = 0
        try:
            with self._lock:
                self.file.seek(offset)
                while done < len(out):
                    n = self.file.readinto(out[done : done + READ_CHUNK])
                    if not n:
                        raise GGUFError(
                            f"{self.path}: {what}: the file ends at byte {offset + done}, {len(out) - done} "
                            f"bytes short of byte {offset + len(out)}; it shrank after it was opened "
                            f"({self.size} bytes then)"
                        )
                    done += n
        except OSError as e:
            raise GGUFError(f"{self.path}: {what} cannot be read ({e.strerror or e})") from e

    def read(self, offset: int, n: int, what: str) -> bytearray:
        """``n`` bytes from byte ``offset``."""
        buf = bytearray(n)
        self.read_into(offset, memoryview(buf), what)
        return buf

    @property
    def closed(self) -> bool:
        return self.file.closed

    def close(self) -> None:
        self.file.close()


def open_regular(path: Path) -> FileBytes:
    """``path`` opened read-only; ``FileNotFoundError`` where nothing is there, ``GGUFError``
    for anything that is not a regular file or cannot be opened (a ``PermissionError``, ...)."""
    try:
        fd = os.open(path, OPEN_FLAGS)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such GGUF file") from None
    except OSError as e:  # PermissionError (the file, or a folder on its path), ELOOP, ...
        raise GGUFError(f"{path}: cannot be opened ({type(e).__name__}: {e.strerror or e})") from e
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # a folder, a FIFO, a socket or a device
            raise GGUFError(f"{path}: not a regular file")
        os.set_blocking(fd, True)
        return FileBytes(os.fdopen(fd, "rb", buffering=0), st.st_size, path)
    except BaseException:
        os.close(fd)
        raise
