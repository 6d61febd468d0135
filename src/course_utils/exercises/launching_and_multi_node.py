"""Checks for the exercises of notebook 07 (torchrun, ranks across nodes, multi-node commands).

Each check looks at the reader's answer and says what is right or wrong, with a hint, never
the solution. Commands are read with torchrun's own argument parser, so every spelling that
torchrun accepts (`--nproc-per-node=4`, `--nproc_per_node 4`, ...) is accepted here too.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shlex
from typing import Any

from torch.distributed.run import get_args_parser

from course_utils.exercises import CheckResult, failed, integral_value, passed
from course_utils.i18n import _

# Exercise 1: a job of 3 machines ("nodes") x 4 processes, started with static node ranks.
NNODES, NPROC_PER_NODE, NODE_RANK, LOCAL_RANK = 3, 4, 2, 1
# Exercise 2: the command for node 1 of 2, 4 GPUs each, node 0 reachable at 10.0.0.1:29500.
NODE0_ADDR, PORT, SCRIPT = "10.0.0.1", 29500, "train.py"


def check_rank_and_world_size(rank: Any, world_size: Any) -> CheckResult:
    """Check the RANK and WORLD_SIZE of one worker of `torchrun --nnodes=3 --nproc-per-node=4`.

    The worker is the one with LOCAL_RANK=1 on the machine started with `--node-rank=2`.
    """
    if rank is Ellipsis or world_size is Ellipsis or rank is None or world_size is None:
        return failed(_("write the RANK and the WORLD_SIZE you expect, as two whole numbers."))
    rank, world_size = integral_value(rank), integral_value(world_size)
    if rank is None or world_size is None:
        return failed(_("RANK and WORLD_SIZE are whole numbers (the environment holds them as text)."))
    right_world = NNODES * NPROC_PER_NODE
    right_rank = NODE_RANK * NPROC_PER_NODE + LOCAL_RANK
    if world_size != right_world:
        if world_size == NPROC_PER_NODE:
            return failed(
                _("that is LOCAL_WORLD_SIZE, the processes on one machine. WORLD_SIZE counts all of them.")
            )
        return failed(_("WORLD_SIZE is the number of processes in the whole job, on every machine together."))
    if rank == right_rank:
        return passed(
            _(
                "WORLD_SIZE is {world_size} and the worker is rank {rank}: the machines with lower "
                "node ranks hold the ranks before it, and its local rank comes on top."
            ).format(world_size=right_world, rank=right_rank)
        )
    if rank == LOCAL_RANK:
        return failed(_("that is its LOCAL_RANK, its number on its own machine. RANK is unique in the job."))
    if rank == NODE_RANK:
        return failed(_("that is its GROUP_RANK, the node's number. RANK counts processes, not machines."))
    if not 0 <= rank < right_world:
        return failed(_("RANK runs from 0 to WORLD_SIZE - 1, so {rank} cannot be one.").format(rank=rank))
    return failed(
        _(
            "not that rank. Count the processes on the machines that come before node 2, then add "
            "the worker's place on its own machine."
        )
    )


class _ParseError(Exception):
    """torchrun's parser rejected the arguments, or would print something and exit (--help)."""


def _parse(words: list[str]) -> argparse.Namespace:
    """`words` read by torchrun's own argument parser, which raises instead of printing and exiting."""
    parser = get_args_parser()

    def error(message: str) -> None:
        raise _ParseError(message)

    def leave(status: int = 0, message: str | None = None) -> None:
        raise _ParseError(
            _("it would print its help or version and exit without starting anything")
            if status == 0
            else (message or "it exits").strip()
        )

    parser.error = error  # type: ignore[method-assign]
    parser.exit = leave  # type: ignore[method-assign]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return parser.parse_args(words)


def _nodes(nnodes: str) -> tuple[int, int] | None:
    """torchrun's --nnodes as (min, max): "2" is (2, 2), "1:4" is (1, 4); None when unreadable."""
    parts = nnodes.split(":")
    if len(parts) > 2 or not all(part.strip().isdigit() for part in parts):
        return None
    return int(parts[0]), int(parts[-1])


def check_node1_command(command: Any) -> CheckResult:
    """Check the reader's command line for node 1 of a two-machine job with 4 GPUs each.

    Node 0 is reachable at 10.0.0.1 and listens on port 29500; the script is train.py.
    Static rendezvous (`--master-addr/--master-port/--node-rank`) and the c10d rendezvous
    (`--rdzv-backend=c10d --rdzv-endpoint=... --rdzv-id=...`) are both accepted.
    """
    if command is None or command is Ellipsis or (isinstance(command, str) and not command.strip()):
        return failed(_('write the command as a string, e.g. "torchrun --nnodes=... train.py".'))
    if not isinstance(command, str):
        return failed(_("write the command as one string, not a {type}.").format(type=type(command).__name__))
    try:
        words = shlex.split(command)
    except ValueError as err:
        return failed(_("the command cannot be split into words: {error}.").format(error=err))
    if words[:3] == ["python", "-m", "torch.distributed.run"] or words[:3] == [
        "python3",
        "-m",
        "torch.distributed.run",
    ]:
        words = words[3:]
    elif words[:1] == ["torchrun"]:
        words = words[1:]
    elif "torch.distributed.launch" in words:
        return failed(_("torch.distributed.launch is deprecated: start the command with torchrun."))
    else:
        return failed(_("start the command with torchrun (or python -m torch.distributed.run)."))
    try:
        args = _parse(words)
    except _ParseError as err:
        return failed(_("torchrun would refuse it: {error}.").format(error=err))
    if args.standalone:  # first: it replaces the rendezvous options, whatever else the command says
        return failed(
            _(
                "--standalone is for one machine alone: torchrun then ignores --rdzv-endpoint, "
                "--master-addr and --master-port and meets on this machine, on a free port, under a "
                "random job id, so the other machine can never join. Leave it out on a multi-machine job."
            )
        )
    if args.training_script != SCRIPT:
        return failed(
            _("the script to run comes after torchrun's options; here it is {script}.").format(script=SCRIPT)
        )
    if _nodes(args.nnodes) != (2, 2):
        return failed(_("--nnodes is the number of machines in the job (both of them)."))
    if args.nproc_per_node not in ("4", "gpu"):
        return failed(_("--nproc-per-node is the number of processes on this machine: one per GPU."))
    c10d = args.rdzv_backend == "c10d"
    if c10d:
        if args.rdzv_endpoint != f"{NODE0_ADDR}:{PORT}":
            return failed(_("--rdzv-endpoint is host:port of the rendezvous, on node 0, reachable by all."))
        if args.rdzv_id == "none":
            return failed(_("give the job an id with --rdzv-id, the same on every machine."))
        return passed(
            _(
                "with the c10d rendezvous every machine runs this same command; the node ranks are "
                "handed out as the machines arrive."
            )
        )
    if args.rdzv_backend != "static":
        return failed(_("use the static rendezvous (--master-addr, --master-port) or --rdzv-backend=c10d."))
    if args.rdzv_endpoint:  # the static rendezvous then meets there instead of at --master-addr:port
        host, _colon, port = args.rdzv_endpoint.rpartition(":")
        if host in ("127.0.0.1", "localhost"):
            return failed(_("127.0.0.1 is each machine itself: the rendezvous must be node 0's address."))
        if (host, port) != (NODE0_ADDR, str(PORT)):
            return failed(_("--rdzv-endpoint is host:port of the rendezvous, on node 0, reachable by all."))
        args.master_addr, args.master_port = NODE0_ADDR, PORT
    if args.node_rank != 1:
        return failed(
            _("--node-rank tells each machine which one it is; node 0 runs the same command with 0.")
        )
    if args.master_addr in ("127.0.0.1", "localhost"):
        return failed(
            _("127.0.0.1 is each machine itself: --master-addr must be node 0's address on the network.")
        )
    if args.master_addr != NODE0_ADDR:
        return failed(_("--master-addr is the address of node 0, where the rendezvous store listens."))
    if (PORT if args.master_port is None else args.master_port) != PORT:  # torchrun's default: 29500
        return failed(_("--master-port must be the port node 0 listens on, the same on both machines."))
    return passed(
        _(
            "node 0 runs the same command with --node-rank=0; the 8 workers get RANK 0-3 on node 0 "
            "and 4-7 on node 1."
        )
    )
