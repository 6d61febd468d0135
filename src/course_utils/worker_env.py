"""What the worker scripts in notebooks/workers check before they train: their launcher's variables,
their counts, and how long they wait for the other ranks.

Started without torchrun, a worker would stop with `KeyError: 'LOCAL_RANK'`; with a wrong RANK or
MASTER_PORT, with a raw error from `int()` or from deep inside PyTorch; and a rank whose peers never
come would wait for the process group's default timeout, 30 minutes on gloo. Here each of those
becomes one line that names the variable or option and says what to do:

- `check_torchrun_env()` checks RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (and any other
  of torchrun's variables that is set) and COURSE_GROUP_TIMEOUT_S; a missing or wrong one ends the
  process with exit status 2 and the command that starts the worker;
- `at_least(1)` is an argparse type for a count: 0, -1 or nan is refused with the option's name;
- `with joining() as timeout:` goes around `init_process_group(..., timeout=timeout)`: every rank
  waits at most COURSE_GROUP_TIMEOUT_S seconds (120 by default) for the others, and a rank that
  never comes ends the wait with a line naming MASTER_ADDR:MASTER_PORT and the ranks waited for
  (exit status 1). Where no launcher hosts the rendezvous store (torchrun and the course launcher
  do, and say so in TORCHELASTIC_USE_AGENT_STORE=True), rank 0 hosts it on MASTER_ADDR only:
  `init_process_group`'s own would listen on every network interface of the machine (it still does
  for a host name that resolves here to loopback alone, which the other machines could not reach).

Nothing here imports torch at import time, so a worker that never joins a group starts at once.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import os
import socket
import sys
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any, NoReturn

from course_utils._checks import text, timeout_seconds, whole_number
from course_utils.i18n import _

REQUIRED = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
# each of torchrun's counting variables, and the variable that bounds it from above (minus one)
BOUNDS = {
    "WORLD_SIZE": None,
    "LOCAL_WORLD_SIZE": "WORLD_SIZE",
    "GROUP_WORLD_SIZE": "WORLD_SIZE",
    "RANK": "WORLD_SIZE",
    "LOCAL_RANK": "LOCAL_WORLD_SIZE",
    "GROUP_RANK": "GROUP_WORLD_SIZE",
}
MAX_WORLD_SIZE = 2**31 - 1  # PyTorch keeps ranks in a C int
TIMEOUT_VARIABLE = "COURSE_GROUP_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 120.0
_HOSTED: dict[int, Any] = {}  # port -> the store rank 0 hosts there, kept while the process lives


class WorkerExit(SystemExit):
    """A worker that cannot go on: exit status 2 (a wrong variable) or 1 (the group did not form);
    `str()` is its one-line reason, which the course launcher reports."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(status)
        self.message = message

    def __str__(self) -> str:
        return self.message


def _stop(message: str, status: int = 2) -> NoReturn:
    """Print `message` as the process's last line on stderr and end it with `status`."""
    print(message, file=sys.stderr, flush=True)
    raise WorkerExit(message, status)


def _how_to_start(launch: str | None) -> str:
    """`launch`, or this command line under torchrun, for a message that says how to start the worker."""
    if launch is not None:
        return launch
    return " ".join(["torchrun --nproc-per-node=2", *sys.argv])


def _group_timeout() -> timedelta:
    """How long a rank waits for the others: COURSE_GROUP_TIMEOUT_S seconds, 120 when it is not set."""
    setting = os.environ.get(TIMEOUT_VARIABLE, "").strip()
    if not setting:
        return timedelta(seconds=DEFAULT_TIMEOUT_S)
    try:
        value: object = float(setting)
    except ValueError:
        value = setting
    try:
        return timedelta(seconds=timeout_seconds(TIMEOUT_VARIABLE, value))
    except (TypeError, ValueError) as err:
        _stop(str(err))


def _variables(also: tuple[str, ...], launch: str | None) -> dict[str, Any]:
    """torchrun's variables that this process reads (REQUIRED and `also`) and the others that are set,
    checked in order (a bound before what it bounds); one line and exit status 2 on the first problem."""
    unknown = [name for name in also if name not in BOUNDS and name not in REQUIRED]
    if unknown:
        raise ValueError(f"also names variables that torchrun does not set: {unknown}")
    start = _how_to_start(None if launch is None else text("launch", launch, "'launch(worker, 2)'"))
    for name in (*REQUIRED, *also):
        if not os.environ.get(name, "").strip():
            _stop(
                _("{name} is not set, so no launcher started this process; start it as: {start}").format(
                    name=name, start=start
                )
            )
    values: dict[str, Any] = {}
    for name, bound in BOUNDS.items():
        if name in os.environ:  # WORLD_SIZE, always set, comes first
            limit = MAX_WORLD_SIZE if bound is None else values.get(bound, values["WORLD_SIZE"])
            if name.endswith("WORLD_SIZE"):  # a count of ranks
                values[name] = _whole(name, os.environ[name].strip(), 1, limit, start)
            else:  # a rank, counted from 0
                values[name] = _whole(name, os.environ[name].strip(), 0, limit - 1, start)
    values["MASTER_PORT"] = _whole("MASTER_PORT", os.environ["MASTER_PORT"].strip(), 1, 65535, start)
    address = os.environ["MASTER_ADDR"].strip()
    try:
        socket.getaddrinfo(address, values["MASTER_PORT"], type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as err:
        _stop(
            _(
                "MASTER_ADDR={address!r} is not an address or host name that this machine can resolve "
                "({err}): set it to rank 0's machine as the other ranks reach it (127.0.0.1 on one "
                "machine); start this process as: {start}"
            ).format(address=address, err=err, start=start)
        )
    values["MASTER_ADDR"] = address
    _group_timeout()
    return values


def _whole(name: str, setting: str, low: int, high: int, start: str) -> int:
    """The variable `name`'s `setting` as an int from `low` to `high`, else one line and exit status 2."""
    try:
        value: object = int(setting)
    except ValueError:
        value = setting
    try:
        return whole_number(name, value, low, high)
    except (TypeError, ValueError) as err:
        _stop(_("{problem}; start this process as: {start}").format(problem=err, start=start))


def check_torchrun_env(*also: str, launch: str | None = None) -> None:
    """Check the variables a launcher sets that this worker reads, before it reads them.

    RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT must be set, and so must the names in
    `also` (e.g. "GROUP_RANK"); each of torchrun's counts that is set must be a whole number in its
    range (RANK below WORLD_SIZE, LOCAL_RANK below LOCAL_WORLD_SIZE, ...), MASTER_PORT a port
    (1-65535), MASTER_ADDR a name this machine resolves, COURSE_GROUP_TIMEOUT_S (if set) a number
    of seconds. Otherwise the process ends (exit status 2) with one line on stderr that names the
    variable and says how to start the worker: `launch`, or by default this command under torchrun.
    """
    _variables(also, launch)


def at_least(low: int) -> Callable[[str], int]:
    """An argparse `type` for a count: a whole number of at least `low`, else argparse's error line,
    which names the option (`argument --epochs: must be a whole number of at least 1, not '0'`)."""
    low = whole_number("low", low)

    def count(given: str) -> int:
        try:
            value = int(given)
        except ValueError:
            value = low - 1
        if value < low:
            raise argparse.ArgumentTypeError(
                _("must be a whole number of at least {low}, not {given!r}").format(low=low, given=given)
            )
        return value

    return count


def _others(rank: int, world_size: int) -> str:
    """The ranks other than `rank`, for a message: listed when they are few."""
    if world_size <= 9:
        return ", ".join(str(other) for other in range(world_size) if other != rank)
    return _("0-{last} but {rank}").format(last=world_size - 1, rank=rank)


def _loopback_alias(address: str, resolved: list[str]) -> bool:
    """Whether `address` is a host name, not an address or localhost, that this machine resolves to
    loopback only, as Debian resolves a machine's own name to 127.0.1.1: the other machines reach that
    name at another address, so a store bound to this one would be out of their reach."""
    try:
        ipaddress.ip_address(address)
    except ValueError:
        named = address.lower() != "localhost"
    else:
        named = False
    return named and all(ipaddress.ip_address(ip.split("%")[0]).is_loopback for ip in resolved)


def _host_store(address: str, port: int, timeout: timedelta) -> None:
    """Rank 0's rendezvous store, listening on `address` alone, kept while the process lives.

    `init_process_group` (env:// or tcp://) creates its store on rank 0 with `multi_tenant=True`, and a
    process has one such server per port: it finds this one and uses it, where it would have bound
    the port on every interface. A host name that resolves here to loopback alone (`_loopback_alias`)
    is left to `init_process_group`, whose store the other machines can reach.
    """
    import torch.distributed as dist  # here: importing this module must not import torch

    if port in _HOSTED:
        return
    places: list[tuple[Any, ...]] = []
    problem: Exception | None = None
    try:
        places = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as err:
        problem = err
    if places and _loopback_alias(address, [place[4][0] for place in places]):
        return  # init_process_group's own store, on every interface, as the other machines need
    for family, kind, protocol, _name, where in places:
        listener = socket.socket(family, kind, protocol)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(where)
            listener.listen(128)
        except OSError as err:
            listener.close()
            problem = err
            continue
        _HOSTED[port] = dist.TCPStore(
            address,
            port,
            is_master=True,
            multi_tenant=True,
            wait_for_workers=False,
            timeout=timeout,
            master_listen_fd=listener.detach(),
        )
        return
    _stop(
        _(
            "rank 0 hosts the rendezvous store at MASTER_ADDR:MASTER_PORT={address}:{port} and cannot "
            "listen there ({err}): MASTER_ADDR must be an address of this machine and MASTER_PORT a "
            "port that is free on it"
        ).format(address=address, port=port, err=problem)
    )


@contextlib.contextmanager
def joining(
    rank: int | None = None,
    world_size: int | None = None,
    master_addr: str | None = None,
    master_port: int | None = None,
) -> Iterator[timedelta]:
    """Around `init_process_group(..., timeout=timeout)`: yield how long to wait for the other ranks.

    The values not given are read (and checked) from RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT;
    a bad value given is a TypeError or ValueError that names it.
    Rank 0 hosts the rendezvous store on `master_addr` alone, unless a launcher hosts it
    (TORCHELASTIC_USE_AGENT_STORE=True). A rank that gives up waiting (`torch.distributed.DistError`)
    ends the process with one line naming the address, the ranks it waited for and what to check
    (exit status 1) instead of a traceback from PyTorch's C++.
    """
    if None in (rank, world_size, master_addr, master_port):
        found = _variables((), None)
        rank = found["RANK"] if rank is None else rank
        world_size = found["WORLD_SIZE"] if world_size is None else world_size
        master_addr = found["MASTER_ADDR"] if master_addr is None else master_addr
        master_port = found["MASTER_PORT"] if master_port is None else master_port
    world_size = whole_number("world_size", world_size, 1, MAX_WORLD_SIZE)
    rank = whole_number("rank", rank, 0, world_size - 1)
    master_addr = text("master_addr", master_addr, "'127.0.0.1'")
    master_port = whole_number("master_port", master_port, 1, 65535)
    import torch.distributed as dist  # here: importing this module must not import torch

    timeout = _group_timeout()
    if rank == 0 and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        _host_store(master_addr, master_port, timeout)
    try:
        yield timeout
    except dist.DistError as err:
        _stop(
            _(
                "rank {rank} of WORLD_SIZE={world_size} waited {seconds:g} s at MASTER_ADDR:MASTER_PORT="
                "{address}:{port} for the other ranks ({others}), and not all of them came ({cause}). Start "
                "every rank with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE, or let them wait "
                "longer with {variable}"
            ).format(
                rank=rank,
                world_size=world_size,
                seconds=timeout.total_seconds(),
                others=_others(rank, world_size),
                address=master_addr,
                port=master_port,
                cause=(str(err).strip().splitlines() or [type(err).__name__])[0],
                variable=TIMEOUT_VARIABLE,
            ),
            status=1,
        )
