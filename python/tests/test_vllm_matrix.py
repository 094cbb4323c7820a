"""vLLM 0.6.3's paged-attention kernel test, on pagedattn.ops: its parameter grid covered pairwise (vllm_matrix.py
says how), each case built as vLLM builds it (7 sequences up to vLLM's longest length, random block tables over
4321 shared blocks, the unread blocks NaN) and called with vLLM's exact arguments, against a float64 reference with
vLLM's tolerances; and torch.library.opcheck on both operators, as vLLM's test runs it. Needs a CUDA device and
the built package (skipped otherwise), but for the check of the case list, which is plain Python."""
import zlib

import pytest

from vllm_matrix import CASES, NUM_BLOCKS, NUM_SEQS, coverage_gaps

try:
    import torch

    from paged_problem import VllmProblem, vllm_max_seq_len
except ImportError:  # no torch here: conftest skips every test but the case list's check
    torch = None
try:
    import pagedattn
except ImportError:  # no CUDA build here: conftest skips every test but the case list's check
    pagedattn = None

PARTITION_SIZE = 512  # vLLM 0.6.3's v2 partition, which sizes its workspace (pagedattn does not use it)

# vLLM's tolerances: 16- and 32-bit caches, fp8 caches (its reference reads the dequantized cache).
TOLERANCES = {"auto": dict(atol=1e-3, rtol=1e-5), "fp8": dict(atol=1e-2, rtol=1e-5)}

# The test utilities vLLM's test runs opcheck with (its ALL_OPCHECK_TEST_UTILS).
OPCHECK_TEST_UTILS = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")


@pytest.mark.host
def test_cases_cover_every_pair():
    """Every pair of values of two of vLLM's parameters is in a case that computes, but head size 120 with an fp8
    cache, which the refusal cases hold with every value of the other parameters; no more than ~30 cases."""
    assert coverage_gaps(CASES) == []
    assert len(CASES) <= 30


def vllm_workspace(problem):
    """v2's exp_sums, max_logits and tmp_out, as vLLM sizes them."""
    num_seqs, num_heads, head_size = problem.query.shape
    partitions = -(-problem.max_seq_len // PARTITION_SIZE)
    exp_sums = torch.empty(num_seqs, num_heads, partitions, dtype=torch.float32, device="cuda")
    return exp_sums, torch.empty_like(exp_sums), torch.empty(num_seqs, num_heads, partitions, head_size, dtype=problem.dtype,
                                                                 device="cuda")


def vllm_arguments(problem):
    """The arguments after out (and v2's workspace) that vLLM's test passes."""
    return (problem.query, problem.key_cache, problem.value_cache, problem.num_kv_heads, problem.scale, problem.block_tables,
            problem.seq_lens, problem.block_size, problem.max_seq_len, problem.alibi_slopes, problem.kv_cache_dtype,
            problem.k_scale, problem.v_scale)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_vllm_paged_attention_matrix(case):
    """One case of vLLM's grid through pagedattn.ops.paged_attention_v1 or v2 with vLLM's arguments (v2 with its
    workspace), against the float64 reference at vLLM's tolerances; head size 120 with an fp8 cache refused."""
    num_heads, num_kv_heads = case.heads
    p = VllmProblem(num_heads, num_kv_heads, case.head_size, case.block_size, getattr(torch, case.dtype), case.alibi,
                    case.kv_cache_dtype, vllm_max_seq_len(), seed=zlib.crc32(case.id.encode()), num_seqs=NUM_SEQS,
                    num_blocks=NUM_BLOCKS)
    assert p.key_cache.dtype == (torch.uint8 if case.kv_cache_dtype == "fp8" else p.dtype)
    output = torch.empty_like(p.query)
    if case.version == "v1":
        def run():
            pagedattn.ops.paged_attention_v1(output, *vllm_arguments(p))
    else:
        workspace = vllm_workspace(p)

        def run():
            pagedattn.ops.paged_attention_v2(output, *workspace, *vllm_arguments(p))
    if case.refused:
        with pytest.raises(ValueError, match="head_size 120 is not supported with a 1-byte cache element"):
            run()
        torch.cuda.synchronize()  # and nothing left on the stream fails later
        return
    run()
    torch.testing.assert_close(output.double(), p.reference(), **TOLERANCES[case.kv_cache_dtype])


def small_vllm_problem(dtype, kv_cache_dtype, alibi):
    """A small problem of vLLM's kind for opcheck, which runs the operator several times: head size 64, GQA 4, 7
    sequences up to 700 tokens (two v2 partitions), 256 blocks, no NaN (opcheck compares the inputs before and
    after each call)."""
    return VllmProblem(16, 4, 64, 16, getattr(torch, dtype), alibi, kv_cache_dtype, 700, seed=41, num_seqs=NUM_SEQS, num_blocks=256,
                       poison=False)


@pytest.mark.parametrize("version", ["v1", "v2"])
@pytest.mark.parametrize("kv_cache_dtype", ["auto", "fp8"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_opcheck(dtype, kv_cache_dtype, version):
    """torch.library.opcheck on the registered operators with vLLM's full argument lists (tp_rank and the
    block-sparse arguments as vLLM's test passes them: 0, 0, 0, 64, 0): the schema (out mutated, nothing else),
    FakeTensor, AOTDispatch with dynamic shapes. v2 with ALiBi, v1 without. The workspace is zeroed: its bits are
    compared before and after."""
    p = small_vllm_problem(dtype, kv_cache_dtype, alibi=version == "v2")
    output = torch.empty_like(p.query)
    tail = vllm_arguments(p) + (0, 0, 0, 64, 0)
    if version == "v1":
        op, args = torch.ops.pagedattn.paged_attention_v1.default, (output,) + tail
    else:
        workspace = tuple(t.zero_() for t in vllm_workspace(p))
        op, args = torch.ops.pagedattn.paged_attention_v2.default, (output,) + workspace + tail
    torch.library.opcheck(op, args, test_utils=OPCHECK_TEST_UTILS)
    # And the operator's result against the reference (opcheck's calls ran on copies).
    op(*args)
    torch.testing.assert_close(output.double(), p.reference(), **TOLERANCES[kv_cache_dtype])
