"""Which spec's module each use of a loaded module in an op module goes to (issue 7, R8.4).

The sync test checks every ``mod.<name>`` against the exports of the specs whose module ``mod``
can be, not against everything a family exports. The link is read from the source (``ast``), by
the rule the op modules follow:

- a *getter* is a function or method that returns ``build_and_load(<spec fn>(...))`` or a value
  that holds a getter's result: a local name bound to one (``mod = build_and_load(...)``), a
  tuple with one (``DecodeWorkspace.wave``'s ``(mod, ctas)``), an item of a dict or an
  attribute that one was stored in (``_MODULES[d] = mod``, ``self.mod = mod``); its *builders*
  are the spec functions (``norm_spec``) whose modules it can return;
- a *use* is an attribute of such a value (``_paged().append``, ``mod.apply`` after ``mod =
  _module(x, fn)``, ``_MODULES[d].rmsnorm``), including ``getattr(mod, "name")``;
  ``getattr(mod, p)`` with ``p`` a parameter makes every call of that function with a string
  constant for ``p`` a use (act's ``_gated("silu_and_mul", ...)``).

Bindings are flow-insensitive: a name gets the builders of everything assigned to it in its
function, and every name of a tuple target bound from a call (``mod, wave = ws.wave(...)``)
gets the call's. Dict items and attributes are keyed by their text (``_MODULES``,
``self.mod``) across the module. A use on a local named ``mod`` that resolves to no getter, a
module built from something other than a named spec function's result, or a ``getattr`` name
that is not a constant is reported, not skipped: move the module into a getter so the check can
follow it. Module-level code is not read: loading a module at import is not allowed (STYLE.md).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["UNKNOWN", "ModuleCall", "module_calls"]

UNKNOWN = "?"
"""The builder of a module built from something other than a call of a named spec function."""

_Fn = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class ModuleCall:
    """One use of a loaded module's function in an op module."""

    name: str
    """The function used (``mod.<name>``); empty when the check cannot read it."""
    function: str
    """The Python function the use is in (``DecodeWorkspace.wave``)."""
    line: int
    builders: frozenset[str]
    """The spec functions whose modules the receiver can be; empty when not tied to any."""


def module_calls(source: str) -> list[ModuleCall]:
    """Every use of a loaded module's function in an op module's ``source``."""
    return _Resolver(ast.parse(source)).uses()


def _functions(tree: ast.Module) -> dict[str, _Fn]:
    """Qualified name -> definition: module-level functions and methods of module-level
    classes."""
    out: dict[str, _Fn] = {}
    for node in tree.body:
        if isinstance(node, _Fn):
            out[node.name] = node
        elif isinstance(node, ast.ClassDef):
            out |= {f"{node.name}.{f.name}": f for f in node.body if isinstance(f, _Fn)}
    return out


def _assignments(fn: _Fn) -> Iterator[tuple[ast.expr, ast.expr]]:
    """``(target, value)`` of every assignment in ``fn``; a tuple target is split element-wise
    from a tuple value of its length, else each of its targets gets the whole value."""

    def split(target: ast.expr, value: ast.expr) -> Iterator[tuple[ast.expr, ast.expr]]:
        if not isinstance(target, ast.Tuple | ast.List):
            yield target, value
            return
        values = value.elts if isinstance(value, ast.Tuple | ast.List) else []
        for i, t in enumerate(target.elts):
            yield from split(t, values[i] if len(values) == len(target.elts) else value)

    for node in ast.walk(fn):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                yield from split(target, node.value)
        elif isinstance(node, ast.AnnAssign | ast.NamedExpr) and node.value is not None:
            yield from split(node.target, node.value)


def _callee(node: ast.expr) -> str:
    """``f`` of ``f(...)`` or ``x.f(...)``."""
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else ""


class _Resolver:
    """Getters and uses of one op module's source (the rule in the module docstring)."""

    def __init__(self, tree: ast.Module) -> None:
        self.functions = _functions(tree)
        self.locals: dict[str, dict[str, list[ast.expr]]] = {q: {} for q in self.functions}
        stores: list[tuple[str, ast.expr, str]] = []  # (item/attribute key, value, function)
        for q, f in self.functions.items():
            for target, value in _assignments(f):
                if isinstance(target, ast.Name):
                    self.locals[q].setdefault(target.id, []).append(value)
                elif key := _store_key(target):
                    stores.append((key, value, q))
        self.getters: dict[str, frozenset[str]] = {}
        self.stored: dict[str, frozenset[str]] = {}
        changed = True
        while changed:  # a getter may return another getter's result: iterate to a fixpoint
            changed = False
            for q, f in self.functions.items():
                returns = [r.value for r in ast.walk(f) if isinstance(r, ast.Return) and r.value]
                builders = frozenset().union(*(self.resolve(v, q) for v in returns))
                if builders and builders != self.getters.get(q):
                    self.getters[q], changed = builders, True
            for key, value, q in stores:
                builders = self.stored.get(key, frozenset()) | self.resolve(value, q)
                if builders and builders != self.stored.get(key):
                    self.stored[key], changed = builders, True

    def getter(self, func: ast.expr) -> frozenset[str]:
        """The builders of a call of ``func``: a module-level getter by name, a method by
        attribute."""
        if isinstance(func, ast.Name):
            return self.getters.get(func.id, frozenset())
        if isinstance(func, ast.Attribute):
            found = (b for q, b in self.getters.items() if q.endswith("." + func.attr))
            return frozenset().union(*found)
        return frozenset()

    def resolve(
        self, node: ast.expr, fn: str, seen: frozenset[str] = frozenset()
    ) -> frozenset[str]:
        """The builders of the modules ``node`` (in function ``fn``) can be or hold."""
        if isinstance(node, ast.Call):
            func = node.func
            if _callee(func) == "build_and_load" and node.args:
                return self.spec_functions(node.args[0], fn, seen)
            if isinstance(func, ast.Attribute) and func.attr in ("get", "setdefault", "pop"):
                held = self.stored.get("[]" + ast.unparse(func.value), frozenset())
                return held | self.getter(func)
            return self.getter(func)
        if isinstance(node, ast.Name):
            if node.id in seen:
                return frozenset()
            values = self.locals[fn].get(node.id, [])
            return frozenset().union(*(self.resolve(v, fn, seen | {node.id}) for v in values))
        if key := _store_key(node):
            return self.stored.get(key, frozenset())
        return frozenset().union(*(self.resolve(v, fn, seen) for v in _alternatives(node)))

    def spec_functions(self, node: ast.expr, fn: str, seen: frozenset[str]) -> frozenset[str]:
        """The spec functions whose result ``node`` (``build_and_load``'s argument) can be."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            return frozenset({node.func.id})
        if isinstance(node, ast.Name) and node.id not in seen:
            values = self.locals[fn].get(node.id, [])
            found = frozenset().union(
                *(self.spec_functions(v, fn, seen | {node.id}) for v in values)
            )
            return found or frozenset({UNKNOWN})
        if isinstance(node, ast.IfExp):
            return self.spec_functions(node.body, fn, seen) | self.spec_functions(
                node.orelse, fn, seen
            )
        return frozenset({UNKNOWN})

    def uses(self) -> list[ModuleCall]:
        out: list[ModuleCall] = []
        forwarders: list[tuple[str, int, str, frozenset[str]]] = []
        for q, f in self.functions.items():
            for node in ast.walk(f):
                if isinstance(node, ast.Attribute):
                    builders = self.receiver(node.value, q)
                    if builders is not None:
                        out.append(ModuleCall(node.attr, q, node.lineno, builders))
                elif isinstance(node, ast.Call) and _callee(node.func) == "getattr":
                    out += self.getattr_use(node, q, f, forwarders)
        for q, f in self.functions.items():
            for node in ast.walk(f):
                if isinstance(node, ast.Call):
                    out += self.forwarded(node, q, forwarders)
        return sorted(out, key=lambda c: (c.line, c.name))

    def receiver(self, node: ast.expr, fn: str) -> frozenset[str] | None:
        """The builders of a module receiver; None when ``node`` is not one (a ``mod`` that
        resolves to nothing is one, with no builders)."""
        builders = self.resolve(node, fn)
        if builders:
            return builders
        return frozenset() if isinstance(node, ast.Name) and node.id == "mod" else None

    def getattr_use(
        self,
        node: ast.Call,
        fn: str,
        f: _Fn,
        forwarders: list[tuple[str, int, str, frozenset[str]]],
    ) -> list[ModuleCall]:
        if not isinstance(node.func, ast.Name) or len(node.args) < 2:
            return []
        builders = self.receiver(node.args[0], fn)
        if builders is None:
            return []
        name = node.args[1]
        if isinstance(name, ast.Constant) and isinstance(name.value, str):
            return [ModuleCall(name.value, fn, node.lineno, builders)]
        params = [a.arg for a in (*f.args.posonlyargs, *f.args.args)]
        if isinstance(name, ast.Name) and name.id in params:
            forwarders.append((fn, params.index(name.id), name.id, builders))
            return []
        return [ModuleCall("", fn, node.lineno, builders)]

    def forwarded(
        self, node: ast.Call, fn: str, forwarders: list[tuple[str, int, str, frozenset[str]]]
    ) -> Iterator[ModuleCall]:
        """The uses a call of a forwarder (``_gated("silu_and_mul", ...)``) makes."""
        for target, index, param, builders in forwarders:
            method = "." in target
            if _callee(node.func) != target.rsplit(".", 1)[-1] or method != isinstance(
                node.func, ast.Attribute
            ):
                continue
            position = index - 1 if method else index  # a method's call omits `self`
            args = {k.arg: k.value for k in node.keywords}
            arg = node.args[position] if position < len(node.args) else args.get(param)
            name = arg.value if isinstance(arg, ast.Constant) else None
            yield ModuleCall(name if isinstance(name, str) else "", fn, node.lineno, builders)


def _store_key(node: ast.expr) -> str:
    """``[]_MODULES`` for ``_MODULES[...]``, ``.self.mod`` for ``self.mod``; empty otherwise."""
    if isinstance(node, ast.Subscript):
        return "[]" + ast.unparse(node.value)
    return "." + ast.unparse(node) if isinstance(node, ast.Attribute) else ""


def _alternatives(node: ast.expr) -> list[ast.expr]:
    """The values ``node`` may evaluate to, or hold, that are worth resolving."""
    if isinstance(node, ast.Tuple | ast.List):
        return list(node.elts)
    if isinstance(node, ast.IfExp):
        return [node.body, node.orelse]
    if isinstance(node, ast.BoolOp):
        return list(node.values)
    if isinstance(node, ast.NamedExpr):
        return [node.value]
    return []
