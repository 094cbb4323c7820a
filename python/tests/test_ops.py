"""pagedattn's PyTorch operators against the torch reference; vLLM's signatures; fp8 caches as vLLM passes
them; CUDA graphs, torch.compile, strided queries and every bad input. Needs a CUDA device and the built
package (skipped otherwise)."""
import inspect
import json
import math
import pathlib
import re
import subprocess
import sys

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from paged_problem import FP8_DTYPES, Problem, relative_error, tolerance

try:
    import pagedattn
except ImportError:  # no CUDA build here: conftest skips every test
    pagedattn = None

DTYPES = [torch.float16, torch.bfloat16, torch.float32]


def run_decode(p, **kwargs):
    return pagedattn.decode(p.query, p.key_cache, p.value_cache, p.block_tables, p.seq_lens,
                            alibi_slopes=p.alibi_slopes, max_seq_len=p.max_seq_len, **kwargs)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("head_size", [64, 80, 96, 112, 120, 128, 192, 256])
def test_head_sizes_and_dtypes(dtype, head_size):
    p = Problem([1, 17, 300, 1000], 8, 2, head_size, dtype=dtype, seed=head_size)
    assert relative_error(run_decode(p), p.reference()) < tolerance(dtype)


@pytest.mark.parametrize("block_size", [8, 16, 32])
@pytest.mark.parametrize("heads", [(4, 4), (24, 4), (32, 4), (32, 2)])  # GQA 1, 6, 8, 16
@pytest.mark.parametrize("alibi", [False, True])
def test_block_sizes_gqa_alibi(block_size, heads, alibi):
    num_heads, num_kv_heads = heads
    p = Problem([5, 0, 513, 2049, 33], num_heads, num_kv_heads, 128, block_size=block_size, alibi=alibi, seed=block_size)
    assert relative_error(run_decode(p), p.reference()) < tolerance(torch.float16)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("logits_soft_cap", [0.0, 1.5, 30.0])
@pytest.mark.parametrize("with_sinks", [False, True])
def test_soft_cap_and_sinks(dtype, logits_soft_cap, with_sinks):
    p = Problem([1, 17, 0, 5003], 24, 4, 128, dtype=dtype, alibi=with_sinks, seed=31)
    sinks = (torch.tensor([float("-inf"), 0.5, 2.0, 6.0] * 6, dtype=torch.float32, device="cuda") if with_sinks else None)
    out = run_decode(p, logits_soft_cap=logits_soft_cap, sinks=sinks)
    assert relative_error(out, p.reference(logits_soft_cap=logits_soft_cap, sinks=sinks)) < tolerance(dtype)


@pytest.mark.parametrize("window_left", [0, 37, 1000, 4095, 10000])
def test_sliding_window(window_left):
    p = Problem([1, 17, 0, 5003, 1000], 24, 4, 128, alibi=window_left == 37, seed=33)
    sinks = torch.tensor([float("-inf"), 0.5, 2.0, 6.0] * 6, dtype=torch.float32, device="cuda") if window_left == 1000 else None
    out = run_decode(p, window_left=window_left, logits_soft_cap=30.0 if window_left == 4095 else 0.0, sinks=sinks)
    ref = p.reference(window_left=window_left, logits_soft_cap=30.0 if window_left == 4095 else 0.0, sinks=sinks)
    assert relative_error(out, ref) < tolerance(torch.float16)


@pytest.mark.parametrize("q_len", [1, 2, 4, 8])
def test_several_new_tokens(q_len):
    """q_len new tokens per sequence (rows s * q_len + i), causal among them: lengths shorter than q_len (rows
    that see nothing are 0), an empty sequence, a long one; with q_len 4 also a window, ALiBi and sinks."""
    lens = [1, 3, 0, 5003, 1000]
    p = Problem(lens, 24, 4, 128, alibi=q_len == 4, seed=34 + q_len, q_len=q_len)
    window_left = 37 if q_len == 4 else -1
    sinks = torch.tensor([float("-inf"), 0.5, 2.0, 6.0] * 6, dtype=torch.float32, device="cuda") if q_len == 4 else None
    out = run_decode(p, q_len=q_len, window_left=window_left, sinks=sinks)
    assert out.shape == (len(lens) * q_len, 24, 128)
    ref = p.reference(window_left=window_left, sinks=sinks)
    assert relative_error(out, ref) < tolerance(torch.float16)
    for s, n in enumerate(lens):  # a row whose token sees no position: exactly 0
        for i in range(q_len):
            if n - q_len + 1 + i <= 0:
                assert torch.all(out[s * q_len + i] == 0), (s, i)
    if q_len == 1:  # the default
        assert torch.equal(out, run_decode(p))


def test_query_start_loc():
    """Each sequence its own new tokens (query_start_loc, vLLM V1's): 0 .. q_len of them in packed rows, a
    length shorter than its rows, rows past the last sequence's untouched; offsets of q_len rows each give the
    bits of the uniform call; a bad tensor is named, invalid offsets give NaN rows."""
    lens, counts = [1, 3, 0, 5003, 1000, 77], [2, 1, 0, 4, 3, 4]
    p = Problem(lens, 24, 4, 128, seed=40, q_len=4)
    starts = [0]
    for c in counts:
        starts.append(starts[-1] + c)
    query = torch.randn(starts[-1] + 2, 24, 128, dtype=p.dtype, device="cuda")  # two spare rows
    loc = torch.tensor(starts, dtype=torch.int32, device="cuda")
    out = torch.full_like(query, float("nan"))
    pagedattn.decode(query, p.key_cache, p.value_cache, p.block_tables, p.seq_lens, max_seq_len=p.max_seq_len, q_len=4,
                     query_start_loc=loc, out=out)
    for n in sorted(set(counts) - {0}):  # the reference of the sequences with n rows, as a call of q_len n
        q_n = torch.zeros(len(lens) * n, 24, 128, dtype=p.dtype, device="cuda")
        for s, c in enumerate(counts):
            if c == n:
                q_n[s * n:(s + 1) * n] = query[starts[s]:starts[s] + n]
        ref = p.reference(query=q_n, q_len=n)
        for s, c in enumerate(counts):
            if c == n:
                assert relative_error(out[starts[s]:starts[s] + n], ref[s * n:(s + 1) * n]) < tolerance(p.dtype), (s, n)
    assert torch.isnan(out[starts[-1]:]).all()
    uniform = torch.arange(0, 4 * len(lens) + 1, 4, dtype=torch.int32, device="cuda")
    assert torch.equal(run_decode(p, q_len=4, query_start_loc=uniform), run_decode(p, q_len=4))
    with pytest.raises(ValueError, match="query_start_loc"):
        run_decode(p, q_len=4, query_start_loc=uniform.long())
    with pytest.raises(ValueError, match="query_start_loc"):  # 5 sequences for 6 block table rows
        run_decode(p, q_len=4, query_start_loc=uniform[:-1])
    bad = torch.tensor([0, 2, 9, 10, 14, 17, 21], dtype=torch.int32, device="cuda")  # sequence 1: 7 rows of at most 4
    out = run_decode(p, q_len=4, query_start_loc=bad)
    assert torch.isnan(out[2:6]).all() and torch.isfinite(out[:2]).all()


def test_q_len_is_checked():
    p = Problem([5, 40], 8, 2, 128, seed=36, q_len=4)  # 8 query rows
    for q_len in (0, 9, -1):
        with pytest.raises(ValueError, match="q_len"):
            run_decode(p, q_len=q_len)
    with pytest.raises(ValueError, match="query"):
        run_decode(p, q_len=3)  # 8 rows: not a multiple of 3
    with pytest.raises(ValueError, match="query"):  # 7 rows for 2 sequences of 4
        pagedattn.decode(p.query[:-1], p.key_cache, p.value_cache, p.block_tables, p.seq_lens, max_seq_len=40, q_len=4)
    with pytest.raises(ValueError, match="query"):
        run_decode(p, q_len=2)  # 8 rows: 4 sequences of 2, block_tables has 2
    with pytest.raises(ValueError, match="query"):
        run_decode(p)  # q_len 1: 8 sequences
    with pytest.raises(ValueError, match="out"):
        run_decode(p, q_len=4, out=torch.empty(2, 8, 128, dtype=p.dtype, device="cuda"))  # [num_seqs, ...]


def test_soft_cap_and_sinks_are_checked():
    p = Problem([5, 40], 8, 2, 128, seed=32)
    for bad, name in ((dict(logits_soft_cap=-1.0), "logits_soft_cap"), (dict(logits_soft_cap=float("nan")), "logits_soft_cap"),
                      (dict(sinks=torch.zeros(7, device="cuda")), "sinks"),
                      (dict(sinks=torch.zeros(8, dtype=torch.float16, device="cuda")), "sinks"),
                      (dict(window_left=-2), "window_left")):
        with pytest.raises(ValueError, match=name):
            run_decode(p, **bad)


def test_long_and_mixed_batches():
    p = Problem([100000], 24, 4, 256, seed=1)
    assert relative_error(run_decode(p), p.reference()) < tolerance(torch.float16)
    p = Problem([1, 100000, 7, 4096, 0, 65], 24, 4, 256, seed=2)
    assert relative_error(run_decode(p), p.reference()) < tolerance(torch.float16)


def test_vllm_v1_and_v2_signatures_and_results():
    names_v2 = ["out", "exp_sum", "max_logits", "tmp_out", "query", "key_cache", "value_cache", "num_kv_heads", "scale",
                "block_tables", "seq_lens", "block_size", "max_seq_len", "alibi_slopes", "kv_cache_dtype", "k_scale", "v_scale",
                "tp_rank", "blocksparse_local_blocks", "blocksparse_vert_stride", "blocksparse_block_size",
                "blocksparse_head_sliding_step"]
    assert list(inspect.signature(pagedattn.ops.paged_attention_v2).parameters) == names_v2
    names_v1 = [n for n in names_v2 if n not in ("exp_sum", "max_logits", "tmp_out")]
    assert list(inspect.signature(pagedattn.ops.paged_attention_v1).parameters) == names_v1

    p = Problem([3000, 1, 700], 24, 4, 128, seed=3)
    out1, out2 = torch.empty_like(p.query), torch.empty_like(p.query)
    args = (p.query, p.key_cache, p.value_cache, 4, p.scale, p.block_tables, p.seq_lens, 16, 3000, None, "auto", 1.0, 1.0)
    pagedattn.ops.paged_attention_v1(out1, *args)
    parts = -(-3000 // 512)
    exp_sums = torch.empty(3, 24, parts, dtype=torch.float32, device="cuda")
    tmp = torch.empty(3, 24, parts, 128, dtype=p.dtype, device="cuda")
    pagedattn.ops.paged_attention_v2(out2, exp_sums, exp_sums.clone(), tmp, *args)
    assert torch.equal(out1, out2)
    assert relative_error(out1, p.reference()) < tolerance(p.dtype)


def test_strided_query_view_of_fused_qkv():
    p = Problem([1000, 17], 24, 4, 128, seed=4)
    qkv = torch.randn(2, (24 + 2 * 4) * 128, dtype=p.dtype, device="cuda")
    query = qkv[:, : 24 * 128].view(2, 24, 128)
    query.copy_(p.query)
    assert not query.is_contiguous()
    out = pagedattn.decode(query, p.key_cache, p.value_cache, p.block_tables, p.seq_lens, max_seq_len=p.max_seq_len)
    assert torch.equal(out, run_decode(p))


def test_cuda_graph_replay_with_seq_lens_and_block_tables_rewritten():
    p = Problem([50000, 50000, 50000], 24, 4, 256, seed=5, max_blocks_per_seq=65536 // 16)
    stream = torch.cuda.Stream()
    out = torch.empty_like(p.query)
    stream.wait_stream(torch.cuda.current_stream())  # the problem's tensors, made on the current stream
    with torch.cuda.stream(stream):
        run_decode(p, out=out)  # warm up outside the capture
    stream.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        pagedattn.decode(p.query, p.key_cache, p.value_cache, p.block_tables, p.seq_lens, max_seq_len=65536, out=out)
    permuted = p.block_tables[[2, 0, 1]].clone()
    for lens, tables in [([1000, 1000, 1000], p.block_tables.clone()), ([50000, 17, 0], p.block_tables.clone()),
                         ([17, 50000, 3], permuted)]:
        p.seq_lens.copy_(torch.tensor(lens, dtype=torch.int32))
        p.block_tables.copy_(tables)
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        eager = pagedattn.decode(p.query, p.key_cache, p.value_cache, p.block_tables, p.seq_lens, max_seq_len=65536)
        assert torch.equal(out, eager)
        assert relative_error(out, p.reference(lens=lens)) < tolerance(p.dtype)


def test_torch_compile_without_graph_breaks():
    p = Problem([100, 2000], 24, 4, 128, seed=6)

    def step(query, key_cache, value_cache, block_tables, seq_lens):
        return pagedattn.decode(query * 1.0, key_cache, value_cache, block_tables, seq_lens, max_seq_len=2000) + 0.0

    compiled = torch.compile(step, fullgraph=True)
    out = compiled(p.query, p.key_cache, p.value_cache, p.block_tables, p.seq_lens)
    assert torch.equal(out, run_decode(p))


def test_eager_path_and_operator_agree():
    """A plain eager call skips the dispatcher (pagedattn._C.*_eager); the registered operator computes the
    same bits and raises the same errors, and the eager function declines what the dispatcher must see."""
    p = Problem([3000, 1, 700], 24, 4, 128, seed=11)
    args = [torch.full_like(p.query, float("nan")), p.query, p.key_cache, p.value_cache, p.block_tables, p.seq_lens, p.scale,
            p.max_seq_len, None, 0.0, None, -1, 1, None]  # (alibi_slopes, logits_soft_cap, sinks, window_left, q_len, query_start_loc: every argument, as the operator passes them)
    assert pagedattn._C.decode_eager(*args) is None
    eager = args[0].clone()
    args[0].fill_(float("nan"))
    torch.ops.pagedattn.decode.default(*args)
    assert torch.equal(eager, args[0]) and torch.equal(eager, run_decode(p, scale=p.scale))
    for device in ["meta", "cpu"]:
        assert pagedattn._C.decode_eager(*[a.to(device) if isinstance(a, torch.Tensor) else a for a in args]) is NotImplemented
    with TorchDispatchMode():  # a mode: the dispatcher's call
        assert pagedattn._C.decode_eager(*args) is NotImplemented
    with pytest.raises(TypeError, match="argument 6"):
        pagedattn._C.decode_eager(*args[:6], "0.1", *args[7:])
    for path in [pagedattn._C.paged_attention_v1_eager, torch.ops.pagedattn.paged_attention_v1.default]:
        with pytest.raises(ValueError, match="kv_cache_dtype"):
            path(torch.empty_like(p.query), p.query, p.key_cache, p.value_cache, 4, p.scale, p.block_tables, p.seq_lens, 16,
                 p.max_seq_len, None, "int8", 1.0, 1.0, 0, 0, 0, 64, 0)


def test_streams_keep_their_own_temporary_storage():
    """Eager calls on two streams at once, each with its own buffer (grown by a larger launch on one of
    them), each equal to a call on the default stream."""
    small = Problem([700, 3], 24, 4, 128, seed=12)
    large = Problem([30000, 5, 9000], 24, 4, 128, seed=13)
    expected = [run_decode(small), run_decode(large)]
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    torch.cuda.synchronize()
    outs = []
    for _ in range(3):
        for problem, stream in zip([small, large], streams):
            with torch.cuda.stream(stream):
                outs.append(run_decode(problem))
        for problem, stream in zip([large, small], streams):  # the first stream's buffer grows
            with torch.cuda.stream(stream):
                outs.append(run_decode(problem))
    torch.cuda.synchronize()
    for i, out in enumerate(outs):
        assert torch.equal(out, expected[[0, 1, 1, 0][i % 4]]), f"call {i}"


def test_meta_tensors_trace():
    p = Problem([10], 8, 2, 128, seed=7)
    meta = [t.to("meta") for t in (p.query, p.key_cache, p.value_cache, p.block_tables, p.seq_lens)]
    out = pagedattn.decode(*meta, max_seq_len=10)
    assert out.device.type == "meta" and out.shape == p.query.shape


def bad_cases():
    """(argument named in the message, keyword overrides of decode's inputs for a Problem p)."""
    def key_cache_4d(p):
        x = p.key_cache
        return dict(key_cache=x.reshape(x.shape[0], x.shape[1], -1, x.shape[3]))

    return [
        ("query", lambda p: dict(query=p.query.cpu())),
        ("query", lambda p: dict(query=p.query.to(torch.float64))),
        ("out", lambda p: dict(out=torch.empty(1, 1, 1, dtype=p.dtype, device="cuda"))),
        ("out", lambda p: dict(out=torch.empty_like(p.query, dtype=torch.float32))),
        ("key_cache", key_cache_4d),
        ("key_cache", lambda p: dict(key_cache=p.key_cache.to(torch.float32))),
        ("value_cache", lambda p: dict(value_cache=p.value_cache[:, :, :64])),
        ("block_tables", lambda p: dict(block_tables=p.block_tables.long())),
        ("block_tables", lambda p: dict(block_tables=p.block_tables[:1])),
        ("seq_lens", lambda p: dict(seq_lens=p.seq_lens.long())),
        ("seq_lens", lambda p: dict(seq_lens=p.seq_lens[:1])),
        ("alibi_slopes", lambda p: dict(alibi_slopes=torch.zeros(3, device="cuda"))),
        ("max_seq_len", lambda p: dict(max_seq_len=10 ** 7)),
        ("key_cache", lambda p: dict(key_cache=p.key_cache[0, 0, 0, 0])),  # 1-D, with max_seq_len given
        ("query", lambda p: dict(query=p.query[0])),  # 2-D
    ]


def run_bad_cases(cases):
    """In a child process (bad_input_outcomes): each case's outcome on one line, flushed before the next
    case starts, so that a crash names its case and spares the others' results."""
    for case in cases:
        print(f"start {case}", flush=True)
        try:
            p = Problem([40, 7], 8, 2, 128, seed=8)
            kwargs = dict(query=p.query, key_cache=p.key_cache, value_cache=p.value_cache, block_tables=p.block_tables,
                          seq_lens=p.seq_lens, max_seq_len=40, alibi_slopes=None, out=None)
            kwargs.update(bad_cases()[case][1](p))
            pagedattn.decode(kwargs.pop("query"), kwargs.pop("key_cache"), kwargs.pop("value_cache"), kwargs.pop("block_tables"),
                             kwargs.pop("seq_lens"), **kwargs)
            torch.cuda.synchronize()
            outcome = "no exception"
        except Exception as e:  # noqa: BLE001  (the parent judges the type and the message)
            outcome = f"{type(e).__name__}: {e}"
        print(f"done {case} {json.dumps(outcome)}", flush=True)


@pytest.fixture(scope="module")
def bad_input_outcomes():
    """Every bad case's outcome, run in child processes: a case that crashes the process is reported as
    such, and the cases after it run in a fresh child."""
    outcomes, remaining = {}, list(range(len(bad_cases())))
    child = ("import json, sys; sys.path[:0] = json.loads(sys.argv[1]); import test_ops; "
             "test_ops.run_bad_cases(json.loads(sys.argv[2]))")
    path = json.dumps([str(pathlib.Path(__file__).resolve().parent)] + [p for p in sys.path if p])
    while remaining:
        try:
            proc = subprocess.run([sys.executable, "-X", "faulthandler", "-c", child, path, json.dumps(remaining)],
                                  capture_output=True, text=True, timeout=240)
            stdout, stderr, status = proc.stdout, proc.stderr, proc.returncode
        except subprocess.TimeoutExpired as e:
            stdout, stderr, status = e.stdout or "", e.stderr or "", "timeout"
            stdout, stderr = (x.decode() if isinstance(x, bytes) else x for x in (stdout, stderr))
        started = None
        for line in stdout.splitlines():
            if line.startswith("start "):
                started = int(line.split()[1])
            elif line.startswith("done "):
                _, case, outcome = line.split(" ", 2)
                outcomes[int(case)] = json.loads(outcome)
                started = None
        if started is not None:
            outcomes[started] = f"CRASHED the process (status {status}): {stderr[-3000:]}"
        if started is None or status == "timeout":  # the child ended between cases, or hung: the rest did not run
            for case in remaining:
                outcomes.setdefault(case, f"not run: the child ended (status {status}): {stderr[-3000:]}")
        remaining = [case for case in remaining if case not in outcomes]
    return outcomes


@pytest.mark.parametrize("case", range(len(bad_cases())))
def test_bad_input_names_the_argument(case, bad_input_outcomes):
    name = bad_cases()[case][0]
    outcome = bad_input_outcomes[case]
    assert outcome.startswith("ValueError: ") and re.search(name, outcome), f"case {case} ({name}): {outcome}"


@pytest.mark.parametrize("name,value", [("kv_cache_dtype", "int8"), ("k_scale", 0.5), ("v_scale", 2.0),
                                        ("blocksparse_vert_stride", 4), ("num_kv_heads", 3), ("block_size", 32)])
def test_vllm_options_pagedattn_lacks_raise(name, value):
    p = Problem([40], 8, 2, 128, seed=9)
    kwargs = dict(num_kv_heads=2, scale=p.scale, block_tables=p.block_tables, seq_lens=p.seq_lens, block_size=16, max_seq_len=40,
                  alibi_slopes=None, kv_cache_dtype="auto", k_scale=1.0, v_scale=1.0)
    kwargs[name] = value
    with pytest.raises(ValueError, match=name):
        pagedattn.ops.paged_attention_v1(torch.empty_like(p.query), p.query, p.key_cache, p.value_cache, **kwargs)


@pytest.mark.parametrize("head_size", [32, 72])
def test_unsupported_head_size_is_named(head_size):
    p = Problem([40], 8, 2, head_size, seed=10)  # not instantiated
    with pytest.raises(ValueError, match="head_size"):
        run_decode(p)


# ---- fp8 caches (kv_cache_dtype "fp8", "fp8_e4m3", "fp8_e5m2"), as vLLM 0.6.3 passes them: uint8 caches in the
# fp8 layout (x = 16) and k_scale, v_scale as Python floats. The references dequantize in float64.

def run_v1(p, out=None, k_scale=None, v_scale=None, **overrides):
    """pagedattn.ops.paged_attention_v1 with vLLM's arguments for p (its kv_cache_dtype and scales unless
    given); returns out."""
    out = torch.empty_like(p.query) if out is None else out
    kwargs = dict(query=p.query, key_cache=p.key_cache, value_cache=p.value_cache, num_kv_heads=p.num_kv_heads, scale=p.scale,
                  block_tables=p.block_tables, seq_lens=p.seq_lens, block_size=p.block_size, max_seq_len=p.max_seq_len,
                  alibi_slopes=p.alibi_slopes, kv_cache_dtype=p.kv_cache_dtype, k_scale=p.k_scale if k_scale is None else k_scale,
                  v_scale=p.v_scale if v_scale is None else v_scale)
    kwargs.update(overrides)
    pagedattn.ops.paged_attention_v1(out, **kwargs)
    return out


@pytest.mark.parametrize("kv_cache_dtype", ["fp8", "fp8_e4m3", "fp8_e5m2"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("head_size", [128, 256])
@pytest.mark.parametrize("block_size", [8, 16, 32])
def test_fp8_caches_as_vllm_passes_them(kv_cache_dtype, dtype, head_size, block_size):
    """uint8 caches, k_scale 0.5 and v_scale 2.0: equal to the float64 reference of the dequantized caches,
    and v2 to v1 bit for bit."""
    p = Problem([1, 17, 300, 1000, 0], 24, 4, head_size, block_size=block_size, dtype=dtype, seed=head_size + block_size,
                kv_cache_dtype=kv_cache_dtype, k_scale=0.5, v_scale=2.0)
    assert p.key_cache.dtype == torch.uint8 and p.key_cache.shape[2:] == (head_size // 16, block_size, 16)
    out = run_v1(p)
    assert relative_error(out, p.reference()) < tolerance(dtype)
    out2 = torch.empty_like(p.query)
    parts = -(-p.max_seq_len // 512)
    exp_sums = torch.empty(len(p.lens), p.num_heads, parts, dtype=torch.float32, device="cuda")
    tmp = torch.empty(len(p.lens), p.num_heads, parts, head_size, dtype=dtype, device="cuda")
    pagedattn.ops.paged_attention_v2(out2, exp_sums, exp_sums.clone(), tmp, p.query, p.key_cache, p.value_cache, p.num_kv_heads,
                                     p.scale, p.block_tables, p.seq_lens, block_size, p.max_seq_len, None, kv_cache_dtype, 0.5, 2.0)
    assert torch.equal(out, out2)


@pytest.mark.parametrize("kv_cache_dtype", ["fp8_e4m3", "fp8_e5m2"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_fp8_caches_as_torch_float8_dtypes(kv_cache_dtype, dtype):
    """The same caches as torch.float8_e4m3fn / float8_e5m2 tensors give the uint8 call's bits; with GQA 6,
    ALiBi and a long sequence."""
    p = Problem([5, 4097, 33, 20000], 24, 4, 128, dtype=dtype, alibi=True, seed=21, kv_cache_dtype=kv_cache_dtype, k_scale=0.75,
                v_scale=1.5, fp8_as_uint8=False)
    assert p.key_cache.dtype == FP8_DTYPES[kv_cache_dtype]
    out = run_v1(p)
    assert relative_error(out, p.reference()) < tolerance(dtype)
    as_uint8 = run_v1(p, key_cache=p.key_cache.view(torch.uint8), value_cache=p.value_cache.view(torch.uint8))
    assert torch.equal(out, as_uint8)


def test_fp8_scales_of_back_to_back_calls():
    """Calls with other scales queued on one stream without a synchronization (vLLM's layers): each reads its
    own, as its reference says; and a call on a second stream at the same time with yet others."""
    p = Problem([3000, 1, 700], 24, 4, 128, seed=22, kv_cache_dtype="fp8", k_scale=0.5, v_scale=2.0)
    scales = [(0.5, 2.0), (2.0, 0.25), (1.0, 1.0), (0.125, 8.0)]
    other = torch.cuda.Stream()
    other.wait_stream(torch.cuda.current_stream())
    outs = [run_v1(p, k_scale=k, v_scale=v) for k, v in scales]
    with torch.cuda.stream(other):
        on_other = run_v1(p, k_scale=3.0, v_scale=0.5)
    torch.cuda.synchronize()
    for (k, v), out in zip(scales, outs):
        assert relative_error(out, p.reference(k_scale=k, v_scale=v)) < tolerance(p.dtype), (k, v)
    assert relative_error(on_other, p.reference(k_scale=3.0, v_scale=0.5)) < tolerance(p.dtype)
    assert not torch.equal(outs[0], outs[1])


def test_fp8_cuda_graph_replays_the_scales_of_capture_time():
    """A graph captured once (as vLLM captures its decode) replays with seq_lens and block_tables rewritten in
    place, each replay equal to an eager call with the same scales; eager calls with other scales on the
    capture's stream between the replays change neither the replays nor their scales."""
    p = Problem([20000, 20000, 20000], 24, 4, 256, dtype=torch.bfloat16, seed=23, kv_cache_dtype="fp8_e5m2", k_scale=0.5,
                v_scale=2.0, max_blocks_per_seq=32768 // 16)
    p.max_seq_len = 32768
    stream = torch.cuda.Stream()
    out = torch.empty_like(p.query)
    stream.wait_stream(torch.cuda.current_stream())  # the problem's tensors, made on the current stream
    with torch.cuda.stream(stream):
        run_v1(p, out=out)  # warm up outside the capture
    stream.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        run_v1(p, out=out)
    permuted = p.block_tables[[2, 0, 1]].clone()
    for lens, tables in [([1000, 1000, 1000], p.block_tables.clone()), ([20000, 17, 0], p.block_tables.clone()),
                         ([17, 20000, 3], permuted)]:
        p.seq_lens.copy_(torch.tensor(lens, dtype=torch.int32))
        p.block_tables.copy_(tables)
        out.fill_(float("nan"))
        # The rewrites and the fill run on the current stream: the replay on `stream` must wait for them (else
        # a late fill overwrites the outputs the replay stored first, as it did once under a loaded GPU).
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            graph.replay()
            other_scales = run_v1(p, k_scale=4.0, v_scale=0.25)  # the stream's own scale buffer, not the graph's
        torch.cuda.synchronize()
        assert torch.equal(out, run_v1(p))
        assert relative_error(out, p.reference(lens=lens)) < tolerance(p.dtype)
        assert relative_error(other_scales, p.reference(lens=lens, k_scale=4.0, v_scale=0.25)) < tolerance(p.dtype)


def test_fp8_torch_compile_without_graph_breaks():
    p = Problem([100, 2000], 24, 4, 128, seed=24, kv_cache_dtype="fp8_e4m3", k_scale=0.5, v_scale=2.0)

    def step(query, key_cache, value_cache, block_tables, seq_lens):
        out = torch.empty_like(query)
        pagedattn.ops.paged_attention_v1(out, query * 1.0, key_cache, value_cache, 4, p.scale, block_tables, seq_lens, 16, 2000,
                                         None, "fp8_e4m3", 0.5, 2.0)
        return out + 0.0

    compiled = torch.compile(step, fullgraph=True)
    out = compiled(p.query, p.key_cache, p.value_cache, p.block_tables, p.seq_lens)
    assert torch.equal(out, run_v1(p))


def fp8_bad_cases():
    """(argument named in the message, overrides of run_v1's arguments for an e4m3 Problem p of fp16 queries)."""
    return [
        ("query", lambda p: dict(query=p.query.double(), out=torch.empty_like(p.query, dtype=torch.float64))),
        ("kv_cache_dtype", lambda p: dict(kv_cache_dtype="fp8_e4m3fn")),  # torch's name, not vLLM's
        ("kv_cache_dtype", lambda p: dict(kv_cache_dtype="int8")),
        ("key_cache", lambda p: dict(key_cache=p.key_cache.view(torch.int8))),
        ("key_cache", lambda p: dict(key_cache=p.key_cache.view(torch.float8_e5m2))),  # the other format
        ("key_cache", lambda p: dict(key_cache=p.key_cache.view(torch.float16))),  # half the elements of the last dimension
        ("key_cache", lambda p: dict(key_cache=p.key_cache.reshape(*p.key_cache.shape[:2], -1, p.block_size, 8))),  # x = 8
        ("value_cache", lambda p: dict(value_cache=p.value_cache.view(torch.float8_e5m2))),
        ("value_cache", lambda p: dict(value_cache=p.value_cache.to(torch.float16))),
        ("k_scale", lambda p: dict(k_scale=0.0)),
        ("k_scale", lambda p: dict(k_scale=float("nan"))),
        ("k_scale", lambda p: dict(k_scale=float("inf"))),
        ("k_scale", lambda p: dict(k_scale=1e-60)),  # 0 as a float32
        ("v_scale", lambda p: dict(v_scale=-2.0)),
        ("v_scale", lambda p: dict(v_scale=float("nan"))),
        ("key_cache", lambda p: dict(kv_cache_dtype="auto", k_scale=1.0, v_scale=1.0)),  # an fp8 cache read as "auto"
    ]


@pytest.mark.parametrize("case", range(len(fp8_bad_cases())))
def test_fp8_bad_arguments_name_the_argument(case):
    """Both paths (the eager function and the registered operator) raise ValueError naming the argument, before
    anything is launched."""
    name, spoil = fp8_bad_cases()[case]
    p = Problem([40, 7], 8, 2, 128, seed=25, kv_cache_dtype="fp8", k_scale=0.5, v_scale=2.0)
    for path in ["eager", "operator"]:
        overrides = spoil(p)
        out = overrides.pop("out", torch.empty_like(p.query))
        if path == "eager":
            with pytest.raises(ValueError, match=name):
                run_v1(p, out=out, **overrides)
        else:
            args = dict(query=p.query, key_cache=p.key_cache, value_cache=p.value_cache, num_kv_heads=2, scale=p.scale,
                        block_tables=p.block_tables, seq_lens=p.seq_lens, block_size=16, max_seq_len=40, alibi_slopes=None,
                        kv_cache_dtype="fp8", k_scale=0.5, v_scale=2.0)
            args.update(overrides)
            with pytest.raises(ValueError, match=name):
                torch.ops.pagedattn.paged_attention_v1.default(out, **args)
    torch.cuda.synchronize()  # nothing was launched that could fail later
