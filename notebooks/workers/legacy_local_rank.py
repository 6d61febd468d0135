"""Seed 002's way to learn the local rank: a `--local_rank` command-line argument. Outdated.

Kept to show what happens when it meets today's `python -m torch.distributed.launch`, which
passes `--local-rank=<n>` (with a dash): argparse does not know that spelling and stops with
"unrecognized arguments". Do not copy this: read `os.environ["LOCAL_RANK"]`, as `train_ddp.py` does.
The one line the course adds prints, before parsing, the LOCAL_RANK the launcher put in the
environment: today's launcher sets it too.
"""

from __future__ import annotations

import argparse
import os


def parse() -> argparse.Namespace:
    """The seed's parser, unchanged apart from the comment."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--local_rank", type=int, default=0, help="node rank for distributed training")
    return parser.parse_args()


if __name__ == "__main__":
    # Added by the course, not in the seed: what the launcher put in the environment.
    print(f"LOCAL_RANK in the environment: {os.environ.get('LOCAL_RANK')}", flush=True)
    args = parse()
    print(f"local rank from the command line: {args.local_rank}", flush=True)
