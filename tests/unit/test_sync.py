"""The one sync test (R3.14-R3.17, R8.4, R8.11, R8.15): the spec registry, the binding exports,
the Python calls into modules, ``ember.__all__``, the trace templates, the bench routines, the
docs' API list and the committed definitions agree; the last tests show that removing an export
(from one spec of a family too), renaming an argument or editing a reference without
regenerating makes it fail."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from pathlib import Path

import ember
from ember.api_log import REGISTRY
from ember.bench.routines import all_routines
from ember.jit.registry import OP_MODULES, all_specs, registered_families
from ember.trace.calls import ModuleCall, module_calls
from ember.trace.check import (
    binding_problems,
    definition_problems,
    export_problems,
    exported_names,
    signature_problems,
    specs_by_builder,
    trace_problems,
)
from ember.trace.dense import RMSNORM
from ember.trace.templates import EXEMPT, TEMPLATES

REPO = Path(__file__).resolve().parents[2]
# public op -> (family registered for precompile, bench routine)
PUBLIC_OPS = {
    "rmsnorm": ("norm", "rmsnorm"),
    "fused_add_rmsnorm_": ("norm", "fused_add_rmsnorm"),
    "plan_batch_decode": ("decode", "decode"),
    "batch_decode": ("decode", "decode"),
    "single_decode": ("decode", "decode"),
    "append_paged_kv_cache": ("paged", "append_kv"),
    "merge_states": ("paged", "merge_states"),
    "merge_state": ("paged", "merge_states"),
    "silu_and_mul": ("act", "silu_and_mul"),
    "gelu_and_mul": ("act", "gelu_and_mul"),
    "gelu_tanh_and_mul": ("act", "gelu_tanh_and_mul"),
    "apply_rope": ("rope", "rope"),
    "apply_rope_": ("rope", "rope"),
    "apply_rope_with_cos_sin_cache": ("rope", "rope"),
    "apply_rope_with_cos_sin_cache_": ("rope", "rope"),
    "softmax": ("sampling", "softmax"),
    "sampling_from_probs": ("sampling", "sampling_from_probs"),
    "min_p_sampling_from_probs": ("sampling", "min_p_sampling_from_probs"),
    "sampling_from_logits": ("sampling", "sampling_from_logits"),
    "top_k_mask_logits": ("sampling", "top_k_mask_logits"),
    "top_k_renorm_probs": ("sampling", "top_k_renorm_probs"),
    "top_k_sampling_from_probs": ("sampling", "top_k_sampling_from_probs"),
    "top_k_top_p_sampling_from_logits": ("sampling", "top_k_top_p_sampling_from_logits"),
    "top_k_top_p_sampling_from_probs": ("sampling", "top_k_top_p_sampling_from_probs"),
    "top_p_renorm_probs": ("sampling", "top_p_renorm_probs"),
    "top_p_sampling_from_probs": ("sampling", "top_p_sampling_from_probs"),
}


def test_every_public_op_is_registered_benchmarked_and_documented() -> None:
    ops = {n for n in ember.__all__ if not n[0].isupper() and not n.startswith("_")}
    assert ops == set(PUBLIC_OPS), "update PUBLIC_OPS with the new op's family and bench routine"
    families = registered_families()
    routines = {r.name for r in all_routines()}
    readme = (REPO / "README.md").read_text()
    for op, (family, routine) in PUBLIC_OPS.items():
        assert callable(getattr(ember, op))
        assert family in families, f"{op}: family {family!r} is not registered for precompile"
        assert routine in routines, f"{op}: no bench routine {routine!r}"
        assert f"ember.{op}" in readme, f"{op} is not shown in README.md"
        assert getattr(ember, op).__doc__, f"{op} has no docstring"


def test_every_op_module_registers_a_family_and_specs_have_sources() -> None:
    for name in OP_MODULES:
        importlib.import_module(name)
    assert len(registered_families()) == len(OP_MODULES)
    for spec in all_specs():
        for src in spec.sources:
            assert src.is_file(), f"{spec.uri}: missing source {src}"


def test_every_public_op_carries_the_api_decorator() -> None:
    """R3.15/R6.1: every public op is registered by ``@api`` under ``ember.<op>`` (plan and run
    included); at the suite's EMBER_LOGLEVEL=0 the export is the undecorated function itself."""
    for op in PUBLIC_OPS:
        fn = getattr(ember, op)
        assert REGISTRY.get(f"ember.{op}") is inspect.unwrap(fn), f"{op} lacks @api"
        assert fn.__ember_api__ == f"ember.{op}"


# --- exports, trace templates, definitions (R3.14-R3.17, R8.4, R8.11, R8.15) ----------------


def _binding_problems(edits: dict[str, tuple[str, str]] | None = None) -> list[str]:
    """The export check of every family, over the sources as they are or with ``edits``
    (repository path -> (old, new) text replaced in it)."""

    def read(path: Path) -> str:
        text = path.read_text()
        old, new = (edits or {}).get(path.resolve().relative_to(REPO).as_posix(), ("", ""))
        if old:
            assert old in text, f"{path}: the edit's text is not there"
            text = text.replace(old, new)
        return text

    return [p for gen in registered_families().values() for p in binding_problems(gen, read)]


def test_every_module_call_is_exported_by_each_spec_its_module_can_be_built_from() -> None:
    """Per spec, not per family: each `mod.<name>` is tied (statically, ember/trace/calls.py)
    to the spec functions whose modules `mod` can be, and every spec they made for the family
    must export the name."""
    calls = {
        gen.__module__: module_calls(inspect.getsource(importlib.import_module(gen.__module__)))
        for gen in registered_families().values()
    }
    assert sum(map(len, calls.values())) >= 20  # the analysis still sees the calls
    assert all(c.builders for cs in calls.values() for c in cs)
    toy = calls["ember.ops.toy"]
    assert [(c.name, sorted(c.builders)) for c in toy] == [("axpy", ["cuda_spec", "host_spec"])]
    decode = {(c.name, b) for c in calls["ember.ops.decode"] for b in c.builders}
    assert ("plan", "planner_spec") in decode and ("plan_upload", "decode_spec") in decode
    assert _binding_problems() == []


def test_trace_templates_agree_with_the_api_and_definitions_are_current() -> None:
    """Every public op has a template whose inputs name its parameters, which accounts for every
    other parameter, and whose reference takes the inputs; plan_batch_decode is the one
    exemption; definitions/ is what `ember trace generate` writes now (regenerated into a temp
    dir and diffed)."""
    assert set(EXEMPT) == {"plan_batch_decode"}
    assert {t.op for t in TEMPLATES} | set(EXEMPT) == set(PUBLIC_OPS)
    assert trace_problems(REPO / "definitions") == []


def test_docs_list_every_public_op_and_the_guide_names_the_sync_test() -> None:
    guide = (REPO / "docs" / "adding-a-kernel.md").read_text()
    assert "tests/unit/test_sync.py" in guide
    assert "ember trace generate" in guide
    assert "docs/adding-a-kernel.md" in (REPO / "README.md").read_text()


def test_the_call_analysis_ties_each_use_to_its_spec_functions() -> None:
    source = """
def a_spec(): ...
def b_spec(): ...
def _either(cpu): return build_and_load(a_spec() if cpu else b_spec())
def _a():
    mod = _CACHE.get(0)
    if mod is None:
        mod = _CACHE[0] = build_and_load(a_spec())
    return mod
def _via(): return _a()
class Holder:
    def pair(self):
        mod, n = None, 0
        mod = _via()
        hit = (mod, n)
        return hit
    def keep(self):
        self.mod = _either(False)
        self.mod.nine()
def _load(spec): return build_and_load(spec)
def _named(name, x): return getattr(_a(), name)(x)
def ops(x, holder, spec):
    _either(True).one(x)
    mod, n = holder.pair()
    mod.two(x)
    _named("three", x)
    getattr(_via(), "four")(x)
    _load(spec).five(x)
    _CACHE[1].six(x)
    getattr(_a(), str(x))(x)
    _torch().cuda.synchronize()
    n.bit_length()
def other(x):
    mod = _OTHER[0]
    mod.seven(x)
"""
    found = [(c.function, c.name, "".join(sorted(c.builders))) for c in module_calls(source)]
    assert found == [
        ("Holder.keep", "nine", "a_specb_spec"),
        ("ops", "one", "a_specb_spec"),
        ("ops", "two", "a_spec"),
        ("ops", "three", "a_spec"),
        ("ops", "four", "a_spec"),
        ("ops", "five", "?"),  # built from a parameter: no spec function to check against
        ("ops", "six", "a_spec"),
        ("ops", "", "a_spec"),  # a name the check cannot read
        ("ops", "bit_length", "a_spec"),  # `n` of a tuple bound from a getter: over-approximated
        ("other", "seven", ""),  # a `mod` tied to no getter
    ]


def test_sync_fails_when_an_export_is_removed() -> None:
    line = "TVM_FFI_DLL_EXPORT_TYPED_FUNC(fused_add_rmsnorm, fused_add_rmsnorm);"
    problems = _binding_problems({"ember/csrc/ops/norm.cc": (line, "")})
    assert len(problems) == 1
    msg = problems[0]
    assert msg.startswith("ember.ops.norm calls mod.fused_add_rmsnorm() (")
    assert "built by norm_spec(), but the binding of specs norm_bf16, norm_fp16, norm_fp32" in msg


def test_sync_fails_when_one_spec_of_a_family_loses_an_export_another_keeps() -> None:
    """toy's host module (toy_host.cc) still exports axpy; the CUDA one no longer does."""
    from ember.ops import toy

    (line,) = [c.line for c in module_calls(inspect.getsource(toy)) if c.name == "axpy"]
    problems = _binding_problems(
        {"ember/csrc/ops/toy.cu": ("TVM_FFI_DLL_EXPORT_TYPED_FUNC(axpy, axpy);", "")}
    )
    assert problems == [
        f"ember.ops.toy calls mod.axpy() (axpy() line {line}) on modules built by cuda_spec(), but"
        " the binding of spec toy_axpy_cuda (toy.cu) does not export it"
        " (TVM_FFI_DLL_EXPORT_TYPED_FUNC names: []); export it there or call a name it exports"
    ]


def test_sync_fails_when_a_spec_is_not_tied_to_the_calls() -> None:
    """A spec function whose modules are used but whose specs the family does not register, and
    a registered spec that no used spec function made: neither leaves its exports unchecked."""
    from ember.ops import toy

    made, orphans = specs_by_builder(toy, {"host_spec"}, toy._specs)
    assert [s.uri for s in made["host_spec"]] == ["toy_axpy_host"]
    assert [s.uri for s in orphans] == ["toy_axpy_cuda"]
    call = ModuleCall("plan", "plan_batch_decode", 543, frozenset({"planner_spec"}))
    assert export_problems("ember.ops.decode", [call], {}, lambda spec: set()) == [
        "ember.ops.decode calls mod.plan() on modules built by planner_spec(), but its family's"
        " @register generator yields no spec from planner_spec(), so no export is checked; yield"
        " its specs there (R3.12)"
    ]


def test_sync_fails_when_the_module_of_a_call_cannot_be_told() -> None:
    """A module that reaches a call by a way the analysis does not follow fails, not passes."""
    problems = _binding_problems(
        {"ember/ops/paged.py": ("    _paged().append(\n", "    mod = _PAGED\n    mod.append(\n")}
    )
    assert len(problems) == 1
    msg = problems[0]
    assert msg.startswith("ember.ops.paged:")
    assert "(append_paged_kv_cache) calls mod.append() on a module the check cannot tie" in msg


def test_an_export_in_a_comment_a_string_or_an_if_0_block_does_not_count() -> None:
    source = r"""
// TVM_FFI_DLL_EXPORT_TYPED_FUNC(line_commented, f);
/* TVM_FFI_DLL_EXPORT_TYPED_FUNC(block_commented, f);
   TVM_FFI_DLL_EXPORT_TYPED_FUNC(block_commented_2, f); */
const char* s = "// not a comment \" TVM_FFI_DLL_EXPORT_TYPED_FUNC(quoted, f);";
const char q = '"';
#if 0  // kept for the A/B
TVM_FFI_DLL_EXPORT_TYPED_FUNC(if_zero, f);
#ifdef EMBER_X
TVM_FFI_DLL_EXPORT_TYPED_FUNC(nested_in_if_zero, f);
#endif
#else
TVM_FFI_DLL_EXPORT_TYPED_FUNC(else_of_if_zero, f);
#endif
TVM_FFI_DLL_EXPORT_TYPED_FUNC(real, f);  /* a trailing comment */ // and another
"""
    assert exported_names(source) == {"else_of_if_zero", "real"}


def test_sync_fails_when_an_argument_is_renamed() -> None:
    def rmsnorm(inp, weight, eps=1e-6, *, out=None):  # `x` renamed to `inp`
        return inp

    problems = signature_problems("rmsnorm", rmsnorm, RMSNORM, {})
    assert any("trace input 'x' is not a parameter of ember.rmsnorm" in p for p in problems)
    assert any("required parameter 'inp' is not a trace input" in p for p in problems)


def test_sync_fails_when_an_optional_argument_is_renamed() -> None:
    def rmsnorm(x, weight, eps=1e-6, *, dst=None):  # `out` renamed to `dst`
        return x

    assert signature_problems("rmsnorm", rmsnorm, RMSNORM, {}) == [
        "rmsnorm: optional parameter 'dst' is not a trace input, an output buffer (out, out_*),"
        " opaque or untraced; name it out/out_* if it is an output buffer, else add it to the"
        " inputs of RMSNORM (ember/trace/dense.py), or to its untraced=(...) if the definition"
        " does not carry it (R8.6, R8.11)"
    ]


def test_sync_fails_when_an_untraced_name_is_not_a_parameter_or_is_an_input() -> None:
    """The template's untraced list is checked both ways: a stale name fails too."""
    from ember.ops.sampling import top_k_renorm_probs
    from ember.trace.sampling import TOP_K_RENORM_PROBS

    def renamed(probs, top_k, *, out=None, validate=False):  # `check` renamed to `validate`
        return probs

    problems = signature_problems("top_k_renorm_probs", renamed, TOP_K_RENORM_PROBS, {})
    assert problems == [
        "top_k_renorm_probs: TOP_K_RENORM_PROBS (ember/trace/sampling.py) lists 'check' in"
        " untraced, but ember.top_k_renorm_probs has no such parameter (parameters: ['probs',"
        " 'top_k', 'out', 'validate']); rename it there or drop it",
        "top_k_renorm_probs: optional parameter 'validate' is not a trace input, an output buffer"
        " (out, out_*), opaque or untraced; name it out/out_* if it is an output buffer, else add"
        " it to the inputs of TOP_K_RENORM_PROBS (ember/trace/sampling.py), or to its"
        " untraced=(...) if the definition does not carry it (R8.6, R8.11)",
    ]
    both = dataclasses.replace(TOP_K_RENORM_PROBS, untraced=("check", "top_k"))
    assert signature_problems("top_k_renorm_probs", top_k_renorm_probs, both, {}) == [
        "top_k_renorm_probs: the template of top_k_renorm_probs (ember/trace/sampling.py) lists"
        " trace input 'top_k' in untraced too; drop it"
    ]


def test_sync_fails_when_a_reference_is_edited_without_regenerating(tmp_path) -> None:
    import json

    from ember.trace import write_definitions

    write_definitions(tmp_path)
    assert definition_problems(REPO / "definitions", tmp_path) == []
    path = tmp_path / "rmsnorm_h4096.json"
    d = json.loads(path.read_text())
    d["reference"] = d["reference"].replace("+ eps", "+ 2 * eps")  # the edited reference
    path.write_text(json.dumps(d, indent=2) + "\n")
    problems = definition_problems(REPO / "definitions", tmp_path)
    assert problems == [
        "rmsnorm_h4096.json: differs from the regenerated definition; run `ember trace generate`"
        " and commit definitions/ (R3.16)"
    ]
    path.unlink()
    problems = definition_problems(REPO / "definitions", tmp_path)
    assert problems == [
        "rmsnorm_h4096.json: no template generates it; run `ember trace generate` and commit"
        " definitions/ (R3.16)"
    ]
