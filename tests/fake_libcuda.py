"""A stand-in for the CUDA driver library, for the tests of the CUDA-driver check."""

from __future__ import annotations


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
