"""The bench command line and the loop every routine shares (R4.10-R4.16).

For each ``(case, backend variant)`` a routine yields, :class:`BenchContext` does the same steps:

1. a backend that is not importable (or has no such path) becomes a ``skipped`` row;
2. reference check (on by default): fresh random inputs, the reference computed on them, the
   backend run on a copy (in-place ops), outputs compared with per-dtype tolerances; a failure
   becomes a ``REFCHECK FAILED`` row and is not timed;
3. timing (:mod:`ember.bench.timing` or :mod:`ember.bench.host`) over rotated input sets;
4. a :class:`~ember.bench.report.Row` with the statistics, bandwidth, % of the copy ceiling, the
   mechanism used, and the command that reproduces it.

Any exception in a backend becomes an ``error`` row; the run goes on. The exit status is 0 when no
row failed its check or errored, 1 otherwise, 2 when the bench cannot run at all (no GPU). A
SIGTERM (``timeout``'s signal) stops the run after the case in progress: the rows already measured
are still written and printed, with a note saying the rest were not run, and the status is 1.
"""

from __future__ import annotations

import argparse
import datetime
import logging
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ember.bench import ceilings as ceilings_mod
from ember.bench.case import Case, Impl, Skip, check_outputs, format_shape, tolerances_for
from ember.bench.errors import BenchError, TimingError
from ember.bench.host import HOST_MECHANISM, host_times_interleaved
from ember.bench.report import (
    STATUS_OK,
    STATUS_REFCHECK_FAILED,
    Row,
    append_jsonl,
    comparison_lines,
    mark_best,
    markdown_table,
)
from ember.bench.routines import Routine, all_routines, get_routine, parse_backends
from ember.bench.timing import (
    L2_POLICIES,
    TIMING_CHOICES,
    Measurement,
    TimingConfig,
    cupti_unavailable_reason,
    measure,
    plan_l2,
)
from ember.errors import EmberError

__all__ = [
    "PROG",
    "BenchContext",
    "BenchStopped",
    "Environment",
    "build_parser",
    "collect_rows",
    "main",
    "require_cuda",
]

logger = logging.getLogger(__name__)

#: How every row's reproduce command starts.
PROG = "python -m ember.bench"

_DEFAULT_L2_BYTES = 64 << 20
_ROTATE_CAP_BYTES = 4 << 30
_HOST_DEFAULTS = {"calls": 20_000, "rounds": 5}
_HOST_L2 = "n/a (host time)"

Timer = Callable[..., Measurement]
GroupTimer = Callable[..., dict[Any, Measurement]]


@dataclass(frozen=True)
class Environment:
    """Where a run happens; copied into every row."""

    device: str
    arch: str
    l2_bytes: int
    torch: str
    cuda: str
    ember_commit: str
    date: str
    free_bytes: int
    notes: tuple[str, ...] = ()


def require_cuda() -> Any:
    """torch, once it is known to see a CUDA GPU; :class:`BenchError` ("no CUDA GPU") otherwise."""
    try:
        import torch
    except ImportError as exc:
        raise BenchError(f"no CUDA GPU: torch is not importable ({exc})") from None
    if not torch.cuda.is_available():
        raise BenchError(
            f"no CUDA GPU: torch.cuda.is_available() is False (torch {torch.__version__}, "
            f"CUDA build {torch.version.cuda or 'none'}); the bench times GPU kernels, run it on a "
            "machine with an NVIDIA GPU"
        )
    return torch


def ember_commit() -> str:
    """``EMBER_BENCH_COMMIT`` when set; else ``git rev-parse --short HEAD`` of ember's checkout
    (``-dirty`` if edited), else the version."""
    from ember._version import __version__
    from ember.config import knobs

    if knobs.bench_commit:
        return knobs.bench_commit

    root = Path(__file__).resolve().parents[2]

    def git(*args: str) -> str | None:
        try:
            proc = subprocess.run(
                ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return proc.stdout.strip() if proc.returncode == 0 else None

    top = git("rev-parse", "--show-toplevel")
    commit = git("rev-parse", "--short", "HEAD")
    if not top or Path(top).resolve() != root or not commit:
        return __version__
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return f"{commit}-dirty" if dirty else commit


def detect_environment() -> Environment:
    """Device name, arch, L2 size and free memory of the current CUDA device; versions; now."""
    torch = require_cuda()
    index = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    l2 = int(getattr(props, "L2_cache_size", 0) or 0)
    notes: tuple[str, ...] = ()
    if l2 <= 0:
        l2 = _DEFAULT_L2_BYTES
        notes = (f"torch does not report the L2 size; assumed {l2 >> 20} MiB",)
    free, _total = torch.cuda.mem_get_info(index)
    return Environment(
        device=str(props.name),
        arch=f"sm_{props.major}{props.minor}",
        l2_bytes=l2,
        torch=str(torch.__version__),
        cuda=str(torch.version.cuda or ""),
        ember_commit=ember_commit(),
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        free_bytes=int(free),
        notes=notes,
    )


def resolve_timing(requested: str) -> tuple[str, str]:
    """The mechanism ``auto``/``cupti``/... means here, and a note when ``auto`` fell back."""
    if requested not in ("auto", "cupti"):
        return requested, ""
    reason = cupti_unavailable_reason()
    if reason is None:
        return "cupti", ""
    if requested == "cupti":
        raise BenchError(f"--timing cupti is not usable here: {reason}")
    logger.info("timing with CUDA events: %s", reason)
    return "cuda_event", f"auto timing: CUPTI unavailable ({reason})"


def _one_line(exc: BaseException, limit: int = 300) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    first = text[0] if text else type(exc).__name__
    return first if len(first) <= limit else first[: limit - 3] + "..."


@dataclass
class BenchContext:
    """Runs cases for one routine and turns each into a row.

    Attributes
    ----------
    routine:
        Name of the routine (or ``ceilings``).
    env:
        Device and versions.
    config:
        Warm-up, iterations, graph size, L2 policy.
    mechanism:
        The timing mechanism in use (``auto`` already resolved).
    requested_timing:
        What ``--timing`` asked for; a CUPTI failure falls back to events only under ``auto``.
    refcheck:
        Check every backend against the reference before timing it.
    timer_kind:
        ``device`` or ``host``.
    device:
        Where inputs live (``cuda``; tests use ``cpu`` with a fake timer).
    takes_backends:
        Whether the reproduce command carries ``--backends``.
    ceilings:
        Measured ceilings, for % of copy bandwidth.
    host_calls, host_rounds:
        Host-time settings.
    timer, host_timer:
        The timing functions (:func:`ember.bench.timing.measure`,
        :func:`ember.bench.host.host_times_interleaved`); tests inject fakes.
    notes:
        Notes copied into every row.
    """

    routine: str
    env: Environment
    config: TimingConfig = field(default_factory=TimingConfig)
    mechanism: str = "cuda_event"
    requested_timing: str = "auto"
    refcheck: bool = True
    timer_kind: str = "device"
    device: str = "cuda"
    takes_backends: bool = True
    ceilings: ceilings_mod.Ceilings | None = None
    host_calls: int = _HOST_DEFAULTS["calls"]
    host_rounds: int = _HOST_DEFAULTS["rounds"]
    timer: Timer = measure
    host_timer: GroupTimer = host_times_interleaved
    notes: tuple[str, ...] = ()

    @classmethod
    def from_args(
        cls, routine: Routine | str, args: argparse.Namespace, env: Environment, **overrides: Any
    ) -> BenchContext:
        """A context for parsed command-line arguments (resolves ``--timing auto``)."""
        name = routine if isinstance(routine, str) else routine.name
        timer_kind = "device" if isinstance(routine, str) else routine.timer
        values: dict[str, Any] = {
            "routine": name,
            "env": env,
            "refcheck": not args.no_refcheck,
            "timer_kind": timer_kind,
            "takes_backends": not isinstance(routine, str),
            "notes": env.notes,
        }
        if timer_kind == "device":
            values["config"] = TimingConfig(
                warmup_ms=args.warmup_ms,
                min_iters=args.min_iters,
                budget_ms=args.budget_ms,
                max_iters=args.max_iters,
                graph_calls=args.graph_calls,
                l2=args.l2,
            )
            values["requested_timing"] = args.timing
            if "mechanism" not in overrides:
                mechanism, note = resolve_timing(args.timing)
                values["mechanism"] = mechanism
                values["notes"] = (*env.notes, note) if note else env.notes
        else:
            values["host_calls"], values["host_rounds"] = args.calls, args.rounds
            values["mechanism"] = HOST_MECHANISM
        values.update(overrides)
        return cls(**values)

    # --- one case -----------------------------------------------------------------------------

    def run_case(self, case: Case, impl: Impl | Skip) -> Row:
        """Check, time and describe one backend variant of one case (never raises for it)."""
        if self.timer_kind == "host":
            return self.run_cases([(case, impl)])[0]
        row, where = self._checked(case, impl)
        if row.status != STATUS_OK or isinstance(impl, Skip):
            return row
        try:
            measurement, l2 = self._time(case, impl, row)
        except Exception as exc:
            row.status = f"error: {_one_line(exc)}"
            logger.warning("%s: %s", where, row.status, exc_info=logger.isEnabledFor(logging.DEBUG))
            return row
        finally:
            self._release()
        self._fill(row, case, measurement, l2)
        logger.info(
            "%s: %.2f us%s (%s)",
            where,
            row.median_us,
            f", {row.gbps:.0f} GB/s" if row.gbps else "",
            row.timing,
        )
        return row

    def run_cases(self, pairs: Iterable[tuple[Case, Impl | Skip]]) -> list[Row]:
        """:meth:`run_case` for every pair, in order.

        Host-timed routines time the backends of one case together, their rounds interleaved
        (:func:`ember.bench.host.host_times_interleaved`), so host drift stays out of ratios.
        """
        pairs = list(pairs)
        if self.timer_kind != "host":
            return [self.run_case(case, impl) for case, impl in pairs]
        rows: list[Row] = []
        groups: dict[int, list[tuple[Row, Case, Callable[[], object]]]] = {}
        for case, impl in pairs:
            row, where = self._checked(case, impl)
            rows.append(row)
            if row.status != STATUS_OK or isinstance(impl, Skip):
                continue
            try:
                call = impl.prepare(case.make_inputs())
            except Exception as exc:
                row.status = f"error: {_one_line(exc)}"
                logger.warning("%s: %s", where, row.status)
                continue
            groups.setdefault(id(case), []).append((row, case, call))
        for members in groups.values():
            try:
                got = self.host_timer(
                    {i: call for i, (_, _, call) in enumerate(members)},
                    calls=self.host_calls,
                    rounds=self.host_rounds,
                )
            except Exception as exc:
                for row, _, _ in members:
                    row.status = f"error: {_one_line(exc)}"
                continue
            finally:
                self._release()
            for i, (row, case, _) in enumerate(members):
                self._fill(row, case, got[i], _HOST_L2)
        return rows

    def _checked(self, case: Case, impl: Impl | Skip) -> tuple[Row, str]:
        """A new row for the pair; its status stays ``ok`` only if the backend may be timed."""
        row = self._new_row(case, impl)
        where = f"{case.routine} {row.shape} {case.dtype} {row.label}"
        if isinstance(impl, Skip):
            row.status = ("error: " if impl.error else "skipped: ") + impl.reason
            logger.info("%s: %s", where, row.status)
            return row, where
        try:
            if self.refcheck and not self._refcheck(case, impl, row):
                logger.warning("%s: %s: %s", where, row.status, "; ".join(row.notes))
        except Exception as exc:
            row.status = f"error: {_one_line(exc)}"
            logger.warning("%s: %s", where, row.status, exc_info=logger.isEnabledFor(logging.DEBUG))
        finally:
            self._release()  # NOTE: the reference's tensors go before anything is timed
        return row, where

    def _new_row(self, case: Case, impl: Impl | Skip) -> Row:
        env = self.env
        row = Row(
            routine=case.routine,
            backend=impl.backend,
            variant=impl.variant,
            shape=format_shape(case.shape),
            dtype=case.dtype,
            bytes=case.nbytes,
            flops=case.flops,
            refcheck="n/a" if self.refcheck else "off",
            arch=env.arch,
            device=env.device,
            torch=env.torch,
            cuda=env.cuda,
            ember_commit=env.ember_commit,
            date=env.date,
            params=dict(case.params),
            notes=list(self.notes),
        )
        if isinstance(impl, Impl):
            row.backend_version = impl.version
        row.build = _build_switches() if impl.backend == "ember" else ""
        row.cmd = self.reproduce(case, impl.backend, impl.variant, self.mechanism)
        return row

    def _refcheck(self, case: Case, impl: Impl, row: Row) -> bool:
        inputs = case.make_inputs()
        expected = (impl.reference or case.reference)(inputs)
        # NOTE: the backend runs on a copy, so in-place ops leave the reference's inputs intact
        # and no rotated set is ever reused for checking.
        work = {k: v.clone() if hasattr(v, "clone") else v for k, v in inputs.items()}
        got = case.outputs(work, impl.prepare(work)())
        if case.tolerance is not None:
            rtol, atol = case.tolerance
            source = "case"
        else:
            rtol, atol, source = tolerances_for(case.dtype)
        check = check_outputs(got, expected, rtol=rtol, atol=atol)
        row.reference = "backend-specific" if impl.reference else case.reference_source
        row.tolerance = [rtol, atol]
        row.ref_max_abs_err = check.max_abs_err
        row.ref_rel_l2_err = check.rel_l2_err
        if source != "ember.testing.tolerances":
            row.notes.append(f"tolerances: {source}")
        if check.passed:
            row.refcheck = "passed"
            return True
        row.refcheck = "failed"
        row.status = STATUS_REFCHECK_FAILED
        row.notes.append(check.detail)
        return False

    def _time(self, case: Case, impl: Impl, row: Row) -> tuple[Measurement, str]:
        cap = min(_ROTATE_CAP_BYTES, self.env.free_bytes // 4)
        plan = plan_l2(case.nbytes or 0, self.env.l2_bytes, policy=self.config.l2, cap_bytes=cap)
        calls = [impl.prepare(case.make_inputs()) for _ in range(plan.sets)]
        kwargs = {"config": self.config, "flush_bytes": plan.flush_bytes}
        try:
            m = self.timer(calls, mechanism=self.mechanism, **kwargs)
        except TimingError as exc:
            if not (self.mechanism == "cupti" and self.requested_timing == "auto"):
                raise
            row.notes.append(f"CUPTI failed ({exc}); timed with cuda_event instead")
            m = self.timer(calls, mechanism="cuda_event", **kwargs)
        label = plan.label
        if plan.flush_bytes and m.mechanism == "cuda_graph":
            label += " (once per graph replay)"
        return m, label

    def _fill(self, row: Row, case: Case, m: Measurement, l2: str) -> None:
        s = m.stats
        row.timing, row.timing_detail, row.l2 = m.mechanism, m.detail, l2
        row.median_us, row.std_us, row.min_us, row.iters = s.median_us, s.std_us, s.min_us, s.iters
        if m.mechanism != HOST_MECHANISM and s.median_us > 0:
            if case.nbytes:
                row.gbps = case.nbytes / s.median_us / 1e3
                if self.ceilings is not None:
                    row.pct_of_copy_ceiling = 100.0 * row.gbps / self.ceilings.copy_gbps
            if case.flops:
                row.tflops = case.flops / s.median_us / 1e6
        row.cmd = self.reproduce(case, row.backend, row.variant, m.mechanism)

    def _release(self) -> None:
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.empty_cache()

    # --- reproduce command --------------------------------------------------------------------

    def reproduce(self, case: Case, backend: str, variant: str, mechanism: str) -> str:
        """The command line that reruns exactly this case and backend variant."""
        parts = [*PROG.split(), case.routine]
        if self.takes_backends:
            parts += ["--backends", f"{backend}[{variant}]"]
        parts += case.cli
        if self.timer_kind == "host":
            for name, default in _HOST_DEFAULTS.items():
                value = getattr(self, f"host_{name}")
                if value != default:
                    parts += [f"--{name}", str(value)]
        else:
            parts += ["--timing", mechanism]
            defaults = TimingConfig()
            for name in ("warmup_ms", "min_iters", "budget_ms", "max_iters", "graph_calls", "l2"):
                value = getattr(self.config, name)
                if value != getattr(defaults, name):
                    parts += ["--" + name.replace("_", "-"), str(value)]
        if not self.refcheck:
            parts.append("--no-refcheck")
        build = _build_switches() if backend == "ember" else ""
        prefix = f"EMBER_EXTRA_CUDA_FLAGS={shlex.quote(build)} " if build else ""
        return prefix + shlex.join(parts)


def _build_switches() -> str:
    """The non-default build switches of ember's kernels in this process (R4.16: a row names
    the build it timed)."""
    from ember.config import knobs

    return " ".join(knobs.extra_cuda_flags)


# --- command line --------------------------------------------------------------------------------


def _positive(kind: type[int] | type[float]) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
        return value

    return convert


def _output_options() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("output and checking")
    g.add_argument("--out", type=Path, default=None, help="append rows to this JSONL file")
    g.add_argument(
        "--no-refcheck",
        action="store_true",
        help="skip the reference check (recorded in every row; no speed claim without it)",
    )
    g.add_argument(
        "-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help="no progress logs"
    )
    return p


def _device_options() -> argparse.ArgumentParser:
    d = TimingConfig()
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("GPU timing")
    g.add_argument(
        "--timing",
        choices=TIMING_CHOICES,
        default="auto",
        help="auto = cupti when cupti-python works, else cuda_event (default auto)",
    )
    g.add_argument(
        "--l2",
        choices=L2_POLICIES,
        default=d.l2,
        help="cold: rotate input sets over 3x L2 (or flush 2x L2); warm: one set (default cold)",
    )
    g.add_argument("--warmup-ms", type=_positive(float), default=d.warmup_ms, metavar="MS")
    g.add_argument("--min-iters", type=_positive(int), default=d.min_iters, metavar="N")
    g.add_argument("--budget-ms", type=_positive(float), default=d.budget_ms, metavar="MS")
    g.add_argument("--max-iters", type=_positive(int), default=d.max_iters, metavar="N")
    g.add_argument(
        "--graph-calls",
        type=_positive(int),
        default=d.graph_calls,
        metavar="N",
        help=f"calls captured per CUDA graph with --timing cuda_graph (default {d.graph_calls})",
    )
    return p


def _host_options() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("host timing")
    g.add_argument(
        "--calls", type=_positive(int), default=_HOST_DEFAULTS["calls"], help="calls per round"
    )
    g.add_argument("--rounds", type=_positive(int), default=_HOST_DEFAULTS["rounds"])
    return p


def _backends_type(known: Mapping[str, Sequence[str]]) -> Callable[[str], Any]:
    def convert(text: str) -> list[tuple[str, str | None]]:
        try:
            return parse_backends(text, known)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


_EPILOG = """\
examples:
  python -m ember.bench rmsnorm --backends ember,torch,torch_compile,flashinfer,liger
  python -m ember.bench rmsnorm --shapes 128x4096 --timing cuda_graph --out results.jsonl
  python -m ember.bench fused_add_rmsnorm --dtypes bf16,fp16 --backends ember,flashinfer[pdl]
  python -m ember.bench host            # host time per eager call
  python -m ember.bench ceilings --remeasure
"""


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    """The bench's argument parser: one subcommand per routine, plus ``ceilings``."""
    p = argparse.ArgumentParser(
        prog=prog,
        description="ember's benchmark harness: routines x backends, reference-checked, with "
        "the timing mechanism and a reproduce command in every row.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress logs")
    sub = p.add_subparsers(dest="routine", required=True, metavar="ROUTINE")
    output, device, host = _output_options(), _device_options(), _host_options()
    for r in all_routines():
        known = ", ".join(
            name + (f"[{'|'.join(v)}]" if len(v) > 1 else "") for name, v in r.backends.items()
        )
        sp = sub.add_parser(
            r.name,
            help=r.help,
            description=r.help,
            parents=[output, device if r.timer == "device" else host],
        )
        sp.add_argument(
            "--backends",
            type=_backends_type(r.backends),
            default=None,
            metavar="LIST",
            help=f"comma-separated name or name[variant]; a bare name runs every variant "
            f"(default: all of {known})",
        )
        r.add_arguments(sp)
    cp = sub.add_parser(
        ceilings_mod.CEILINGS,
        help="device-to-device copy GB/s and bf16 GEMM TFLOP/s, cached per device",
        parents=[output, device],
    )
    cp.add_argument("--remeasure", action="store_true", help="measure even when cached")
    return p


# --- running -------------------------------------------------------------------------------------


def _ceilings_for(
    env: Environment, args: argparse.Namespace, *, remeasure: bool
) -> tuple[ceilings_mod.Ceilings | None, list[Row], BenchContext | None]:
    if not remeasure:
        cached = ceilings_mod.load_ceilings(env.device)
        if cached is not None:
            return cached, [], None
    # NOTE: a copy and a GEMM are single large launches: graph replay adds nothing there.
    timing = "cuda_event" if args.timing == "cuda_graph" else args.timing
    mechanism, note = resolve_timing(timing)
    ctx = BenchContext.from_args(
        ceilings_mod.CEILINGS,
        args,
        env,
        mechanism=mechanism,
        notes=(*env.notes, note) if note else env.notes,
    )
    logger.info("measuring ceilings on %s (copy bandwidth, bf16 GEMM)", env.device)
    measured, rows = ceilings_mod.measure_ceilings(ctx)
    if measured is not None:
        path = ceilings_mod.save_ceilings(measured)
        logger.info(
            "ceilings: copy %.0f GB/s, bf16 GEMM %.0f TFLOP/s (cached in %s)",
            measured.copy_gbps,
            measured.gemm_bf16_tflops,
            path,
        )
    return measured, rows, ctx


class BenchStopped(BaseException):
    """Raised by the SIGTERM handler :func:`collect_rows` installs. A ``BaseException``, so the
    per-backend ``except Exception`` that turns failures into error rows lets it through."""


@contextmanager
def _stop_on_sigterm() -> Iterator[None]:
    def stop(signum: int, frame: object) -> None:
        raise BenchStopped(signal.Signals(signum).name)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def collect_rows(
    ctx: BenchContext, pairs: Iterable[tuple[Case, Impl | Skip]]
) -> tuple[list[Row], bool]:
    """Run every pair, keeping each row as it completes; ``(rows, stopped)``.

    A SIGTERM (``timeout``'s signal, on a device call that ran out of time) ends the run after the
    case in progress is abandoned: the rows measured before it are returned with ``stopped`` set,
    so they are still written rather than lost with the process. Host-timed routines time a case's
    backends together, so their rows arrive a case at a time.
    """
    rows: list[Row] = []
    with _stop_on_sigterm():
        try:
            if ctx.timer_kind == "host":
                rows.extend(ctx.run_cases(pairs))
            else:
                for case, impl in pairs:
                    rows.append(ctx.run_case(case, impl))
        except BenchStopped:
            return rows, True
    return rows, False


def _header(title: str, ctx: BenchContext) -> str:
    env, c = ctx.env, ctx.ceilings
    ceil = (
        f"copy ceiling {c.copy_gbps:.0f} GB/s, bf16 GEMM {c.gemm_bf16_tflops:.0f} TFLOP/s "
        f"(measured {c.measured_at})"
        if c
        else "ceilings not measured"
    )
    lines = [
        f"## ember bench {title}: {env.device} ({env.arch})",
        "",
        f"torch {env.torch}, CUDA {env.cuda}, ember {env.ember_commit}, {env.date}; "
        f"timing {ctx.mechanism}; L2 {env.l2_bytes / (1 << 20):.0f} MiB; {ceil}; "
        f"reference check {'on' if ctx.refcheck else 'OFF'}",
    ]
    lines += [f"note: {n}" for n in ctx.notes if n]
    return "\n".join(lines) + "\n"


def _finish(title: str, ctx: BenchContext, rows: list[Row], out: Path | None) -> int:
    mark_best(rows)
    if out is not None:
        n = append_jsonl(rows, out)
        logger.info("appended %d row(s) to %s", n, out)
    print(_header(title, ctx))
    print(markdown_table(rows))
    lines = comparison_lines(rows)
    if lines and ctx.takes_backends:
        print("ember against the best peer, per workload (time ratio < 1 means ember is faster):")
        print("\n".join(lines))
    failed = [r for r in rows if r.status == STATUS_REFCHECK_FAILED or r.status.startswith("error")]
    if failed:
        print(f"\n{len(failed)} row(s) failed or errored; see status and notes", file=sys.stderr)
    return 1 if failed else 0


def run_routine(routine: Routine, args: argparse.Namespace) -> int:
    """Run one routine on the GPU and report; the exit status."""
    env = detect_environment()
    ctx = BenchContext.from_args(routine, args, env)
    if routine.timer == "device":
        ctx.ceilings, _, _ = _ceilings_for(env, args, remeasure=False)
    rows, stopped = collect_rows(ctx, routine.run(ctx, args))
    if stopped:
        ctx.notes = (
            *ctx.notes,
            f"stopped by SIGTERM after {len(rows)} row(s): the remaining cases were not run",
        )
    status = _finish(routine.name, ctx, rows, args.out)
    return 1 if stopped else status


def run_ceilings(args: argparse.Namespace) -> int:
    """``ceilings``: print the cached ceilings, or measure (and cache) them."""
    env = detect_environment()
    measured, rows, ctx = _ceilings_for(env, args, remeasure=args.remeasure)
    if ctx is None and measured is not None:
        print(
            f"{env.device}: copy {measured.copy_gbps:.0f} GB/s, bf16 GEMM "
            f"{measured.gemm_bf16_tflops:.0f} TFLOP/s (measured {measured.measured_at}; cached in "
            f"{ceilings_mod.ceilings_path()}; --remeasure to measure again)"
        )
        return 0
    if ctx is None:
        raise BenchError("no ceilings cached and none measured")
    ctx.ceilings = measured
    return _finish(ceilings_mod.CEILINGS, ctx, rows, args.out)


def main(argv: Sequence[str] | None = None, *, prog: str = PROG) -> int:
    """Entry point of ``python -m ember.bench`` and ``ember bench``; the exit status."""
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    logging.getLogger("ember").setLevel(logging.WARNING if args.quiet else logging.INFO)
    try:
        if args.routine == ceilings_mod.CEILINGS:
            return run_ceilings(args)
        return run_routine(get_routine(args.routine), args)
    except EmberError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
