"""The ``ember`` command: ``env``, ``doctor``, ``cache``, ``precompile``, ``aot``, ``artifacts``,
``bench``, ``replay``.

Everything here prints; library code logs. Each subcommand returns an exit status.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.metadata
import logging
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ember._version import __version__
from ember.config import knobs
from ember.errors import EmberError, UnsupportedError

__all__ = ["main"]


def _dist_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _compiler_version(get: Callable[[], Path]) -> str:
    from ember.jit.toolchain import probe_version

    try:
        exe = get()
        return f"{probe_version(exe)} ({exe})"
    except EmberError as exc:
        return f"unavailable: {exc}"


def _driver_version() -> str:
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return "no CUDA driver"
    v = ctypes.c_int(0)
    if cuda.cuDriverGetVersion(ctypes.byref(v)) != 0:
        return "unknown"
    return f"{v.value // 1000}.{(v.value % 1000) // 10}"


def cmd_env(args: argparse.Namespace) -> int:
    from ember.jit.arch import detect_gpu_archs
    from ember.jit.toolchain import CudaToolchain
    from ember.jit.workspace import PACKAGE_DIR, Workspace

    tc = CudaToolchain()
    rows = [
        ("ember", f"{__version__} ({PACKAGE_DIR})"),
        ("python", f"{platform.python_version()} ({sys.executable})"),
        ("torch", _dist_version("torch")),
        ("apache-tvm-ffi", _dist_version("apache-tvm-ffi")),
        ("nvcc", _compiler_version(tc.nvcc)),
        ("c++", _compiler_version(tc.cxx)),
        ("CUDA driver", _driver_version()),
        ("GPUs (arch)", ", ".join(map(str, detect_gpu_archs())) or "none detected"),
        ("cache dir", str(Workspace.current().root)),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    print("\nknobs in effect:")
    for env, (_name, value, source) in knobs.snapshot().items():
        print(f"  {env:<26} {value!s:<40} ({source})")
    return 0


def _doctor_cache_writable() -> str:
    from ember.jit.workspace import Workspace

    root = Workspace.current().root
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=root, prefix=".doctor-"):
        pass
    return str(root)


def _doctor_host_module() -> str:
    import numpy as np

    from ember.jit import build_and_load
    from ember.ops import toy

    t0 = time.perf_counter()
    mod = build_and_load(toy.host_spec())
    a = np.arange(8, dtype=np.float32)
    out = np.full(8, np.nan, dtype=np.float32)
    mod.axpy(a, a, 2.0, out)
    if not np.array_equal(out, 3 * a):
        raise EmberError(f"toy host module computed {out}, expected {3 * a}")
    return f"built, loaded and computed correctly in {time.perf_counter() - t0:.2f} s"


def _doctor_cuda_module() -> str:
    from ember.jit import ArchContext, build_and_load
    from ember.ops import toy

    ctx = ArchContext.current()
    if not ctx.requested:
        return "skipped: no GPU detected and EMBER_CUDA_ARCH_LIST not set"
    t0 = time.perf_counter()
    build_and_load(toy.cuda_spec())
    archs = ", ".join(map(str, ctx.requested))
    return f"compiled and loaded for [{archs}] in {time.perf_counter() - t0:.2f} s"


def cmd_doctor(args: argparse.Namespace) -> int:
    from ember.jit.arch import detect_gpu_archs
    from ember.jit.ninja import ninja_path
    from ember.jit.toolchain import CudaToolchain, HostToolchain, probe_version

    problems: list[str] = []

    def check(name: str, fn: Callable[[], object]) -> None:
        try:
            print(f"[ ok ] {name}: {fn()}")
        except Exception as exc:
            problems.append(f"{name}: {exc}")
            print(f"[FAIL] {name}: {exc}")

    check("ninja", ninja_path)
    check("c++", lambda: probe_version(HostToolchain().cxx()))
    check("cache dir writable", _doctor_cache_writable)
    check("host module", _doctor_host_module)
    try:
        nvcc = CudaToolchain().nvcc()
    except EmberError as exc:
        print(f"[warn] nvcc: {exc} (CUDA modules cannot be compiled here)")
    else:
        check("nvcc", lambda: probe_version(nvcc))
        check("CUDA module", _doctor_cuda_module)
    gpus = detect_gpu_archs()
    print(f"[info] GPUs: {', '.join(map(str, gpus)) if gpus else 'none detected'}")
    if problems:
        print(f"\nember doctor found {len(problems)} problem(s):", file=sys.stderr)
        for p in problems:
            print(f"  - {p}", file=sys.stderr)
        return 1
    print("\nember doctor: all checks passed")
    return 0


def _entries() -> list[Path]:
    from ember.jit.workspace import Workspace

    jit = Workspace.current().root / "jit"
    if not jit.is_dir():
        return []
    return sorted(
        e
        for d in jit.iterdir()
        if d.is_dir()
        for e in d.iterdir()
        if e.is_dir() and not e.name.startswith(".")
    )


def _entry_status(entry: Path) -> str:
    from ember.jit import entry as entry_mod

    meta = entry_mod.read_metadata(entry)
    if meta is None:
        return "broken"
    if entry_mod.validate(entry, entry.name, log_problems=False) is None:
        return "invalid"
    if meta.get("inputs", {}).get("ember") != __version__:
        return "stale"
    return "ok"


def cmd_cache_list(args: argparse.Namespace) -> int:
    from ember.jit import entry as entry_mod

    entries = _entries()
    if not entries:
        print("cache is empty")
        return 0
    print(f"{'uri':<32} {'key':<16} {'targets':<14} {'status':<8} {'size':>9}  built")
    for e in entries:
        meta = entry_mod.read_metadata(e) or {}
        targets = ",".join(meta.get("inputs", {}).get("targets", [])) or "host"
        size = sum(f.stat().st_size for f in e.iterdir() if f.is_file())
        status = _entry_status(e)
        print(
            f"{e.parent.name:<32} {e.name[:16]:<16} {targets:<14} {status:<8} "
            f"{size / 1024:>7.0f}KB  {meta.get('built_at', '?')}"
        )
    return 0


def cmd_cache_inspect(args: argparse.Namespace) -> int:
    from ember.jit.workspace import Workspace

    ws = Workspace.current()
    entries = [
        e for e in _entries() if e.parent.name == args.uri and e.name.startswith(args.key or "")
    ]
    if not entries:
        print(f"no cache entry for uri {args.uri!r} under {ws.root / 'jit'}", file=sys.stderr)
        return 1
    gen = ws.generated_dir(args.uri)
    for e in entries:
        print(f"=== {args.uri} / {e.name}  [{_entry_status(e)}]")
        print(f"--- generated sources ({gen}):")
        files = sorted(p for p in gen.rglob("*") if p.is_file()) if gen.is_dir() else []
        for p in files:
            print(f"# {p}\n{p.read_text(errors='replace')}")
        if not files:
            print("(none: this module compiles package sources directly; see build.ninja)")
        for name in ("build.ninja", "metadata.json"):
            path = e / name
            print(f"--- {name} ({path}):")
            print(path.read_text(errors="replace") if path.is_file() else "(missing)")
        print("--- module:")
        for so in sorted(e.glob("*.so")):
            print(f"{so}  {so.stat().st_size} bytes")
        log = e / "build.log"
        if log.is_file():
            print(f"--- build.log ({log}):\n{log.read_text(errors='replace')}")
    return 0


def cmd_cache_clear(args: argparse.Namespace) -> int:
    from ember.jit import entry as entry_mod
    from ember.jit.workspace import Workspace

    root = Workspace.current().root
    if not args.stale:
        removed = 0
        for name in ("jit", "generated", "locks", "toolchains.json"):
            p = root / name
            if p.is_dir():
                shutil.rmtree(p)
                removed += 1
            elif p.exists():
                p.unlink()
                removed += 1
        print(f"cleared {root}" if removed else f"nothing to clear under {root}")
        return 0
    removed_paths: list[Path] = []
    jit = root / "jit"
    for d in jit.iterdir() if jit.is_dir() else []:
        removed_paths += entry_mod.remove_dead_staging(d)
        for junk in [*d.glob(".failed-*"), *d.glob(".trash-*")]:
            shutil.rmtree(junk, ignore_errors=True)
            removed_paths.append(junk)
    for e in _entries():
        if _entry_status(e) != "ok":
            shutil.rmtree(e, ignore_errors=True)
            removed_paths.append(e)
    for p in removed_paths:
        print(f"removed {p}")
    print(f"removed {len(removed_paths)} stale item(s) under {root}")
    return 0


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def cmd_precompile(args: argparse.Namespace) -> int:
    from ember.jit import KernelSpec, Resolved, all_specs, build_many, resolve

    if args.arch:
        knobs.cuda_arch_list = tuple(args.arch.replace(",", " ").split())
    specs = all_specs(args.ops)
    if not specs:
        print(f"no registered spec matches {args.ops!r}", file=sys.stderr)
        return 1
    cached: dict[str, bool] = {}
    items: list[KernelSpec | Resolved] = []  # resolved once: build_many takes a Resolved as it is
    for spec in specs:
        try:
            r = resolve(spec)
        except EmberError:  # build_many resolves it again and reports the error
            items.append(spec)
            continue
        cached[spec.uri] = r.entry is not None and (r.entry / "metadata.json").is_file()
        items.append(r)
    order = {spec.uri: i for i, spec in enumerate(specs, 1)}
    failed = 0

    def report(spec: Any, out: Path | EmberError, seconds: float) -> None:
        nonlocal failed
        prefix = f"[{order[spec.uri]}/{len(specs)}] {spec.uri}"
        if isinstance(out, UnsupportedError):
            print(f"{prefix}: skipped ({out})", flush=True)
        elif isinstance(out, EmberError):
            failed += 1
            print(f"{prefix}: FAILED\n{out}", flush=True)
        else:
            how = "cached" if cached.get(spec.uri) else "built"
            print(f"{prefix}: {how} in {seconds:.2f} s", flush=True)

    t_all = time.perf_counter()
    build_many(items, jobs=args.jobs, report=report)
    seconds = time.perf_counter() - t_all
    print(f"precompiled {len(specs) - failed}/{len(specs)} module(s) in {seconds:.1f} s")
    return 1 if failed else 0


def cmd_aot_build(args: argparse.Namespace) -> int:
    from ember.jit.aot import aot_build

    manifest = aot_build(Path(args.out), args.arch, args.ops, report=print)
    print(
        f"wrote {len(manifest['modules'])} module(s) for [{' '.join(manifest['archs'])}] "
        f"({len(manifest['skipped'])} skipped) and manifest.json to {Path(args.out).resolve()}"
    )
    if args.wheel:
        print(f"wrote {_wheel(Path(args.out), Path(args.wheel))}")
    return 0


def _wheel(tree: Path, out: Path) -> Path:
    from ember.jit.aot import package_wheel

    return package_wheel(tree, out)


def cmd_aot_package(args: argparse.Namespace) -> int:
    print(f"wrote {_wheel(Path(args.tree), Path(args.out))}")
    return 0


def cmd_artifacts_fetch(args: argparse.Namespace) -> int:
    from ember.jit.artifacts import fetch

    if args.url:
        knobs.artifact_url = args.url
    archs = args.arch.replace(",", " ").split() if args.arch else knobs.cuda_arch_list
    if archs is None:
        from ember.jit.arch import detect_gpu_archs

        archs = tuple(map(str, detect_gpu_archs())) or None
    dirs = fetch(args.ops, archs)
    for d in dirs:
        print(d)
    print(f"{len(dirs)} module(s) present and verified")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from ember.bench import main as bench_main

    quiet = ["-q"] if args.quiet else []
    return bench_main([*quiet, *args.bench_argv], prog="ember bench")


def cmd_replay(args: argparse.Namespace) -> int:
    from ember.api_dump import replay

    return replay(Path(args.dump), device=args.device, rtol=args.rtol, atol=args.atol)


def cmd_trace_generate(args: argparse.Namespace) -> int:
    """Write one flashinfer-bench definition per (public op, example) to ``--out`` (R3.16)."""
    from ember.trace import write_definitions

    written = write_definitions(args.out)
    for stale in sorted(set(args.out.glob("*.json")) - set(written)):
        stale.unlink()
        print(f"removed {stale} (no template generates it)")
    print(f"wrote {len(written)} definitions to {args.out}")
    return 0


def cmd_trace_check(args: argparse.Namespace) -> int:
    """Exit 1, listing why, when a template or a committed definition is out of sync (R8.11)."""
    from ember.trace.check import trace_problems

    problems = trace_problems(args.dir)
    for line in problems:
        print(line)
    print(f"{len(problems)} problem(s)" if problems else "trace templates and definitions agree")
    return 1 if problems else 0


def _split_bench(argv: Sequence[str]) -> tuple[list[str], list[str]] | None:
    """``(ember options + ["bench"], bench argv)`` when the subcommand is ``bench``, else None.

    Top-level options take no value, so the first word not starting with ``-`` is the subcommand.
    """
    for i, word in enumerate(argv):
        if not word.startswith("-"):
            return ([*argv[:i], word], list(argv[i + 1 :])) if word == "bench" else None
    return None


def _add_trace_parser(sub: Any) -> None:
    """``ember trace generate|check`` (R3.16, R8.11)."""
    tr = sub.add_parser("trace", help="trace templates and flashinfer-bench definitions")
    tsub = tr.add_subparsers(dest="trace_command", required=True)
    tg = tsub.add_parser("generate", help="write definitions/<name>.json for every public op")
    tg.add_argument("--out", type=Path, default=Path("definitions"), help="default: definitions")
    tg.set_defaults(fn=cmd_trace_generate)
    tc = tsub.add_parser("check", help="templates agree with the API; definitions are current")
    tc.add_argument("--dir", type=Path, default=Path("definitions"), help="default: definitions")
    tc.set_defaults(fn=cmd_trace_check)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ember", description=__doc__)
    p.add_argument("--version", action="version", version=f"ember {__version__}")
    p.add_argument("-q", "--quiet", action="store_true", help="hide ember.jit INFO logs")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("env", help="versions, GPUs, knobs in effect, cache dir").set_defaults(
        fn=cmd_env
    )
    sub.add_parser("doctor", help="check toolchains, cache, and build a tiny module").set_defaults(
        fn=cmd_doctor
    )
    cache = sub.add_parser("cache", help="list, inspect or clear the JIT cache")
    csub = cache.add_subparsers(dest="cache_command", required=True)
    csub.add_parser("list", help="every cache entry").set_defaults(fn=cmd_cache_list)
    ins = csub.add_parser(
        "inspect", help="generated sources, manifest, module and metadata (R6.11)"
    )
    ins.add_argument("uri")
    ins.add_argument("--key", default="", help="key prefix, when several entries exist")
    ins.set_defaults(fn=cmd_cache_inspect)
    clr = csub.add_parser("clear", help="remove the cache (or with --stale only what is stale)")
    clr.add_argument(
        "--stale", action="store_true", help="only dead builds, broken and old-version entries"
    )
    clr.set_defaults(fn=cmd_cache_clear)
    pre = sub.add_parser("precompile", help="build every registered spec matching --ops")
    pre.add_argument("--ops", default=None, help="glob over uris or families, e.g. 'toy*'")
    pre.add_argument("--arch", default=None, help="target list, e.g. '9.0a' or '8.0 9.0a'")
    pre.add_argument(
        "--jobs",
        type=_positive_int,
        default=None,
        help="modules built at once (default: CPUs and memory allow, EMBER_MAX_JOBS caps it)",
    )
    pre.set_defaults(fn=cmd_precompile)
    aot = sub.add_parser("aot", help="prebuilt trees and packages for an explicit GPU list")
    asub = aot.add_subparsers(dest="aot_command", required=True)
    ab = asub.add_parser("build", help="build registered specs for --arch into a prebuilt tree")
    ab.add_argument("--arch", default=None, help="required target list, e.g. '8.0 9.0a'")
    ab.add_argument("--ops", default=None, help="glob over uris or families (default: all)")
    ab.add_argument("--out", required=True, help="new directory for the tree + manifest.json")
    ab.add_argument("--wheel", default=None, help="also write the ember-prebuilt wheel here")
    ab.set_defaults(fn=cmd_aot_build)
    ap = asub.add_parser("package", help="pack a prebuilt tree as the ember-prebuilt wheel")
    ap.add_argument("tree", help="a directory written by `ember aot build`")
    ap.add_argument("--out", required=True, help="directory for the .whl")
    ap.set_defaults(fn=cmd_aot_package)
    art = sub.add_parser("artifacts", help="the prebuilt artifact repository (EMBER_ARTIFACT_URL)")
    rsub = art.add_subparsers(dest="artifacts_command", required=True)
    fe = rsub.add_parser("fetch", help="download and verify prebuilt modules into the cache")
    fe.add_argument("--ops", default=None, help="glob over uris or families (default: all)")
    fe.add_argument(
        "--arch", default=None, help="targets to cover (default: EMBER_CUDA_ARCH_LIST or GPUs)"
    )
    fe.add_argument("--url", default=None, help="repository or mirror; overrides the knob")
    fe.set_defaults(fn=cmd_artifacts_fetch)
    rep = sub.add_parser(
        "replay", help="re-run a call dumped at EMBER_LOGLEVEL=10 and compare its outputs"
    )
    rep.add_argument("dump", help="a dump directory (<EMBER_DUMP_DIR>/<api>-<pid>-<seq>)")
    rep.add_argument(
        "--device", default=None, help="run on this device instead of the recorded one (cuda:1)"
    )
    rep.add_argument("--rtol", type=float, default=None, help="float tolerance (default by dtype)")
    rep.add_argument("--atol", type=float, default=None, help="float tolerance (default by dtype)")
    rep.set_defaults(fn=cmd_replay)
    _add_trace_parser(sub)
    # NOTE: everything after `bench` goes to ember.bench unparsed (see main): one parser owns
    # the bench options, `ember bench ...` == `python -m ember.bench ...`.
    sub.add_parser(
        "bench",
        add_help=False,
        help="benchmark harness: routines x backends, reference-checked (ember bench --help)",
    ).set_defaults(fn=cmd_bench)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    split = _split_bench(argv)
    args = _parser().parse_args(split[0] if split else argv)
    if split:
        args.bench_argv = split[1]
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    logging.getLogger("ember").setLevel(logging.WARNING if args.quiet else logging.INFO)
    try:
        # NOTE: EMBER_JIT_LOGLEVEL, when set, wins over -q for the loader's logger (R7.8).
        from ember.jit.build import apply_log_level

        apply_log_level()
    except EmberError as exc:
        print(f"ember: error: {exc}", file=sys.stderr)
        return 2
    try:
        return int(args.fn(args))
    except EmberError as exc:
        print(f"ember: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
