"""Running ninja: memory-bounded parallelism (R1.11, R1.12) and compiler errors worth reading."""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from ember.config import knobs
from ember.errors import CompileError, ToolchainError

__all__ = ["available_memory_gb", "ninja_path", "plan_parallelism", "run_ninja"]

logger = logging.getLogger("ember.jit")

_ERROR_RE = re.compile(r"(\berror\b|\bError\b|undefined reference|fatal)", re.IGNORECASE)


def available_memory_gb() -> float:
    """``MemAvailable`` from /proc/meminfo in GiB (falls back to total physical memory)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / (1 << 20)
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / (1 << 30)


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def plan_parallelism(units: int, threads: int) -> int:
    """Ninja jobs so that jobs x compiler threads x per-thread estimate <= available memory."""
    avail = available_memory_gb()
    per_thread = knobs.compile_mem_gb
    mem_jobs = max(1, int(avail // (threads * per_thread)))
    explicit = knobs.max_jobs
    jobs = explicit if explicit is not None else max(1, min(_cpu_count(), mem_jobs, units))
    if explicit is not None and explicit > mem_jobs:
        logger.warning(
            "EMBER_MAX_JOBS=%d exceeds the memory bound %d (%.1f GiB available / (%d threads x "
            "%.1f GiB)); compiles may be OOM-killed",
            explicit, mem_jobs, avail, threads, per_thread,
        )  # fmt: skip
    logger.info(
        "compile parallelism: jobs=%d x threads=%d x %.1f GiB/thread <= %.1f GiB available "
        "(cpus=%d, units=%d)",
        jobs, threads, per_thread, avail, _cpu_count(), units,
    )  # fmt: skip
    return jobs


def module_parallelism(units: int = 2) -> int:
    """Modules to build at once (:func:`ember.jit.build.build_many`): each runs its own ninja over
    ~``units`` compile units, so together they stay within the CPUs, ``EMBER_MAX_JOBS`` and the
    memory bound that :func:`plan_parallelism` keeps for one: its job count with as many units as
    CPUs, shared out."""
    total = plan_parallelism(units=_cpu_count(), threads=knobs.nvcc_threads)
    return max(1, total // max(1, units))


def ninja_path() -> str:
    """The ninja executable (from PATH, else the `ninja` wheel)."""
    found = shutil.which("ninja")
    if found:
        return found
    try:
        import ninja

        return str(Path(ninja.BIN_DIR) / "ninja")
    except (ImportError, AttributeError):
        raise ToolchainError("ninja not found; pip install ninja") from None


def run_ninja(uri: str, build_dir: Path, jobs: int) -> None:
    """Run ninja in ``build_dir``; output goes to build.log (and stderr when verbose)."""
    verbose = knobs.jit_verbose
    cmd = [ninja_path(), "-C", str(build_dir), "-j", str(jobs), *(["-v"] if verbose else [])]
    log_lines: list[str] = []
    with subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            log_lines.append(line)
            if verbose:
                sys.stderr.write(line)
        returncode = proc.wait()
    (build_dir / "build.log").write_text("".join(log_lines), encoding="utf-8")
    if returncode != 0:
        command, errors = _parse_failure(log_lines)
        raise CompileError(
            uri, command=command, returncode=returncode, errors=errors, build_dir=build_dir
        )


def _parse_failure(lines: list[str]) -> tuple[str, list[str]]:
    """The failing command (the line after ninja's ``FAILED:``) and the first error lines."""
    command = " ".join(lines[0].split()) if lines else "ninja"
    for i, line in enumerate(lines):
        if line.startswith("FAILED:") and i + 1 < len(lines):
            command = lines[i + 1].strip()
            break
    errors = [
        line.rstrip()
        for line in lines
        if _ERROR_RE.search(line)
        and not line.startswith(("FAILED:", "ninja:"))
        and line.strip() != command
    ]
    return command, errors[:10]
