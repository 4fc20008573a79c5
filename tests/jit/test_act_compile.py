"""The gated activations on a machine with no GPU: compile for sm_90a, validate every input (R4.6).

The binding checks dtypes, shapes and strides before devices, so bad inputs are tested here on
CPU tensors: each raises a clear exception naming the argument and what was expected.
"""

from __future__ import annotations

import re
import shutil

import pytest
import torch

import ember
from ember.jit import build, resolve
from ember.ops import act

pytestmark = [
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed"),
    pytest.mark.usefixtures("sm90a_builds"),
]

OPS = ["silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul"]


def test_module_builds_binding_and_kernels_for_exactly_sm90a() -> None:
    mod = act._module(torch.zeros(1, dtype=torch.bfloat16), "test")
    assert all(getattr(mod, op) is not None for op in OPS)
    manifest = (build(resolve(act.act_spec("bf16"))).parent / "build.ninja").read_text()
    assert re.findall(r"-gencode=\S+", manifest) == ["-gencode=arch=compute_90a,code=sm_90a"]
    assert "build act.o: cxx " in manifest and "build act_1.o: nvcc " in manifest


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize(
    ("x", "out", "err", "pattern"),
    [
        (torch.zeros(4, 7, dtype=torch.bfloat16), None, ValueError, r"an even last dimension"),
        (
            torch.zeros(4, 8, dtype=torch.bfloat16),
            torch.zeros(4, 8, dtype=torch.bfloat16),
            ValueError,
            r"`out` must be `x`'s shape with the last dimension halved \(4\), got \[4, 8\]",
        ),
        (
            torch.zeros(4, 8, dtype=torch.bfloat16),
            torch.zeros(4, 4, dtype=torch.float16),
            TypeError,
            r"`out` must have dtype bfloat16, got float16",
        ),
        (torch.zeros(4, 8, dtype=torch.int32), None, TypeError, r"must be bfloat16, float16 or"),
        (
            torch.zeros(8, 4, dtype=torch.bfloat16).t(),
            None,
            ValueError,
            r"last dimension of `x` must be contiguous \(stride 1\), got stride 4",
        ),
        (
            torch.zeros(2, 6, 8, dtype=torch.bfloat16)[:, :3],
            None,
            ValueError,
            r"leading dimensions of `x` must flatten to rows",
        ),
        (torch.zeros(4, 8, dtype=torch.bfloat16), None, ValueError, r"`x` must be on a CUDA"),
    ],
)
def test_bad_inputs_raise_before_launch(op, x, out, err, pattern) -> None:
    with pytest.raises(err, match=pattern):
        getattr(ember, op)(x, out=out)


def test_leading_dimensions_that_flatten_are_accepted_up_to_the_device_check() -> None:
    x = torch.zeros(3, 5, 16, dtype=torch.float16)[:, :, :]  # dense
    strided = torch.zeros(6, 32, dtype=torch.float32)[:, :16]  # row stride 32
    last_token = torch.zeros(4, 3, 16, dtype=torch.float16)[:, -1:, :]  # an extent-1 dim, stride 16
    for t in (x, strided, last_token, torch.zeros(16, dtype=torch.bfloat16)):
        with pytest.raises(ValueError, match=r"`x` must be on a CUDA device, got cpu"):
            ember.silu_and_mul(t)


def test_unsupported_dtype_in_spec_raises() -> None:
    with pytest.raises(ValueError, match=r"dtype must be one of \['bf16', 'fp16', 'fp32'\]"):
        act.act_spec("fp8")
