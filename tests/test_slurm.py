"""The course's SLURM batch scripts, submitted with sbatch to a real single-host SLURM cluster.

The fixture starts munged, slurmctld and two slurmd nodes (`slurmd -N node1`, `-N node2`, both at
127.0.0.1 on free ports), all configured and kept in the test's temporary folder, and stops them
afterwards, always, with any job step that outlived them (a run that failed half-way). Where the
daemons are not installed, or the cluster does not come up, the tests skip and say why. Both
scripts run at once, each on both nodes (2 nodes x 2 ranks).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
sys.path.insert(0, str(NOTEBOOKS))
from workers.resume_training import make_dataset  # noqa: E402

DAEMONS = ("munged", "slurmctld", "slurmd")
INSTALL = "install them as root with `apt-get install slurm-wlm munge` (Debian, Ubuntu)"
NODES, RANKS_PER_NODE, EPOCHS = 2, 2, 4
START_TIMEOUT, JOB_TIMEOUT = 60.0, 240.0


def free_ports(count: int) -> list[int]:
    """`count` distinct TCP ports that are free on loopback now (held together while asked)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def slurm_config(folder: Path, ctld_port: int, node_ports: list[int]) -> str:
    """slurm.conf for one controller and len(node_ports) nodes on this host, all state in `folder`."""
    first, last = node_ports[0], node_ports[-1]
    assert node_ports == list(range(first, last + 1)), "slurm.conf gives the nodes a range of ports"
    return f"""\
ClusterName=course
SlurmctldHost={socket.gethostname()}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={folder}/munge.socket
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool-%n
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd-%n.pid
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
SlurmdTimeout=10
MessageTimeout=5
KillWait=2
MinJobAge=600
SlurmdParameters=config_overrides
NodeName=node[1-{len(node_ports)}] NodeAddr=127.0.0.1 Port=[{first}-{last}] CPUs=4 State=UNKNOWN
PartitionName=course Nodes=ALL Default=YES MaxTime=30 State=UP
"""


@dataclass
class Cluster:
    """A running single-host SLURM cluster: its folder and the environment its commands need."""

    folder: Path
    env: dict[str, str]
    left: list[str] = field(default_factory=list)  # what used the folder after the daemons stopped

    def run(self, *command: str, timeout: float = 20) -> str:
        """Run a SLURM command (sbatch, squeue, scontrol ...) against this cluster; its stdout."""
        done = subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.strip()}")
        return done.stdout

    def job(self, job_id: str) -> dict[str, str]:
        """scontrol's fields of a job (JobState, Restarts, NodeList ...)."""
        return dict(re.findall(r"(\w+)=(\S*)", self.run("scontrol", "show", "job", "-o", job_id)))

    def wait(self, job_id: str, states: set[str], timeout: float = JOB_TIMEOUT) -> dict[str, str]:
        """Poll the job until its state is in `states`; TimeoutError with the logs' ends if it is not."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job = self.job(job_id)
            if job["JobState"] in states:
                return job
            time.sleep(0.5)
        raise TimeoutError(f"job {job_id} is still {job['JobState']} after {timeout:.0f} s\n{self.logs()}")

    def logs(self) -> str:
        """The last lines of every daemon's log, for a failure's message."""
        parts = []
        for log in sorted(self.folder.glob("*.log")):
            tail = log.read_text(errors="replace").splitlines()[-15:]
            parts.append(f"--- {log.name}\n" + "\n".join(tail))
        return "\n".join(parts)


def start(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    """Start a daemon in the foreground (so that this process can stop it), its output to `log`."""
    with log.open("w") as stream:
        return subprocess.Popen(
            command, env=env, stdin=subprocess.DEVNULL, stdout=stream, stderr=stream, start_new_session=True
        )


def stop(processes: list[subprocess.Popen]) -> None:
    """SIGTERM each daemon, SIGKILL what is still there after 10 s; wait for all."""
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def processes_using(folder: Path) -> dict[int, str]:
    """The processes whose command line, environment or open files name `folder`: what the cluster left.

    Open files count because a job step's slurmstepd rewrites its command line ("slurmstepd: [2.0]")
    and clears its environment, but keeps its node's log in the folder open.
    """
    left, needle = {}, str(folder)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            named = needle.encode() in cmdline or needle.encode() in (entry / "environ").read_bytes()
            inside = (target == needle or target.startswith(needle + "/") for target in open_files(entry))
            if named or any(inside):
                left[int(entry.name)] = cmdline.replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return left


def open_files(process: Path) -> Iterator[str]:
    """What the open file descriptors of the process at /proc/PID point to (paths, pipe:[...])."""
    for fd in (process / "fd").iterdir():
        with contextlib.suppress(OSError):  # closed meanwhile
            yield os.readlink(fd)


def kill_left(folder: Path, grace: float = 10.0) -> list[str]:
    """SIGKILL what still uses `folder` after `grace` s (`left_after`); what was there, as "PID: command"."""
    left = left_after(folder, grace)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return [f"{pid}: {command}" for pid, command in left.items()]


@contextlib.contextmanager
def slurm_cluster(folder: Path) -> Iterator[Cluster]:
    """munged, slurmctld and two slurmd nodes, all state in `folder`; stopped afterwards, always.

    Skips the test, saying why, where the daemons are missing or the cluster does not come up.
    """
    missing = [
        name
        for name in (*DAEMONS, "sbatch", "scontrol")
        if shutil.which(name) is None and not Path("/usr/sbin", name).exists()
    ]
    if missing:
        pytest.skip(f"SLURM is not installed here (no {', '.join(missing)}): {INSTALL}")
    if os.geteuid() != 0:
        pytest.skip("the SLURM test starts slurmd, which runs jobs as their users, so it needs root")
    folder.chmod(0o700)  # munged refuses folders that others can write to
    (folder / "state").mkdir()
    key = folder / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)  # munged refuses a key that others can read
    ctld_port, node_ports = free_ports(1)[0], free_port_range(NODES)
    config = folder / "slurm.conf"
    config.write_text(slurm_config(folder, ctld_port, node_ports))
    # The jobs find this Python (torchrun, torch) first on PATH, as a student's activated environment.
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    env = os.environ | {"SLURM_CONF": str(config), "PATH": path}
    for name in [n for n in env if n.startswith(("SLURM_", "SBATCH_", "SRUN_")) and n != "SLURM_CONF"]:
        del env[name]  # a test run inside a SLURM job must not pass that job's settings on
    sbin = lambda name: shutil.which(name) or f"/usr/sbin/{name}"  # noqa: E731
    daemons: list[subprocess.Popen] = []
    slurm = Cluster(folder, env)
    try:
        # --force: munged wants every folder above its socket open to all (o+x), and pytest's
        # temporary folders are private (0700); the jobs run as root, so that does not matter here.
        munge = [
            sbin("munged"),
            "--foreground",
            "--force",
            f"--socket={folder}/munge.socket",
            f"--key-file={key}",
            f"--log-file={folder}/munged.log",
            f"--pid-file={folder}/munged.pid",
            f"--seed-file={folder}/munged.seed",
            "--num-threads=2",
        ]
        daemons.append(start(munge, env, folder / "munged-stderr.log"))
        wait_for(lambda: (folder / "munge.socket").exists(), daemons, "munged's socket", folder)
        # slurmctld and the nodes start together: each node registers once the controller answers.
        starts = [[sbin("slurmctld"), "-D", "-i"]] + [
            [sbin("slurmd"), "-D", "-N", f"node{k + 1}"] for k in range(NODES)
        ]
        for command in starts:
            daemons.append(start(command, env, folder / f"{Path(command[0]).name}-{command[-1]}-stderr.log"))

        def nodes_idle() -> bool:
            states = subprocess.run(
                ["sinfo", "-h", "-N", "-o", "%N %t"], env=env, capture_output=True, text=True, timeout=10
            ).stdout.split()
            return states.count("idle") == NODES

        wait_for(nodes_idle, daemons, "two idle nodes", folder)
        yield slurm
    finally:
        if daemons and daemons[0].poll() is None and len(daemons) > 1:
            subprocess.run(
                ["scancel", "--full", "--quiet", f"--user={os.geteuid()}"],
                env=env,
                capture_output=True,
                timeout=20,
            )
        stop(daemons[1:][::-1])  # the nodes, then the controller
        stop(daemons[:1])  # munged last: the others need it to say goodbye
        slurm.left = kill_left(folder)  # a job step that outlived its node (a failed run) ends here too


def free_port_range(count: int) -> list[int]:
    """`count` consecutive TCP ports free on loopback now (slurm.conf gives the nodes a range)."""
    for _ in range(100):
        start = free_ports(1)[0]
        ports = list(range(start, start + count))
        if ports[-1] < 65536 and all(port_is_free(port) for port in ports):
            return ports
    pytest.skip(f"found no {count} consecutive free ports on loopback for the SLURM nodes")


def port_is_free(port: int) -> bool:
    """Whether a TCP port is free on loopback now."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def wait_for(ready, daemons: list[subprocess.Popen], what: str, folder: Path) -> None:
    """Poll `ready()` until true; skip the test, saying why, if a daemon dies or time runs out."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        dead = [p.args[0] for p in daemons if p.poll() is not None]
        if dead:
            pytest.skip(f"SLURM could not start here ({', '.join(dead)} exited): {tails(folder)}")
        if ready():
            return
        time.sleep(0.2)
    pytest.skip(f"SLURM did not come up here (no {what} after {START_TIMEOUT:.0f} s): {tails(folder)}")


def tails(folder: Path) -> str:
    """The logs' last lines, for a skip message."""
    return Cluster(folder, {}).logs()


def single_process_loss(epochs: int, world_size: int) -> float:
    """Train the worker's model in this process on what all ranks see together; the final loss.

    DDP averages the ranks' gradients: one step on the concatenation of the ranks' batches (equal
    sizes, mean squared error) computes the same gradient, so one process replays the whole job.
    """
    dataset = make_dataset()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    samplers = [
        DistributedSampler(dataset, num_replicas=world_size, rank=r, shuffle=True, seed=0)
        for r in range(world_size)
    ]
    for epoch in range(epochs):
        for sampler in samplers:
            sampler.set_epoch(epoch)
        for batches in zip(*(DataLoader(dataset, batch_size=16, sampler=s) for s in samplers), strict=True):
            x, y = torch.cat([b[0] for b in batches]), torch.cat([b[1] for b in batches])
            optimizer.zero_grad()
            F.mse_loss(model(x), y).backward()
            optimizer.step()
    return final_loss(model.state_dict())


def final_loss(state: dict[str, torch.Tensor]) -> float:
    """The worker model's mean squared error on the whole data set, with weights `state`."""
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    model.load_state_dict(state)
    x, y = make_dataset().tensors
    with torch.no_grad():
        return F.mse_loss(model(x), y).item()


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """Both scripts submitted at once to a fresh cluster; the srun one crashes in epoch 2 and is
    requeued once. The cluster is stopped before the tests look at what the jobs left."""
    out = tmp_path_factory.mktemp("jobs")
    submitted: dict[str, dict] = {}
    with slurm_cluster(tmp_path_factory.mktemp("slurm")) as cluster:
        crash = ["--crash-in-epoch", "2"]  # rank 1 raises in epoch 2 in the first run only
        for script, extra in (("slurm_torchrun.sbatch", []), ("slurm_srun.sbatch", crash)):
            checkpoints = out / script.split(".")[0]
            job_id = cluster.run(
                "sbatch",
                "--parsable",
                f"--export=ALL,CHECKPOINT_DIR={checkpoints}",
                f"--output={out}/%x-%j.out",
                f"--chdir={NOTEBOOKS}",
                str(NOTEBOOKS / "workers" / script),
                "--epochs",
                str(EPOCHS),
                *extra,
            ).strip()
            submitted[script] = {"id": job_id, "checkpoints": checkpoints}
        finished = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}
        crashed = submitted["slurm_srun.sbatch"]["id"]
        first = cluster.wait(crashed, finished)
        assert first["JobState"] == "FAILED", f"the injected crash should fail the first run: {first}"
        # The nodes may still be ending the failed run's steps; a requeued run keeps the job id, and
        # a late kill for that id would end the new run before it prints anything. Wait for them.
        deadline = time.monotonic() + JOB_TIMEOUT
        while job_steps(crashed) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not job_steps(crashed), f"job {crashed}'s steps did not end: {cluster.logs()}"
        cluster.run("scontrol", "requeue", crashed)  # what a preemption or a failed node does too
        # A requeued job waits two minutes before it may start again; this one need not.
        cluster.run("scontrol", "update", f"JobId={crashed}", "StartTime=now")
        # Read its end only once the second run has started (its first line), not a state from before.
        output, deadline = next(out.glob(f"*-{crashed}.out")), time.monotonic() + START_TIMEOUT
        while "restart count 1" not in output.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        for job in submitted.values():
            job["state"] = cluster.wait(job["id"], finished)
            job["output"] = next(out.glob(f"*-{job['id']}.out")).read_text()
            if job["state"]["JobState"] != "COMPLETED":
                job["output"] += f"\n{cluster.logs()}"
        queue = cluster.run("squeue", "-h")
    return {"jobs": submitted, "queue": queue, "left": cluster.left}


def job_steps(job_id: str) -> list[str]:
    """The slurmstepd processes of a job that still exist ("slurmstepd: [2.batch]", "[2.0]" ...)."""
    steps, prefix = [], f"slurmstepd: [{job_id}.".encode()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "cmdline").read_bytes().startswith(prefix):
                steps.append(entry.name)
        except OSError:  # gone meanwhile
            continue
    return steps


def left_after(folder: Path, grace: float = 10.0) -> dict[int, str]:
    """What still uses the cluster's folder (`processes_using`) after up to `grace` s, by pid."""
    deadline = time.monotonic() + grace
    while (left := processes_using(folder)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def json_lines(text: str) -> list[dict]:
    """The JSON lines the worker's ranks printed in a job's output."""
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


@pytest.mark.parametrize("script", ["slurm_torchrun.sbatch", "slurm_srun.sbatch"])
def test_batch_script_trains_on_two_nodes(jobs: dict, script: str) -> None:
    """Every rank reports, and the weights give the loss of the same training in one process."""
    job = jobs["jobs"][script]
    assert job["state"]["JobState"] == "COMPLETED", job["output"]
    assert job["state"]["NodeList"] == f"node[1-{NODES}]", job["state"]
    world = NODES * RANKS_PER_NODE
    rows = json_lines(job["output"])
    full = [r for r in rows if r["resumed_at_epoch"] + r["epochs_run"] == EPOCHS]
    assert sorted(r["rank"] for r in full) == list(range(world)), job["output"]
    final = torch.load(job["checkpoints"] / "final.pt", weights_only=True)
    snapshot = torch.load(job["checkpoints"] / "snapshot.pt", weights_only=True)
    assert snapshot["epoch"] == EPOCHS
    loss, expected = final_loss(final), single_process_loss(EPOCHS, world)
    print(f"{script}: loss {loss:.6f}, single process {expected:.6f}")
    assert loss == pytest.approx(expected, rel=1e-5)


def test_requeued_job_resumes_from_its_checkpoint(jobs: dict) -> None:
    """The srun job crashed in epoch 2; after `scontrol requeue` every rank resumed at epoch 2."""
    job = jobs["jobs"]["slurm_srun.sbatch"]
    assert job["state"]["Restarts"] == "1", job["state"]
    assert "injected failure: rank 1 dies in epoch 2" in job["output"]
    rows = json_lines(job["output"])
    resumed = [(r["attempt"], r["resumed_at_epoch"]) for r in rows]
    assert resumed == [(1, 2)] * NODES * RANKS_PER_NODE
    assert "restart count 0" in job["output"] and "restart count 1" in job["output"]


def test_nothing_left_running(jobs: dict) -> None:
    """Both jobs ended, the queue was empty, and no daemon or job step outlived the cluster."""
    assert all(job["state"]["JobState"] == "COMPLETED" for job in jobs["jobs"].values())
    assert jobs["queue"].strip() == ""
    assert jobs["left"] == []


def test_a_process_with_a_file_of_the_folder_open_is_found_and_killed(tmp_path: Path) -> None:
    """Named by neither its command line nor its environment, like a job step's slurmstepd, but holding
    a log of the folder open: `kill_left` finds it, ends it and says so."""
    with (tmp_path / "slurmd-node1.log").open("w") as log:
        step = subprocess.Popen([shutil.which("sleep") or "sleep", "60"], stdout=log, env={}, cwd="/")
    try:
        assert kill_left(tmp_path, grace=0.5) == [f"{step.pid}: {step.args[0]} 60"]
        assert step.wait(timeout=10) == -signal.SIGKILL
    finally:
        step.kill()
        step.wait()
