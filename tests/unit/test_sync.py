"""The one sync test (R3.14-R3.17, R8.4, R8.11, R8.15): the spec registry, the binding exports,
the Python calls into modules, ``ember.__all__``, the trace templates, the bench routines, the
docs' API list and the committed definitions agree; the last tests show that removing an export,
renaming an argument or editing a reference without regenerating makes it fail."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import ember
from ember.api_log import REGISTRY
from ember.bench.routines import all_routines
from ember.jit.registry import OP_MODULES, all_specs, registered_families
from ember.trace.check import (
    binding_exports,
    definition_problems,
    export_problems,
    exported_names,
    module_calls,
    signature_problems,
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


def _calls_and_exports() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Per op module: the module functions its Python calls, and what its specs' bindings
    export (``TVM_FFI_DLL_EXPORT_TYPED_FUNC``)."""
    calls, exports = {}, {}
    for family, gen in registered_families().items():
        module = importlib.import_module(gen.__module__)
        where = gen.__module__
        calls[where] = module_calls(Path(module.__file__).read_text())
        exports[where] = binding_exports(src for spec in gen() for src in spec.sources)
        assert exports[where], f"{family}: its specs export nothing"
    return calls, exports


def test_every_module_call_is_a_binding_export() -> None:
    calls, exports = _calls_and_exports()
    assert sum(map(len, calls.values())) >= 10  # the regex still sees the calls
    assert export_problems(calls, exports) == []


def test_trace_templates_agree_with_the_api_and_definitions_are_current() -> None:
    """Every public op has a template whose inputs name its parameters and whose reference takes
    them; plan_batch_decode is the one exemption; definitions/ is what `ember trace generate`
    writes now (regenerated into a temp dir and diffed)."""
    assert set(EXEMPT) == {"plan_batch_decode"}
    assert {t.op for t in TEMPLATES} | set(EXEMPT) == set(PUBLIC_OPS)
    assert trace_problems(REPO / "definitions") == []


def test_docs_list_every_public_op_and_the_guide_names_the_sync_test() -> None:
    guide = (REPO / "docs" / "adding-a-kernel.md").read_text()
    assert "tests/unit/test_sync.py" in guide
    assert "ember trace generate" in guide
    assert "docs/adding-a-kernel.md" in (REPO / "README.md").read_text()


def test_sync_fails_when_an_export_is_removed() -> None:
    calls, exports = _calls_and_exports()
    exports["ember.ops.norm"] = exports["ember.ops.norm"] - {"fused_add_rmsnorm"}
    problems = export_problems(calls, exports)
    assert len(problems) == 1
    assert "ember.ops.norm calls mod.fused_add_rmsnorm()" in problems[0]


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
