"""Starting processes from a notebook, and never leaving one behind: the course's process wing.

Notebooks import from here; the modules behind it are

- `supervision`: what every process the course starts shares (its own process group, death
  with its parent, loopback, a timeout, a clean stop);
- `launcher`: `launch(fn, nprocs)`, a function in N ranks with torchrun's environment;
- `torchrun`: `run_torchrun` / `run_nodes`, the real `torchrun` command, one or several nodes;
- `child_python`: `run_python`, a snippet in a fresh interpreter, its last error line;
- `watchdog`: what cleans up after a caller killed outright, and `temporary_folder`, a folder it
  removes then too.
"""

from course_utils.processes.child_python import (
    ChildPythonError,
    ChildRun,
    last_error_line,
    mask_machine_paths,
    run_python,
    shorten_builtin_modules,
)
from course_utils.processes.launcher import (
    LaunchTimeoutError,
    RemoteTraceback,
    WorkerError,
    choose_start_method,
    launch,
    torchrun_env,
)
from course_utils.processes.supervision import LOOPBACK, LaunchError, free_port, loopback_interface
from course_utils.processes.torchrun import (
    TorchrunError,
    TorchrunResult,
    TorchrunTimeoutError,
    check_port_free,
    run_nodes,
    run_torchrun,
    strip_paths,
    torchrun_command,
)
from course_utils.processes.watchdog import temporary_folder

__all__ = [
    "LOOPBACK",
    "ChildPythonError",
    "ChildRun",
    "LaunchError",
    "LaunchTimeoutError",
    "RemoteTraceback",
    "TorchrunError",
    "TorchrunResult",
    "TorchrunTimeoutError",
    "WorkerError",
    "check_port_free",
    "choose_start_method",
    "free_port",
    "last_error_line",
    "launch",
    "loopback_interface",
    "mask_machine_paths",
    "run_nodes",
    "run_python",
    "run_torchrun",
    "shorten_builtin_modules",
    "strip_paths",
    "temporary_folder",
    "torchrun_command",
    "torchrun_env",
]
