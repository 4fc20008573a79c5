"""The two toolchains: ``cuda`` (nvcc) and ``host`` (the C++ compiler).

A toolchain's :meth:`version` is part of every key. Asking a compiler its version means starting
it, so the answer is memoised by the compiler file's identity (real path, size, mtime) in memory
and in ``<cache>/toolchains.json``: a warm-cache load never starts a compiler.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import json
import logging
import os
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from ember.config import knobs
from ember.errors import ToolchainError
from ember.jit.arch import Arch
from ember.jit.manifest import BuildEdge, BuildPlan, NinjaRule
from ember.jit.spec import BuildMode, KernelSpec, Toolchain
from ember.jit.workspace import INCLUDE_DIR, Workspace, atomic_write

__all__ = ["CudaToolchain", "HostToolchain", "get_toolchain", "probe_version", "tvm_ffi_paths"]

logger = logging.getLogger(__name__)

_VERSIONS: dict[str, str] = {}


def _resolve(exe: str, knob: str) -> Path:
    found = shutil.which(exe)
    if found is None:
        raise ToolchainError(f"compiler {exe!r} not found (set {knob} to its path, or install it)")
    return Path(found).resolve()


def probe_version(exe: Path) -> str:
    """``exe --version``, memoised by the file's identity so it runs once per compiler."""
    st = exe.stat()
    ident = f"{exe}|{st.st_size}|{st.st_mtime_ns}"
    if ident in _VERSIONS:
        return _VERSIONS[ident]
    ws = Workspace.current()
    try:
        memo = json.loads(ws.toolchains_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        memo = {}
    if not isinstance(memo, dict):
        memo = {}
    version = memo.get(ident)
    if not isinstance(version, str):
        try:
            out = subprocess.run(
                [str(exe), "--version"], capture_output=True, text=True, timeout=60, check=True
            ).stdout
        except (OSError, subprocess.SubprocessError) as exc:
            raise ToolchainError(f"{exe} --version failed: {exc}") from exc
        # NOTE: keep the lines that identify the build; drop banners and licence text.
        lines = [ln.strip() for ln in out.splitlines() if any(c.isdigit() for c in ln)]
        version = " | ".join(ln for ln in lines if "copyright" not in ln.lower())
        if not knobs.disable_cache:
            memo[ident] = version
            atomic_write(ws.toolchains_file, json.dumps(memo, indent=1, sort_keys=True))
    _VERSIONS[ident] = version
    return version


@functools.cache
def tvm_ffi_paths() -> tuple[Path, Path, str]:
    """(include dir, lib dir, version) of apache-tvm-ffi, found without importing it (no torch)."""
    spec = importlib.util.find_spec("tvm_ffi")
    if spec is None or spec.origin is None:
        raise ToolchainError(
            "apache-tvm-ffi is not installed; pip install 'apache-tvm-ffi>=0.1.15,<0.2'"
        )
    root = Path(spec.origin).parent
    return root / "include", root / "lib", importlib.metadata.version("apache-tvm-ffi")


def _common_includes(spec: KernelSpec) -> list[str]:
    tvm_include, _, _ = tvm_ffi_paths()
    dirs = [INCLUDE_DIR, *spec.include_dirs, tvm_include]
    return [f"-I{shlex.quote(str(d))}" for d in dirs]


def _objects(spec: KernelSpec) -> list[tuple[Path, str]]:
    out, seen = [], set()
    for i, src in enumerate(spec.sources):
        obj = f"{src.stem}.o" if src.stem not in seen else f"{src.stem}_{i}.o"
        seen.add(src.stem)
        out.append((src, obj))
    return out


def _host_opt(mode: BuildMode) -> list[str]:
    return ["-O0", "-g"] if mode.debug else ["-O3", "-DNDEBUG"]


class HostToolchain:
    """Host-only modules (planners, CPU helpers) built with the C++ compiler."""

    name = "host"

    def cxx(self) -> Path:
        return _resolve(knobs.cxx, "EMBER_CXX")

    def version(self) -> str:
        return f"cxx: {probe_version(self.cxx())}"

    def _cxx_vars(self, spec: KernelSpec, mode: BuildMode) -> list[tuple[str, str]]:
        launcher = " ".join(shlex.quote(a) for a in knobs.nvcc_launcher)
        cflags = ["-std=c++17", "-fPIC", *_host_opt(mode), *_common_includes(spec), *spec.cflags]
        return [
            ("cxx", f"{launcher} {shlex.quote(str(self.cxx()))}".strip()),
            ("cflags", " ".join(cflags)),
        ]

    def _ldflags(self, spec: KernelSpec) -> str:
        _, tvm_lib, _ = tvm_ffi_paths()
        return " ".join(["-shared", *spec.ldflags, f"-L{shlex.quote(str(tvm_lib))}", "-ltvm_ffi"])

    def compile_rules(
        self, spec: KernelSpec, targets: Sequence[Arch], mode: BuildMode, threads: int
    ) -> BuildPlan:
        output = f"{spec.uri}.so"
        objs = _objects(spec)
        return BuildPlan(
            variables=(*self._cxx_vars(spec, mode), ("ldflags", self._ldflags(spec))),
            rules=(
                NinjaRule("cxx", "$cxx -c $in -o $out $cflags", "cxx $out"),
                NinjaRule("link", "$cxx $in -o $out $ldflags", "link $out"),
            ),
            edges=(
                *(BuildEdge((o,), "cxx", (str(s),)) for s, o in objs),
                BuildEdge((output,), "link", tuple(o for _, o in objs)),
            ),
            output=output,
        )


class CudaToolchain(HostToolchain):
    """CUDA modules: ``.cu`` through nvcc with one ``-gencode`` per target; ``.cc`` through c++."""

    name = "cuda"

    def nvcc(self) -> Path:
        configured = knobs.nvcc
        if configured:
            return _resolve(configured, "EMBER_NVCC")
        if shutil.which("nvcc") is None and os.access("/usr/local/cuda/bin/nvcc", os.X_OK):
            return Path("/usr/local/cuda/bin/nvcc")
        return _resolve("nvcc", "EMBER_NVCC")

    def version(self) -> str:
        return f"nvcc: {probe_version(self.nvcc())}; {super().version()}"

    def cuda_include(self) -> Path:
        """CUDA's include dir, for the C++ compiler's half of a CUDA module (bindings)."""
        home = knobs.cuda_home
        candidates = [home / "include"] if home else []
        candidates += [self.nvcc().parent.parent / "include", Path("/usr/local/cuda/include")]
        for c in candidates:
            if (c / "cuda_runtime_api.h").is_file():
                return c
        raise ToolchainError(
            f"CUDA headers not found in {[str(c) for c in candidates]}; set EMBER_CUDA_HOME"
        )

    def _cxx_vars(self, spec: KernelSpec, mode: BuildMode) -> list[tuple[str, str]]:
        (cxx, cxx_cmd), (cflags, flags) = super()._cxx_vars(spec, mode)
        return [(cxx, cxx_cmd), (cflags, f"{flags} -I{shlex.quote(str(self.cuda_include()))}")]

    def compile_rules(
        self, spec: KernelSpec, targets: Sequence[Arch], mode: BuildMode, threads: int
    ) -> BuildPlan:
        launcher = " ".join(shlex.quote(a) for a in knobs.nvcc_launcher)
        opt = ["-G", "-g", "-O0"] if mode.debug else ["-O3", "-DNDEBUG"]
        flags = [
            "-std=c++17",
            f"-ccbin={shlex.quote(str(self.cxx()))}",
            "-Xcompiler=-fPIC",
            "--expt-relaxed-constexpr",
            *opt,
            *(["-lineinfo"] if mode.lineinfo else []),
            *(["--threads", str(threads)] if threads > 1 else []),
            *(a.gencode for a in targets),
            *_common_includes(spec),
            *spec.cuda_cflags,
            *(shlex.quote(f) for f in knobs.extra_cuda_flags),
        ]
        output = f"{spec.uri}.so"
        objs = _objects(spec)
        edges = [
            BuildEdge((o,), "nvcc" if s.suffix == ".cu" else "cxx", (str(s),)) for s, o in objs
        ]
        edges.append(BuildEdge((output,), "link", tuple(o for _, o in objs)))
        nvcc = f"{launcher} {shlex.quote(str(self.nvcc()))}".strip()
        return BuildPlan(
            variables=(
                ("nvcc", nvcc),
                ("cuda_cflags", " ".join(flags)),
                *self._cxx_vars(spec, mode),
                ("ldflags", self._ldflags(spec)),
            ),
            rules=(
                NinjaRule("nvcc", "$nvcc -c $in -o $out $cuda_cflags", "nvcc $out"),
                NinjaRule("cxx", "$cxx -c $in -o $out $cflags", "cxx $out"),
                NinjaRule("link", "$nvcc $in -o $out $ldflags", "link $out"),
            ),
            edges=tuple(edges),
            output=output,
        )


def get_toolchain(name: str) -> Toolchain:
    """The toolchain called ``name`` (``cuda`` or ``host``)."""
    if name == "cuda":
        return CudaToolchain()
    if name == "host":
        return HostToolchain()
    raise ValueError(f"unknown toolchain {name!r}; expected 'cuda' or 'host'")
