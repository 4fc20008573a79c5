"""The consistency checks behind ``ember trace check`` and ``tests/unit/test_sync.py`` (R8.4,
R8.11, R8.15).

Each check takes its inputs as arguments and returns a list of problems (empty: in sync), so a
test can feed it a mutated export list, signature or definitions directory and see it fail.
"""

from __future__ import annotations

import inspect
import re
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ember.trace import TraceTemplate, write_definitions

__all__ = [
    "binding_exports",
    "definition_problems",
    "export_problems",
    "exported_names",
    "module_calls",
    "signature_problems",
]

_EXPORT = re.compile(r"TVM_FFI_DLL_EXPORT_TYPED_FUNC\(\s*(\w+)\s*,")
# `mod.name`, `_getter(...).name` or `getattr(mod, "name")`: a function of a loaded module; and
# act's `_gated("name", ...)`, which looks its export up by that name (`_torch()` is torch).
_CALL = re.compile(
    r"\b(?:mod|_(?!torch\b)\w+\([^()]*\))\.(\w+)\b"
    r"|getattr\((?:mod|_(?!torch\b)\w+\([^()]*\)),\s*\"(\w+)\"\)"
    r"|\b_gated\(\s*\"(\w+)\""
)


_IF_0 = re.compile(r"\s*#\s*if\s+0\s*$")
_IF = re.compile(r"\s*#\s*if(?:n?def)?\b")
_ELSE = re.compile(r"\s*#\s*(?:else|elif)\b")
_ENDIF = re.compile(r"\s*#\s*endif\b")


def _code_only(text: str) -> str:
    """C++ source with comments blanked (newlines kept) and string/char literals emptied, so a
    commented-out or quoted export is not code. Raw strings (``R"(...)"``) are not handled."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c, two = text[i], text[i : i + 2]
        if two == "//":
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif two == "/*":
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(" " + "\n" * text.count("\n", i, end))
            i = end
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _live_lines(text: str) -> str:
    """``text`` without the lines of ``#if 0`` blocks (up to their ``#else``/``#elif`` or
    ``#endif``, nested conditionals counted)."""
    out, depth = [], 0  # depth > 0: inside an `#if 0` block, at that nesting level
    for line in text.splitlines():
        if depth:
            if _IF.match(line):
                depth += 1
            elif _ENDIF.match(line):
                depth -= 1
            elif depth == 1 and _ELSE.match(line):
                depth = 0
            continue
        if _IF_0.match(line):
            depth = 1
            continue
        out.append(line)
    return "\n".join(out)


def exported_names(source: str) -> set[str]:
    """The names a C++ source exports with ``TVM_FFI_DLL_EXPORT_TYPED_FUNC``, outside comments,
    string literals and ``#if 0`` blocks."""
    return set(_EXPORT.findall(_live_lines(_code_only(source))))


def binding_exports(sources: Iterable[Path]) -> set[str]:
    """The names the bindings in ``sources`` export (:func:`exported_names`)."""
    return {m for p in sources for m in exported_names(p.read_text())}


def module_calls(source: str) -> set[str]:
    """The module functions a Python source calls (``mod.<name>(`` / ``_getter().<name>(``)."""
    return {name for groups in _CALL.findall(source) for name in groups if name}


def export_problems(calls: Mapping[str, set[str]], exports: Mapping[str, set[str]]) -> list[str]:
    """Every module function called from an op module must be exported by one of its specs."""
    out = []
    for where, names in sorted(calls.items()):
        have = exports.get(where, set())
        for name in sorted(names - have):
            out.append(
                f"{where} calls mod.{name}() but no binding of its specs exports it "
                f"(TVM_FFI_DLL_EXPORT_TYPED_FUNC names: {sorted(have)})"
            )
    return out


def _params(fn: Callable[..., Any]) -> tuple[list[str], set[str], bool]:
    """(named parameters, required ones, has **kwargs) of ``fn``."""
    sig = inspect.signature(inspect.unwrap(fn))
    named = [
        p.name for p in sig.parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    required = {
        p.name
        for p in sig.parameters.values()
        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }
    kwargs = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    return named, required, kwargs


def signature_problems(
    op: str, fn: Callable[..., Any], template: TraceTemplate, via: Mapping[str, Callable[..., Any]]
) -> list[str]:
    """The template agrees with the op: inputs name its parameters (or those of ``via``), every
    required parameter is an input (or opaque), and the reference's parameters are the inputs."""
    out = []
    if template.op != op:
        out.append(f"{op}: its trace template is for {template.op!r}")
    named, required, _ = _params(fn)
    allowed = set(named)
    for name in template.via:
        if name not in via:
            out.append(f"{op}: template names via={name!r}, which is not a public function")
            continue
        allowed |= set(_params(via[name])[0])
    for name in template.inputs:
        if name not in allowed:
            out.append(
                f"{op}: trace input {name!r} is not a parameter of ember.{op}"
                f"{' or of ' + ', '.join(template.via) if template.via else ''}"
                f" (parameters: {named}); rename it in the template or the signature"
            )
    for name in sorted(required - set(template.inputs) - set(template.opaque)):
        out.append(f"{op}: required parameter {name!r} is not a trace input")
    ref = list(inspect.signature(template.reference).parameters)
    if ref != list(template.inputs):
        out.append(
            f"{op}: reference parameters {ref} differ from the inputs {list(template.inputs)}"
        )
    for t in (*template.inputs.values(), *template.outputs.values()):
        for ax in t.shape or ():
            if ax not in template.axes:
                out.append(f"{op}: shape names undefined axis {ax!r}")
    return out


def definition_problems(committed: Path, generated: Path | None = None) -> list[str]:
    """``committed`` holds exactly what ``ember trace generate`` writes now (into ``generated``
    or a temporary directory)."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh = generated or Path(tmp)
        if generated is None:
            write_definitions(fresh)
        want = {p.name: p.read_text() for p in fresh.glob("*.json")}
        have = (
            {p.name: p.read_text() for p in committed.glob("*.json")} if committed.is_dir() else {}
        )
    fix = "; run `ember trace generate` and commit definitions/ (R3.16)"
    out = [f"{name}: missing from {committed}{fix}" for name in sorted(set(want) - set(have))]
    out += [f"{name}: no template generates it{fix}" for name in sorted(set(have) - set(want))]
    out += [
        f"{name}: differs from the regenerated definition{fix}"
        for name in sorted(set(want) & set(have))
        if want[name] != have[name]
    ]
    return out


def trace_problems(definitions_dir: Path) -> list[str]:
    """Every public op has a template (or an exemption) that agrees with its signature, and
    ``definitions_dir`` holds the regenerated definitions."""
    import ember
    from ember.trace.templates import EXEMPT, TEMPLATES

    ops = [n for n in ember.__all__ if n[:1].islower()]
    public = {op: getattr(ember, op) for op in ops}
    out = []
    for op, fn in public.items():
        template = getattr(fn, "trace", None)
        if template is None and op not in EXEMPT:
            out.append(f"{op}: no trace template (@trace) and not in EXEMPT (R3.14)")
        elif template is not None:
            out += signature_problems(op, fn, template, public)
    listed = {t.op for t in TEMPLATES}
    out += [
        f"{op}: has @trace but is not in TEMPLATES"
        for op in sorted({op for op, fn in public.items() if hasattr(fn, "trace")} - listed)
    ]
    return out + definition_problems(definitions_dir)
