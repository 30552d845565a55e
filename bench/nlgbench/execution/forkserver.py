"""The fork server of a local sweep: one process imports what every cell of the sweep imports (torch,
transformers, the worker's modules) once; each cell then runs in a fresh child forked from it, still
one process per cell, which imports its own cell's rest before its memory baseline.

Why: a fresh `python -c` worker (`nlgbench.execution.workerprocess.worker_command`) spends seconds importing
before it can load a model (results.csv's `startup_s`); a forked child starts with those imports done.

How: the launcher (`ForkServer`, used by `nlgbench.execution.workerprocess.run_worker`) starts the server as
`python -c BOOT PACKAGE_DIR FD PRELOAD` with the cells' environment; the server imports the worker,
the start-up modules every cell imports (`nlgbench.execution.preload.shared_modules`) and the metric's
module where all cells share one (PRELOAD, JSON: `{"modules": [...], "metrics": [...]}`): never a
module only some cells import (an inference backend, an architecture), which the child of the cell
that needs it imports itself, as a plain worker would. Then it talks to the launcher over a socket
pair, one JSON line each way: it sends `{"cell_dir", "started"}`; the server forks a child, answers
`{"pid"}`, waits for the child and answers `{"code"}` (Popen's returncode: -N when signal N killed it).
The child runs the worker's `main` as the plain worker would, then exits with its code.

What a plain worker gives, the forked one keeps:
- One fresh process per cell; the server itself never runs a cell, loads a model or touches a tensor.
- Exit code or signal (so `death_cause` tells SIGKILL, the OOM killer and exit codes apart); where
  the server itself ended first (killed), its code, and the cell's error names the server.
- Parent death: the server gets PR_SET_PDEATHSIG towards the launcher, each child towards the server,
  so killing the sweep kills both. A launcher that stops waiting (Ctrl-C, an error) kills the server.
- Ctrl-C: SIGINT at its default action in the server and its children: the terminal's Ctrl-C ends
  them quietly; the launcher says why.
- The worker's "imported another nlgbench" check: the server exits 3 before forking, and the cell is
  recorded as failed, its fork server having exited with code 3.
- Environment: the server starts with the cells' environment (threads,
  NLGBENCH_PROGRESS: `workerprocess.worker_environment`), so what libraries read while importing is what a
  plain worker's would be; a cell that needs another environment restarts the server.
- Threads: nothing in the server starts torch's thread pools (no torch op before fork: a forked child
  of a process whose OpenMP pool ran deadlocks or runs on one thread); the child sets its threads.
- Memory (`nlgbench.measurement.trackers.MemoryTracker`: baseline RSS after the imports, the RSS
  high-water mark, growth, the peak of the unique set): the server holds only what every cell would
  import alone, so no cell counts a neighbour's libraries. A forked child starts with the server's
  anonymous pages in its RSS (their page tables are copied), but not its file-backed ones (shared
  libraries' code and data, libtorch's among them: the kernel fills those on first touch). So that
  baseline, peak and growth read as a plain worker's, the child first maps the library pages the server
  had resident (`resident_file_ranges`, MADV_POPULATE_READ: Linux 5.14 or later, where
  /proc/self/pagemap is readable; elsewhere baseline and peak read lower by those pages, growth the
  same). Its USS leaves out every page it still shares with the server: the cell's own memory.
- Progress: the server and its children write to the launcher's terminal, as a plain worker does.

Linux only (`enabled`): elsewhere, or with NLGBENCH_FORKSERVER=0, each cell runs in a plain worker.
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import signal
import socket
import subprocess
import sys
import traceback
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, NoReturn

import numpy as np

from nlgbench.execution.preload import import_modules
from nlgbench.foundations.package import PACKAGE_DIR
from nlgbench.metrics import get_metric

FORKSERVER_ENV = "NLGBENCH_FORKSERVER"  # "0": every cell in a plain `python -c` worker
SERVER_MODULE = "nlgbench.execution.forkserver"
WORKER_MODULE = "nlgbench.execution.worker"


def boot(module: str) -> str:
    """The `python -c` code that runs `module` (by name: runpy) as a worker or server: SIGINT at its
    default action (Ctrl-C ends it quietly, no traceback; the parent says why), the current folder
    off the import path (a user's `metrics/` or `bench/` folder can never shadow nlgbench)."""
    return (
        "import signal; signal.signal(signal.SIGINT, signal.SIG_DFL); "
        "import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
        "import runpy, nlgbench; "
        f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
    )


def die_with(parent_pid: int) -> Callable[[], None]:
    """For Popen's preexec_fn, or a forked child: this process gets SIGKILL when its parent dies
    (Linux prctl PR_SET_PDEATHSIG), and exits at once if the parent died before the prctl took effect."""

    def arm() -> None:
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
        except OSError:
            return
        if os.getppid() != parent_pid:
            os._exit(1)

    return arm


MADV_POPULATE_READ = 22  # madvise: fault the range's pages in as reads would (Linux 5.14)


def resident_file_ranges() -> list[tuple[int, int]]:
    """(address, bytes) of every run of this process's readable file-backed pages that its page tables
    hold (the present bit of /proc/self/pagemap); [] where that cannot be read."""
    page = os.sysconf("SC_PAGE_SIZE")
    out: list[tuple[int, int]] = []
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps, open("/proc/self/pagemap", "rb") as pagemap:
            for line in maps:
                fields = line.split()
                if len(fields) < 6 or not fields[5].startswith("/") or not fields[1].startswith("r"):
                    continue
                start, end = (int(x, 16) for x in fields[0].split("-"))
                pagemap.seek(start // page * 8)
                present = (np.frombuffer(pagemap.read((end - start) // page * 8), dtype=np.uint64) >> 63).astype(
                    np.int8
                )
                edges = np.flatnonzero(np.diff(np.concatenate(([0], present, [0]))))
                out += [
                    (start + int(a) * page, int(b - a) * page) for a, b in zip(edges[::2], edges[1::2], strict=True)
                ]
    except (OSError, ValueError):
        return []
    return out


def populate(ranges: Sequence[tuple[int, int]]) -> None:
    """Map `ranges` into this process's page tables (MADV_POPULATE_READ); a range the kernel refuses
    (an older kernel, a mapping gone) is left as it is."""
    try:
        madvise = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    for address, size in ranges:
        madvise(address, size, MADV_POPULATE_READ)


def enabled() -> bool:
    """Whether a local sweep runs its cells through a fork server: on Linux (fork without exec is not
    safe with the system frameworks torch uses on macOS; Windows has no fork), unless
    NLGBENCH_FORKSERVER=0."""
    return sys.platform.startswith("linux") and os.environ.get(FORKSERVER_ENV, "").strip() != "0"


class ForkServer:
    """The launcher's side: starts the server (with the environment of the first cell it is asked
    to run, or at `start`), runs cells in it, stops it at `close` (a `with` block). `modules` and
    `metrics`: what the server imports for all its cells (`preload.shared_modules`, `shared_metrics`)."""

    def __init__(self, modules: Sequence[str] = (), metrics: Sequence[str] = ()) -> None:
        self.preload = {"modules": list(dict.fromkeys(modules)), "metrics": list(dict.fromkeys(metrics))}
        self._proc: subprocess.Popen[bytes] | None = None
        self._conn: socket.socket | None = None
        self._reader: IO[bytes] | None = None
        self._env: dict[str, str] | None = None

    def start(self, env: dict[str, str]) -> None:
        """Start a server (a running one is stopped first) with `env`; it imports in the background."""
        self.close()
        ours, theirs = socket.socketpair()
        with theirs:
            self._proc = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    boot(SERVER_MODULE),
                    str(PACKAGE_DIR),
                    str(theirs.fileno()),
                    json.dumps(self.preload),
                ],
                env=env,
                pass_fds=(theirs.fileno(),),
                preexec_fn=die_with(os.getpid()),
            )
        self._conn, self._reader, self._env = ours, ours.makefile("rb"), dict(env)

    def run(self, cell_dir: Path, env: dict[str, str], started: float) -> tuple[int, bool]:
        """Run the cell prepared in `cell_dir` in a fresh child of the server (started, or restarted,
        for `env`): (exit code as Popen's returncode, whether it is the server's). The child's code,
        or the server's where the server ended first (killed, or failed at its start): the child dies
        with it, and the cell's error must name the server. Whatever interrupts the wait (Ctrl-C)
        kills the server and so the child."""
        if self._proc is None or self._proc.poll() is not None or env != self._env:
            self.start(env)
        try:
            if self._ask({"cell_dir": str(cell_dir), "started": started}) is None:  # the child's pid
                return self._ended(), True
            reply = self._answer()
            return (self._ended(), True) if reply is None else (int(reply["code"]), False)
        except BaseException:
            self.close(kill=True)
            raise

    def _ask(self, request: dict[str, Any]) -> dict[str, Any] | None:
        assert self._conn is not None
        try:
            self._conn.sendall(json.dumps(request).encode() + b"\n")
        except OSError:  # the server has ended
            return None
        return self._answer()

    def _answer(self) -> dict[str, Any] | None:
        """The server's next line, None when it has ended."""
        assert self._reader is not None
        try:
            line = self._reader.readline()
        except OSError:
            return None
        return json.loads(line) if line else None

    def _ended(self) -> int:
        """The exit code of a server that has ended (closing its socket)."""
        assert self._proc is not None
        code = self._proc.wait()
        self.close()
        return code

    def close(self, kill: bool = False) -> None:
        """Stop the server: it ends when its socket closes (`kill`: at once, and its child with it)."""
        if self._reader is not None:
            self._reader.close()
        if self._conn is not None:
            self._conn.close()
        if self._proc is not None:
            if kill:
                self._proc.kill()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc, self._conn, self._reader, self._env = None, None, None, None

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close(kill=kind is not None)


# ----------------------------------------------------------------------------- the server process


def serve(argv: Sequence[str]) -> int:
    """The server: `argv` is PACKAGE_DIR (the parent's), the socket's descriptor and PRELOAD. Imports
    the worker and PRELOAD's modules and metrics (what every cell imports), then forks one child per
    request, one at a time."""
    package, fd, preload = argv
    if PACKAGE_DIR != Path(package):
        print(f"worker imported nlgbench from {PACKAGE_DIR}, not the parent's {package}", file=sys.stderr)
        return 3
    wanted = json.loads(preload)
    importlib.import_module(WORKER_MODULE)  # not skipped when it fails: the server ends, as a worker would
    import_modules(wanted["modules"])
    for metric in wanted["metrics"]:
        try:
            get_metric(metric)
        except Exception:  # the cell meets the same error and records it
            pass
    conn, server, resident = socket.socket(fileno=int(fd)), os.getpid(), resident_file_ranges()
    for line in conn.makefile("rb"):
        request = json.loads(line)
        with warnings.catch_warnings():
            # Python 3.12+ warns of fork in a process with threads: the server's are BLAS pools (numpy's,
            # scipy's OpenBLAS), which stop around a fork (pthread_atfork); torch's OpenMP pool never starts.
            warnings.filterwarnings("ignore", "This process .* is multi-threaded", DeprecationWarning)
            pid = os.fork()
        if pid == 0:
            run_child(int(fd), server, resident, [request["cell_dir"], package, repr(request["started"])])
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        _, status = os.waitpid(pid, 0)
        conn.sendall(json.dumps({"code": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
    return 0


def run_child(fd: int, server: int, resident: Sequence[tuple[int, int]], argv: list[str]) -> NoReturn:
    """A forked child: the library pages the server had resident mapped (`populate`: its RSS then
    reads as a plain worker's), the cell's worker (`worker.main(argv)`), then exit with its code
    (os._exit: the server's exit handlers and buffers are not the child's to run)."""
    code = 1
    try:
        os.close(fd)  # the launcher sees the server end when the server does, not when its last child does
        die_with(server)()
        populate(resident)
        code = sys.modules[WORKER_MODULE].main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1:]))
