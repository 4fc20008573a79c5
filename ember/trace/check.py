"""The consistency checks behind ``ember trace check`` and ``tests/unit/test_sync.py`` (R8.4,
R8.11, R8.15).

Each check takes its inputs as arguments and returns a list of problems (empty: in sync), so a
test can feed it an edited source (``binding_problems``' ``read``), signature or definitions
directory and see it fail.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

from ember.jit.spec import KernelSpec
from ember.trace import TraceTemplate, write_definitions
from ember.trace.calls import UNKNOWN, ModuleCall, module_calls

__all__ = [
    "binding_problems",
    "definition_problems",
    "export_problems",
    "exported_names",
    "is_output_buffer",
    "parameter_problems",
    "signature_problems",
    "specs_by_builder",
]

_EXPORT = re.compile(r"TVM_FFI_DLL_EXPORT_TYPED_FUNC\(\s*(\w+)\s*,")
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


def binding_problems(
    generate: Callable[[], Iterable[KernelSpec]], read: Callable[[Path], str] = Path.read_text
) -> list[str]:
    """The export check of one family (its ``@register`` generator): every module function its op
    module uses is exported by every spec the use's module can be built from. ``read`` reads the
    Python and C++ sources (a test passes one that edits a file)."""
    module = importlib.import_module(generate.__module__)
    calls = module_calls(read(Path(str(module.__file__))))
    builders = {b for c in calls for b in c.builders} - {UNKNOWN}
    made, orphans = specs_by_builder(module, builders, generate)
    texts: dict[Path, set[str]] = {}

    def exports(spec: KernelSpec) -> set[str]:
        for src in spec.sources:
            if src not in texts:
                texts[src] = exported_names(read(src))
        return set().union(*(texts[src] for src in spec.sources))

    out = export_problems(module.__name__, calls, made, exports)
    return out + [
        f"{module.__name__}: the family registers {spec.uri}, made by none of the spec "
        f"functions its modules are built by ({sorted(builders)}), so no call is checked "
        "against its exports; yield specs from the spec function passed to build_and_load"
        for spec in orphans
    ]


def specs_by_builder(
    module: ModuleType, builders: Iterable[str], generate: Callable[[], Iterable[KernelSpec]]
) -> tuple[dict[str, list[KernelSpec]], list[KernelSpec]]:
    """Run a family's generator and see which of ``module``'s spec functions (``builders``) made
    each spec: ``({builder: specs}, the specs none of them made)``."""
    codes = {}
    for name in builders:
        fn = getattr(module, name, None)
        if callable(fn) and hasattr(inspect.unwrap(fn), "__code__"):
            codes[inspect.unwrap(fn).__code__] = name
    returned: list[tuple[Any, str]] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "return" and frame.f_code in codes and isinstance(arg, KernelSpec):
            returned.append((arg, codes[frame.f_code]))

    # NOTE: a profile hook, not patched module globals: it sees the spec functions however the
    # generator reaches them, and only on this thread.
    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        specs = list(generate())
    finally:
        sys.setprofile(previous)
    made: dict[str, list[KernelSpec]] = {}
    orphans = []
    for spec in specs:
        by = [name for s, name in returned if s is spec]
        if by:
            made.setdefault(by[0], []).append(spec)
        else:
            orphans.append(spec)
    return made, orphans


def export_problems(
    where: str,
    calls: Iterable[ModuleCall],
    made: Mapping[str, Sequence[KernelSpec]],
    exports: Callable[[KernelSpec], set[str]],
) -> list[str]:
    """Every use in op module ``where`` of a module function (``calls``) is exported by the
    binding of every spec its module can be built from (``made``: spec function -> the
    registered specs it made)."""
    out = []
    # (name, builder, exports, sources) -> the uris missing it (dicts: ordered sets)
    missing: dict[tuple[str, str, tuple[str, ...], tuple[str, ...]], dict[str, None]] = {}
    sites: dict[tuple[str, str], dict[str, None]] = {}
    for call in calls:
        at = f"{where}:{call.line} ({call.function})"
        if not call.name:
            out.append(
                f"{at} looks a module function up by a name the check cannot read; pass a "
                "string constant to getattr (or to the parameter it forwards)"
            )
            continue
        if not call.builders or UNKNOWN in call.builders:
            out.append(
                f"{at} calls mod.{call.name}() on a module the check cannot tie to a spec "
                "function; get the module from a getter that returns build_and_load(<spec "
                "function>(...)), called in the same function (ember/trace/calls.py)"
            )
            continue
        for builder in sorted(call.builders):
            sites.setdefault((call.name, builder), {})[f"{call.function}() line {call.line}"] = None
            for spec in made.get(builder, ()):
                names = exports(spec)
                if call.name not in names:
                    files = tuple(p.name for p in spec.sources)
                    key = (call.name, builder, tuple(sorted(names)), files)
                    missing.setdefault(key, {})[spec.uri] = None
    for builder in sorted({b for _, b in sites} - set(made)):
        used = sorted({name for name, b in sites if b == builder})
        out.append(
            f"{where} calls {', '.join(f'mod.{n}()' for n in used)} on modules built by "
            f"{builder}(), but its family's @register generator yields no spec from "
            f"{builder}(), so no export is checked; yield its specs there (R3.12)"
        )
    for (name, builder, have, files), uris in missing.items():
        specs = f"spec{'s' if len(uris) > 1 else ''} {', '.join(uris)}"
        out.append(
            f"{where} calls mod.{name}() ({', '.join(sites[name, builder])}) on modules built "
            f"by {builder}(), but the binding of {specs} ({', '.join(files)}) does not export "
            f"it (TVM_FFI_DLL_EXPORT_TYPED_FUNC names: {list(have)}); export it there or call "
            "a name it exports"
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
    parameter is accounted for (:func:`parameter_problems`), and the reference's parameters are
    the inputs."""
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
    out += parameter_problems(op, named, required, allowed, template)
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


def is_output_buffer(name: str) -> bool:
    """``out``, ``out_q``, ``out_lse``...: a caller's buffer for an output, not a trace input."""
    return name == "out" or name.startswith("out_")


def parameter_problems(
    op: str, named: list[str], required: set[str], allowed: set[str], template: TraceTemplate
) -> list[str]:
    """Every parameter in ``named`` (the op's, ``**kwargs`` aside) is a trace input, an output
    buffer (:func:`is_output_buffer`), ``opaque`` or ``untraced``; every name the template lists
    in ``opaque`` (the op's parameters) or ``untraced`` (``allowed``: the op's or its ``via``
    functions') is one and is not also an input."""
    out = []
    where = _template_name(template)
    for field, names, scope in (
        ("opaque", template.opaque, set(named)),
        ("untraced", template.untraced, allowed),
    ):
        for name in names:
            if name not in scope:
                out.append(
                    f"{op}: {where} lists {name!r} in {field}, but ember.{op} has no such "
                    f"parameter (parameters: {named}); rename it there or drop it"
                )
            elif name in template.inputs:
                out.append(f"{op}: {where} lists trace input {name!r} in {field} too; drop it")
    accounted = {*template.inputs, *template.opaque, *template.untraced}
    for name in named:
        if name not in accounted and not is_output_buffer(name):
            kind = "required" if name in required else "optional"
            out.append(
                f"{op}: {kind} parameter {name!r} is not a trace input, an output buffer (out, "
                f"out_*), opaque or untraced; name it out/out_* if it is an output buffer, else "
                f"add it to the inputs of {where}, or to its untraced=(...) if the definition "
                "does not carry it (R8.6, R8.11)"
            )
    return out


def _template_name(template: TraceTemplate) -> str:
    """``RMSNORM (ember/trace/dense.py)``: where the template is defined."""
    module = sys.modules.get(template.reference.__module__)
    names = [k for k, v in vars(module).items() if v is template] if module else []
    path = template.reference.__module__.replace(".", "/") + ".py"
    return f"{names[0] if names else 'the template of ' + template.op} ({path})"


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
