"""Softmax with temperature on the GPU against an fp64 reference (R4.1-R4.7; sm_90+)."""

from __future__ import annotations

import pytest
import torch

import ember
from ember.jit import KernelSpec, all_specs
from ember.testing import requires

pytestmark = requires(feature="sampling")


def PREBUILD() -> list[KernelSpec]:  # noqa: N802 (tests/ops/conftest.py builds these ahead)
    return all_specs("sampling")


DTYPES = [torch.bfloat16, torch.float16, torch.float32]


def reference(logits: torch.Tensor, temperature) -> torch.Tensor:
    t = temperature if temperature is not None else 1.0
    if isinstance(t, torch.Tensor):
        t = t.double()[:, None]
    return torch.softmax(logits.double() / t, dim=-1)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    ("rows", "vocab"),
    [(1, 1), (3, 7), (5, 1000), (128, 32000), (128, 128256), (2, 152064), (4, 260000)],
)
@pytest.mark.parametrize("temp", ["none", "scalar", "tensor"])
def test_matches_reference(dtype, rows, vocab, temp):
    logits = (4 * torch.randn(rows, vocab, device="cuda")).to(dtype)
    t = {"none": None, "scalar": 0.7, "tensor": torch.rand(rows, device="cuda") + 0.3}[temp]
    out = torch.full((rows, vocab), float("nan"), device="cuda")
    got = ember.softmax(logits, t, out=out)
    assert got is out
    assert not torch.isnan(got).any(), "unwritten (poisoned) elements"
    torch.testing.assert_close(got.double(), reference(logits, t), rtol=1e-4, atol=1e-12)
    torch.testing.assert_close(
        got.sum(-1).double(),
        torch.ones(rows, dtype=torch.float64, device="cuda"),
        rtol=1e-4,
        atol=1e-4,
    )


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_many_more_rows_than_resident_clusters(dtype):
    # rows > clusters that fit at once, chunks of 16 000 (softmax_persistent_kernel loops over
    # rows); strided aligned rows, per-row temperatures, -inf logits and a row with one finite
    # logit
    base = (4 * torch.randn(301, 128048, device="cuda")).to(dtype)
    logits = base[:, :128000]
    logits[::7, :300] = float("-inf")
    logits[5, :] = float("-inf")
    logits[5, 12345] = 2.0
    t = torch.rand(301, device="cuda") + 0.3
    out = torch.full((301, 128000), float("nan"), device="cuda")
    got = ember.softmax(logits, t, out=out)
    assert not torch.isnan(got).any(), "unwritten (poisoned) elements"
    torch.testing.assert_close(got.double(), reference(logits, t), rtol=1e-4, atol=1e-12)
    assert got[5, 12345] == 1.0


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize("vocab", [32000, 49152])
def test_many_rows_of_a_mid_size_vocabulary(dtype, vocab):
    # 600 rows: more than the clusters of 2 (32 000) or 4 (49 152) CTAs that fit at once, the
    # shape EMBER_SOFTMAX_NARROW (the default) sends to softmax_persistent_kernel<T, 2 or 4>
    # (-DEMBER_SOFTMAX_NARROW=0 runs softmax_kernel); per-row temperatures, -inf logits, a row of
    # one finite logit
    logits = (4 * torch.randn(600, vocab, device="cuda")).to(dtype)
    logits[::5, :700] = float("-inf")
    logits[9, :] = float("-inf")
    logits[9, vocab - 1] = -3.0
    t = torch.rand(600, device="cuda") + 0.3
    out = torch.full((600, vocab), float("nan"), device="cuda")
    got = ember.softmax(logits, t, out=out)
    assert not torch.isnan(got).any(), "unwritten (poisoned) elements"
    torch.testing.assert_close(got.double(), reference(logits, t), rtol=1e-4, atol=1e-12)
    assert got[9, vocab - 1] == 1.0


@pytest.mark.parametrize(
    ("dtype", "vocab"),
    [
        (torch.float32, 65544),  # just above the narrow clusters' rows
        (torch.float32, 100004),
        (torch.float32, 131072),  # the 8-CTA persistent clusters' largest chunk
        (torch.bfloat16, 262144),  # chunks above it: softmax_kernel
        (torch.float16, 152064),
    ],
    ids=str,
)
def test_many_rows_of_large_vocabularies(dtype, vocab):
    # 200 rows: more than fit at once, so the persistent kernels loop over rows (the grid
    # kernel's 33 groups of 8 CTAs at 131 072, the clusters elsewhere) and load the next row
    # while they store the current one (these vocabularies were the limits of
    # session 13's 2-CTA softmax_pair_kernel, removed: notes/act.md);
    # per-row temperatures, -inf logits at both halves' ends, a row of one finite logit in the
    # second half's register packs, a row of all -inf (152: NaN, as documented)
    rows = 200
    logits = (4 * torch.randn(rows, vocab, device="cuda")).to(dtype)
    logits[::3, :500] = float("-inf")
    logits[1::3, -500:] = float("-inf")
    logits[77, :] = float("-inf")
    logits[77, vocab - 3] = 1.5
    logits[152, :] = float("-inf")
    t = torch.rand(rows, device="cuda") + 0.3
    out = torch.full((rows, vocab), float("nan"), device="cuda")
    got = ember.softmax(logits, t, out=out)
    assert bool(torch.isnan(got[152]).all()), "a row of all -inf gives NaN"
    keep = torch.arange(rows, device="cuda") != 152
    assert not torch.isnan(got[keep]).any(), "unwritten (poisoned) elements"
    torch.testing.assert_close(
        got[keep].double(), reference(logits[keep], t[keep]), rtol=1e-4, atol=1e-12
    )
    assert got[77, vocab - 3] == 1.0
    assert bool((got[::3, :500] == 0).all()) and bool((got[1::3, -500:] == 0).all())


def test_softmax_in_a_cuda_graph_replays_with_new_logits():
    # a graph captured once is right for new logits at every replay (for softmax_grid_kernel's
    # rows, 48 or more, the replays reuse one workspace, whose counts the captured memset
    # zeroes: a count left over from the last replay would end a wait early)
    rows, vocab = 128, 128256
    x = 4 * torch.randn(rows, vocab, device="cuda")
    t = torch.rand(rows, device="cuda") + 0.3
    out = torch.empty(rows, vocab, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        ember.softmax(x, t, out=out)  # builds and warms up outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ember.softmax(x, t, out=out)
    for _ in range(3):
        x.copy_(4 * torch.randn(rows, vocab, device="cuda"))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert not torch.isnan(out).any(), "unwritten (poisoned) elements"
        torch.testing.assert_close(out.double(), reference(x, t), rtol=1e-4, atol=1e-12)


def test_softmax_on_two_streams_at_once():
    # two streams' launches in flight together never share state (softmax_grid_kernel's calls
    # each have their own workspace)
    rows, vocab = 128, 128256
    xs = [4 * torch.randn(rows, vocab, device="cuda") for _ in range(2)]
    outs = [torch.full((rows, vocab), float("nan"), device="cuda") for _ in range(2)]
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    torch.cuda.synchronize()
    for _ in range(4):
        for x, out, stream in zip(xs, outs, streams, strict=True):
            with torch.cuda.stream(stream):
                ember.softmax(x, 0.8, out=out)
    torch.cuda.synchronize()
    for x, out in zip(xs, outs, strict=True):
        torch.testing.assert_close(out.double(), reference(x, 0.8), rtol=1e-4, atol=1e-12)


@pytest.mark.parametrize("fill", ["ones", "eight", "random", "last_call"])
def test_softmax_grid_workspace_may_hold_anything(fill):
    # the binding zeroes softmax_grid_kernel's counts itself (ember.softmax passes torch.empty):
    # whatever the workspace holds on entry — all-ones, counts already at 8 (which would end an
    # unzeroed wait early), random words, or what the previous call left — the probabilities
    # are right and every element is written
    rows, vocab = 128, 128256
    from ember.ops.sampling import _module

    logits = 4 * torch.randn(rows, vocab, device="cuda")
    mod = _module(logits, "test")
    words = mod.softmax_workspace_words(rows, vocab)
    assert words > 0, "these rows take softmax_grid_kernel"
    if fill == "ones":
        ws = torch.full((words,), -1, dtype=torch.int32, device="cuda")
    elif fill == "eight":
        ws = torch.full((words,), 8, dtype=torch.int32, device="cuda")
    else:
        ws = torch.randint(-(2**31), 2**31 - 1, (words,), dtype=torch.int32, device="cuda")
    if fill == "last_call":
        mod.softmax(4 * torch.randn(rows, vocab, device="cuda"), torch.empty_like(logits), None,
                    1.0, ws)  # fmt: skip
    out = torch.full((rows, vocab), float("nan"), device="cuda")
    mod.softmax(logits, out, None, 0.7, ws)
    torch.cuda.synchronize()
    assert not torch.isnan(out).any(), "unwritten (poisoned) elements"
    torch.testing.assert_close(out.double(), reference(logits, 0.7), rtol=1e-4, atol=1e-12)


@pytest.mark.parametrize("rows", [8, 128])
def test_output_rows_off_the_16_byte_grid(rows):
    # `out` a view whose rows start 4 bytes past alignment and whose stride is odd: both store
    # paths (the cluster kernel at 8 rows, softmax_grid_kernel at 128) write all of the view
    # and nothing outside it
    vocab = 128256
    logits = 4 * torch.randn(rows, vocab, device="cuda")
    base = torch.full((rows, vocab + 3), float("nan"), device="cuda")
    out = base[:, 1 : vocab + 1]
    got = ember.softmax(logits, 0.9, out=out)
    assert not torch.isnan(got).any(), "unwritten (poisoned) elements"
    torch.testing.assert_close(got.double(), reference(logits, 0.9), rtol=1e-4, atol=1e-12)
    assert bool(torch.isnan(base[:, 0]).all()) and bool(torch.isnan(base[:, vocab + 1 :]).all())


def test_minus_inf_logits_get_zero_and_strided_unaligned_rows():
    base = torch.randn(6, 50010, device="cuda").to(torch.bfloat16)
    logits = base[:, 3:50003]  # rows start 6 bytes past alignment: the element path
    logits[:, :100] = float("-inf")
    got = ember.softmax(logits, 1.3)
    assert bool((got[:, :100] == 0).all())
    torch.testing.assert_close(got.double(), reference(logits, 1.3), rtol=1e-4, atol=1e-12)


def test_a_large_row_after_a_small_one_and_the_largest_vocabulary():
    # the shared memory opt-in must follow the largest launch, not the first
    for vocab in (1000, 464384, 2048):
        logits = torch.randn(2, vocab, device="cuda")
        got = ember.softmax(logits, 0.9)
        torch.testing.assert_close(got.double(), reference(logits, 0.9), rtol=1e-4, atol=1e-12)


def test_sampling_matches_the_distribution_chi_square():
    # 8 tokens with distinct probabilities (two of them 0), 200 000 draws over 2 000 rows x 100
    # offsets: Pearson's chi-square with 5 degrees of freedom below its 0.999 quantile (20.5).
    p = torch.tensor([0.3, 0.0, 0.2, 0.15, 0.0, 0.1, 0.05, 0.2], device="cuda")
    probs = p.repeat(2000, 1)
    counts = torch.zeros(8, device="cuda")
    for off in range(100):
        s = ember.sampling_from_probs(probs, seed=123, offset=off)
        assert s.dtype == torch.int32 and bool(((s >= 0) & (s < 8)).all())
        counts += torch.bincount(s.long(), minlength=8).float()
    assert counts[1] == 0 and counts[4] == 0, "a token of probability 0 was drawn"
    expected = p * counts.sum()
    nz = expected > 0
    chi2 = (((counts - expected) ** 2)[nz] / expected[nz]).sum().item()
    assert chi2 < 20.5, chi2


def test_sampling_is_reproducible_and_spans_the_cluster():
    logits = 3 * torch.randn(64, 128256, device="cuda")
    logits[:, : 128256 // 2] = float("-inf")  # only the second half (CTAs 4-7) has mass
    probs = torch.softmax(logits, -1)
    a = ember.sampling_from_probs(probs, seed=5, offset=9)
    b = ember.sampling_from_probs(probs, seed=5, offset=9)
    c = ember.sampling_from_probs(probs, seed=5, offset=10)
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert bool((a >= 128256 // 2).all()) and bool((a < 128256).all())
    assert bool((probs.gather(1, a.long()[:, None]) > 0).all())


def test_sampling_degenerate_rows():
    probs = torch.zeros(4, 5000, device="cuda")
    probs[0, 4999] = 1.0  # one token
    probs[2, 17] = float("nan")  # not finite: -1
    probs[3, 99] = float("inf")
    out = torch.full((4,), 12345, dtype=torch.int32, device="cuda")  # an unwritten row shows
    s = ember.sampling_from_probs(probs, seed=1, out=out)
    assert s.tolist() == [4999, -1, -1, -1]


def philox4x32_10(ctr: list[int], key: list[int]) -> list[int]:
    """Random123's Philox4x32-10, for exact expectations."""
    m = 0xFFFFFFFF
    c, k = list(ctr), list(key)
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [((p1 >> 32) ^ c[1] ^ k[0]) & m, p1 & m, ((p0 >> 32) ^ c[3] ^ k[1]) & m, p0 & m]
        k = [(k[0] + 0x9E3779B9) & m, (k[1] + 0xBB67AE85) & m]
    return c


def test_philox_known_answer_and_draws_are_exact():
    assert philox4x32_10([0, 0, 0, 0], [0, 0]) == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
    # uniform weights over 8 tokens: the draw is exactly the top 3 bits of Philox's first word
    seed, offset = (3 << 40) + 17, 5
    got = ember.sampling_from_probs(torch.ones(300, 8, device="cuda"), seed=seed, offset=offset)
    key = [seed & 0xFFFFFFFF, seed >> 32]
    want = [philox4x32_10([offset, 0, r, 0], key)[0] >> 29 for r in range(300)]
    assert got.tolist() == want


@pytest.mark.parametrize("vocab", [64000, 64001])  # the 16-byte path and the element path
def test_sampling_distribution_across_the_cluster(vocab):
    # mass on 10 tokens spread over the 8 CTAs, many warps and multi-element segments
    where = torch.tensor([5, 100, 9000, 17000, 25000, 33000, 41000, 49000, 57000, 63000])
    weights = torch.tensor([1.0, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    probs = torch.zeros(1000, vocab, device="cuda")
    probs[:, where.cuda()] = weights.cuda() / weights.sum()
    counts = torch.zeros(vocab, device="cuda")
    for off in range(50):
        s = ember.sampling_from_probs(probs, seed=99, offset=off)
        counts += torch.bincount(s.long(), minlength=vocab).float()
    assert counts.sum() == 50_000 and counts[where.cuda()].sum() == 50_000
    expected = (weights / weights.sum() * 50_000).cuda()
    chi2 = ((counts[where.cuda()] - expected) ** 2 / expected).sum().item()
    assert chi2 < 27.9, chi2  # 9 degrees of freedom, 0.999 quantile
