"""The content key (R5.2-R5.4): every input moves it, paths and mtimes never do."""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

from ember.jit.arch import Arch
from ember.jit.key import KeyInputs, digest_sources
from ember.jit.spec import BuildMode, KernelSpec


def _spec(root: Path, **kw: object) -> KernelSpec:
    (root / "inc").mkdir(parents=True, exist_ok=True)
    (root / "inc" / "a.h").write_text('#include "b.h"\nint a();\n')
    (root / "inc" / "b.h").write_text("int b();\n")
    (root / "m.cc").write_text("#include <a.h>\n#include <vector>\nint main(){}\n")
    base = dict(uri="m", sources=(root / "m.cc",), toolchain="host", include_dirs=(root / "inc",))
    base.update(kw)
    return KernelSpec(**base)  # type: ignore[arg-type]


def _inputs(spec: KernelSpec, **kw: object) -> KeyInputs:
    base = dict(
        spec=spec, compiler="g++ 12", targets=(), mode=BuildMode(), extra_cuda_flags=(),
        sources=digest_sources(spec), ember_version="1.0", tvm_ffi_version="0.1.15",
    )  # fmt: skip
    base.update(kw)
    return KeyInputs(**base)  # type: ignore[arg-type]


def test_transitive_headers_are_digested(tmp_path: Path) -> None:
    names = [n for n, _ in digest_sources(_spec(tmp_path))]
    assert names == ["a.h", "b.h", "m.cc"]


def test_every_input_changes_the_key(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    base = _inputs(spec).key
    variants = {
        "compiler": _inputs(spec, compiler="g++ 13").key,
        "targets": _inputs(spec, targets=(Arch(9, 0, "a"),)).key,
        "targets_suffix": _inputs(spec, targets=(Arch(9, 0),)).key,
        "debug": _inputs(spec, mode=BuildMode(debug=True)).key,
        "lineinfo": _inputs(spec, mode=BuildMode(lineinfo=True)).key,
        "extra": _inputs(spec, extra_cuda_flags=("-G",)).key,
        "ember": _inputs(spec, ember_version="1.1").key,
        "tvm_ffi": _inputs(spec, tvm_ffi_version="0.1.16").key,
        "cflags": _inputs(dataclasses.replace(spec, cflags=("-DX=1",))).key,
        "ldflags": _inputs(dataclasses.replace(spec, ldflags=("-lm",))).key,
        "params": _inputs(dataclasses.replace(spec, params={"d": 128})).key,
        "uri": _inputs(dataclasses.replace(spec, uri="m2")).key,
    }
    assert base not in variants.values()
    assert len(set(variants.values())) == len(variants)
    (tmp_path / "inc" / "b.h").write_text("int b(); // edited\n")
    assert _inputs(spec).key != base, "editing a transitively included header must change the key"


def test_no_two_specializations_share_a_key(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    keys = {
        _inputs(dataclasses.replace(spec, params={"dtype": dt, "d": d})).key
        for dt in ("bf16", "f16", "f32") for d in (64, 128, 256)
    }  # fmt: skip
    assert len(keys) == 9


def test_key_ignores_paths_and_mtimes(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "elsewhere" / "b"
    spec_a = _spec(a)
    shutil.copytree(a, b)
    os.utime(b / "inc" / "b.h", (1, 1))
    spec_b = dataclasses.replace(spec_a, sources=(b / "m.cc",), include_dirs=(b / "inc",))
    assert _inputs(spec_a).key == _inputs(spec_b).key
