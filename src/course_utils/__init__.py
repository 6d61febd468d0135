"""Scaffolding for the course "PyTorch on GPUs, hands-on".

The notebooks call PyTorch themselves; this package carries what is not the lesson:
environment reports, GPU inventories, simulations, launchers, plots and self-checks.
Modules are small and by topic: import what a notebook needs from its module.
"""

__version__ = "0.1.0"
