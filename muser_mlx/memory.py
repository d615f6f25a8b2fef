"""Will a table of ``nbytes`` fit? Checked before its bytes are copied into MLX memory."""

from __future__ import annotations

import os
from functools import cache

import mlx.core as mx

from .errors import GGUFError

# Keys of MLX's device_info that cap what one new table can take, and what they mean.
DEVICE_LIMITS = {
    "max_buffer_size": "the largest buffer the Metal device allows",
    "max_buffer_length": "the largest buffer the Metal device allows",
    "max_recommended_working_set_size": "the Metal device's recommended working set",
    "free_memory": "the CUDA device's free memory",
}


def available_memory() -> int | None:
    """Bytes the host can still hand out, or None where the OS does not say (then no check).

    Linux: ``MemAvailable`` (free memory plus the page cache it can drop: the file being read
    sits in that cache); else ``SC_AVPHYS_PAGES * SC_PAGE_SIZE`` where ``os.sysconf`` has it.
    """
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def device_info() -> dict:
    """MLX's default device's info (MLX's ``device_info``), empty where it raises."""
    try:
        return (getattr(mx, "device_info", None) or mx.metal.device_info)()
    except RuntimeError:
        return {}


@cache
def device_memory() -> int:
    """Bytes of memory MLX's default device reports having in all (its info's ``total_memory`` or
    ``memory_size``), 0 where it reports none (the CPU)."""
    info = device_info()
    return next((int(info[k]) for k in ("total_memory", "memory_size") if isinstance(info.get(k), int)), 0)


def device_limits() -> dict[str, int]:
    """The limits in :data:`DEVICE_LIMITS` that MLX's default device reports (none on the CPU)."""
    info = device_info()
    return {key: int(info[key]) for key in DEVICE_LIMITS if isinstance(info.get(key), int)}


def check_fits(nbytes: int, where: str, error: type[Exception] = GGUFError) -> None:
    """Raise ``error`` naming ``where`` if ``nbytes`` exceeds host or device memory."""
    limits = {"the host's available memory": available_memory()}
    limits.update({DEVICE_LIMITS[k]: v for k, v in device_limits().items()})
    for what, limit in limits.items():
        if limit is not None and nbytes > limit:
            raise error(
                f"{where} needs {nbytes / 2**20:.1f} MiB, more than {what} "
                f"({limit / 2**20:.1f} MiB); nothing was allocated"
            )
