"""A stand-in for the CUDA driver library, for the tests of the CUDA-driver check."""

from __future__ import annotations

from pathlib import Path


class FakeLibcuda:
    """A stand-in for the CUDA driver library: cuDeviceGetCount answers `status`."""

    def __init__(self, status: int) -> None:
        self.status = status
        self.opened: list[str] = []

    def __call__(self, path: str) -> FakeLibcuda:
        self.opened.append(path)
        return self

    def cuDeviceGetCount(self, count) -> int:
        return self.status


MAPS_WITHOUT_CUDA = """\
55d0c0a00000-55d0c0a01000 r--p 00000000 08:01 1234 /usr/bin/python3.11
7f3a1c000000-7f3a1c200000 r-xp 00000000 08:01 5678 /usr/lib/x86_64-linux-gnu/libc.so.6
7f3a1d000000-7f3a1d100000 r-xp 00000000 08:01 9012 /opt/venv/lib/torch/lib/libcudart.so.12
"""
MAPS_WITH_CUDA = MAPS_WITHOUT_CUDA + (
    "7f3a1d200000-7f3a1d201000 rw-p 00000000 00:00 0 \n"  # an anonymous mapping: no path
    "7f3a1e000000-7f3a1f000000 r-xp 00000000 08:01 3456 /usr/lib/x86_64-linux-gnu/libcuda.so.580.65.06\n"
)


LIBCUDA = "/usr/lib/x86_64-linux-gnu/libcuda.so.580.65.06"


def fake_maps(tmp_path: Path) -> tuple[Path, Path]:
    """Two fake /proc/self/maps files: without and with the CUDA driver library."""
    without, with_cuda = tmp_path / "maps-without", tmp_path / "maps-with"
    without.write_text(MAPS_WITHOUT_CUDA)
    with_cuda.write_text(MAPS_WITH_CUDA)
    return without, with_cuda
