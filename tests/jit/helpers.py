"""Test helpers for the JIT layer: tiny host modules, a compiler wrapper, subprocess runners."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

from ember.jit import KernelSpec

REPO = Path(__file__).resolve().parents[2]

MODULE_SRC = textwrap.dedent(
    """\
    #include <tvm/ffi/function.h>
    #include "value.h"
    int64_t value() { return EMBER_TEST_VALUE * SCALE; }
    TVM_FFI_DLL_EXPORT_TYPED_FUNC(value, value);
    """
)


@dataclass
class Wrapper:
    """A compiler wrapper that logs every call.

    Any call fails while ``deny`` exists; compiles wait while ``slow`` exists.
    """

    path: Path
    log: Path
    deny: Path
    slow: Path

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def compiles(self) -> list[str]:
        return [c for c in self.calls() if " -c " in f" {c} "]


def make_wrapper(where: Path, real: str = "c++") -> Wrapper:
    where.mkdir(parents=True, exist_ok=True)
    w = Wrapper(where / "cxx-wrapper", where / "calls.log", where / "deny", where / "slow")
    w.path.write_text(
        textwrap.dedent(
            f"""\
            #!/bin/sh
            echo "$*" >> {w.log}
            if [ -e {w.deny} ]; then echo "wrapper: compiler use denied" >&2; exit 99; fi
            case " $* " in *" -c "*) while [ -e {w.slow} ]; do sleep 0.1; done;; esac
            exec {real} "$@"
            """
        )
    )
    w.path.chmod(0o755)
    return w


def make_value_module(
    where: Path, value: int, *, uri: str = "value_mod", scale: int = 1
) -> KernelSpec:
    """A host module whose ``value()`` returns ``value * scale``; the value lives in a header."""
    inc = where / "include"
    inc.mkdir(parents=True, exist_ok=True)
    (where / "value.cc").write_text(MODULE_SRC)
    set_header(where, value)
    return KernelSpec(
        uri=uri,
        sources=(where / "value.cc",),
        toolchain="host",
        include_dirs=(inc,),
        cflags=(f"-DSCALE={scale}",),
        params={"scale": scale},
    )


def set_header(where: Path, value: int) -> None:
    (where / "include" / "value.h").write_text(f"#define EMBER_TEST_VALUE {value}\n")


def pythonpath(*first: str | os.PathLike[str]) -> str:
    """``first`` ahead of the caller's PYTHONPATH entries (which may hold tvm-ffi or torch, as on
    the GPU host, where packages are installed with ``pip --target``)."""
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join([*(str(f) for f in first), *inherited])


def run_py(
    code: str, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter with ember importable; returns the finished process."""
    full = dict(os.environ)
    full["PYTHONPATH"] = pythonpath(REPO)
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=full, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def spec_code(spec: KernelSpec) -> str:
    """Python source that rebuilds ``spec`` in a subprocess."""
    return (
        "from pathlib import Path\nfrom ember.jit import KernelSpec\n"
        f"spec = KernelSpec(uri={spec.uri!r}, sources=({str(spec.sources[0])!r},), "
        f"toolchain='host', include_dirs=({str(spec.include_dirs[0])!r},), "
        f"cflags={spec.cflags!r}, params={dict(spec.params)!r})\n"
    )
