"""Images whose every sample costs a chosen time to load: the input of notebook 09, section 8.

`SlowSamples(32, read_s=0.01)` waits 10 ms before it returns each of its 32 ready-made images, as a
read from a network disk or an object store waits for its bytes; `SlowSamples(32, decode_s=0.004)`
spends 4 ms of CPU on each instead, as decoding and augmenting do. Both are stand-ins. The wait is
`time.sleep`, which holds no core, so the waits of several DataLoader workers overlap, even with more
workers than cores. The CPU time is a busy loop in Python until this thread has used `decode_s` CPU
seconds: the same cost on every machine, held on one core, with no torch threads and no release of
the GIL, so workers can share it out only over free cores. A sample is `(image, label, pid)`: a
float image `(3, size, size)` in [0, 1], a label in 0-3, and the id of the process that loaded it
(the loop's own, or a worker's).

It lives in a file, not in the notebook: where DataLoader workers are not forked (the forkserver
start method, Linux's default from Python 3.14; spawn on macOS and Windows), each worker receives
the data set pickled, with its class named by module and name, and imports that module; a class
defined in a notebook lives in `__main__`, which a worker cannot import.
"""

from __future__ import annotations

import math
import os
import time

import torch
from torch.utils.data import Dataset

from course_utils._checks import whole_number

MAX_IMAGES = 10_000  # the lesson needs a few dozen; more is a slip
MAX_IMAGE_SIZE = 1024
MAX_SECONDS = 1.0  # a second a sample already makes an epoch of a few dozen take a minute


def seconds(name: str, value: object) -> float:
    """`value` as seconds a sample costs, from 0 to MAX_SECONDS, else an error naming `name`."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number of seconds, such as 0.01, not {value!r}")
    if not (math.isfinite(value) and 0 <= value <= MAX_SECONDS):
        raise ValueError(f"{name} must be from 0 to {MAX_SECONDS:g} seconds, such as 0.01, not {value!r}")
    return float(value)


def spend_cpu(cpu_s: float) -> None:
    """Keep this thread busy until it has used `cpu_s` more seconds of CPU time: work that needs a core."""
    end = time.thread_time() + cpu_s
    while time.thread_time() < end:
        pass


class SlowSamples(Dataset):
    """`num_images` random images; reading one waits `read_s` seconds (storage latency, no core), then
    spends `decode_s` seconds of CPU (decoding's stand-in, one core)."""

    def __init__(
        self, num_images: int, read_s: float = 0.0, decode_s: float = 0.0, size: int = 64, seed: int = 0
    ) -> None:
        count = whole_number("num_images", num_images, 1, MAX_IMAGES)
        side = whole_number("size", size, 1, MAX_IMAGE_SIZE)
        self.read_s, self.decode_s = seconds("read_s", read_s), seconds("decode_s", decode_s)
        generator = torch.Generator().manual_seed(whole_number("seed", seed, 0, 2**64 - 1))
        self.images = torch.rand(count, 3, side, side, generator=generator)
        self.labels = torch.randint(0, 4, (count,), generator=generator)

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor, int]:
        time.sleep(self.read_s)  # waiting for the bytes: no core is used meanwhile
        spend_cpu(self.decode_s)  # decoding them: a core is
        return self.images[index], self.labels[index], os.getpid()
