#!/usr/bin/env python3
"""The Python op's cost: pagedattn.ops.paged_attention_v2 called eagerly, against the same call replayed
from a CUDA graph and against the C++ call (bench/bench_call_overhead, timed the same way, in turns with
the op), at 1 x 1000, 64 x 4096 and 1 x 100000 (Qwen3.6: 24/4 heads, head 256, fp16, block 16), and the
seed's Triton function on the same inputs (when PAGEDATTN_SEED_KERNEL names its module and Triton is there).

    python3 python/bench/bench_ops.py --out ops.json [--cpp-bench build/bench/bench_call_overhead]

Eager: the median over calls of the wall time of a call followed by a synchronize, so it includes the
Python call, the argument checks and the launch. Host: the median time until the call returns (the GPU
drained between calls). Graph: the same for graph.replay(). The C++ call is bench_call_overhead, run
once per round before the op's measurements; each figure is the least of its rounds' medians.
overhead_vs_cpp_us is what the op adds to the C++ call (the target: < 5 µs); the op_overload_*
fields are the same call through the dispatcher (torch.ops.pagedattn.paged_attention_v2, the path
torch.compile's graphs take).
"""
import argparse
import importlib.util
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
from paged_problem import Problem  # noqa: E402

import pagedattn  # noqa: E402

SEED = pathlib.Path(os.environ.get("PAGEDATTN_SEED_KERNEL", ""))


def median_us(fn, n, host_only=False):
    """Median wall time of fn() and a synchronize over n calls, after 10 untimed ones. host_only: the
    time until fn() returns (the host's work: Python, checks, launch), the GPU drained between calls so
    that no launch queue builds up."""
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        if host_only:
            times.append((time.perf_counter() - start) * 1e6)
        torch.cuda.synchronize()
        if not host_only:
            times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


def median_host_us(fn, n):
    return median_us(fn, n, host_only=True)


def load_seed():
    try:
        import triton  # noqa: F401
    except ImportError:
        return None
    if not os.environ.get("PAGEDATTN_SEED_KERNEL") or not SEED.is_file():
        return None
    spec = importlib.util.spec_from_file_location("seed_paged_attention_v2_triton", SEED)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.paged_attention_v2_triton


def host_time_breakdown(case, calls):
    """The eager call's host time step by step (a build with -DPAGEDATTN_OP_PROBES only): each entry is
    the median time until the call returns, from nothing at all to the whole wrapper."""
    from torch.compiler import is_compiling
    args22 = case["call_args"] + (0, 0, 0, 64, 0)
    _C = pagedattn._C

    def python_22(out, exp_sum, max_logits, tmp_out, query, key_cache, value_cache, num_kv_heads, scale, block_tables, seq_lens,
                  block_size, max_seq_len, alibi_slopes, kv_cache_dtype, k_scale, v_scale, tp_rank=0, blocksparse_local_blocks=0,
                  blocksparse_vert_stride=0, blocksparse_block_size=64, blocksparse_head_sliding_step=0):
        pass

    steps = {"nothing": lambda: None,
             "python_function_22_args": lambda: python_22(*case["call_args"]),
             "is_compiling": is_compiling,
             "fastcall_read_arguments": lambda: _C._probe_noop_v2(*args22)}
    result = {name: median_host_us(fn, calls) for name, fn in steps.items()}
    _C._probe_skip_launch(True)
    try:
        result["fastcall_all_but_launch"] = median_host_us(lambda: _C.paged_attention_v2_eager(*args22), calls)
    finally:
        _C._probe_skip_launch(False)
    result["fastcall_eager"] = median_host_us(lambda: _C.paged_attention_v2_eager(*args22), calls)
    result["pybind_eager"] = median_host_us(lambda: _C._probe_pybind_v2(*args22), calls)
    result["wrapper"] = median_host_us(case["eager"], calls)
    result["through_dispatcher"] = median_host_us(case["through_dispatcher"], calls)
    print("breakdown (host us, " + case["shape"] + "):", json.dumps(result))
    return {"shape": case["shape"], "host_us": result}


def run_cpp(binary, path):
    """One run of bench_call_overhead (the C++ call timed the same way): its rows by shape."""
    subprocess.run([binary, "--json", path, "--commit", "bench_ops"], check=True, stdout=subprocess.DEVNULL, timeout=300)
    return {r["shape"]: r for r in json.loads(pathlib.Path(path).read_text())["rows"]}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--cpp-bench", help="bench_call_overhead's binary: run once per round, between the op's rounds")
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--commit", default="unknown")
    args = parser.parse_args()
    v2_op = torch.ops.pagedattn.paged_attention_v2.default
    seed_v2 = load_seed()
    cases = []
    for num_seqs, seq_len in [(1, 1000), (64, 4096), (1, 100000)]:
        p = Problem([seq_len] * num_seqs, 24, 4, 256, seed=num_seqs)
        parts = -(-seq_len // 512)
        exp_sums = torch.empty(num_seqs, 24, parts, dtype=torch.float32, device="cuda")
        max_logits = torch.empty_like(exp_sums)
        tmp = torch.empty(num_seqs, 24, parts, 256, dtype=p.dtype, device="cuda")
        out = torch.empty_like(p.query)
        call_args = (out, exp_sums, max_logits, tmp, p.query, p.key_cache, p.value_cache, 4, p.scale, p.block_tables, p.seq_lens,
                     16, seq_len, None, "auto", 1.0, 1.0)

        def eager(call_args=call_args):
            pagedattn.ops.paged_attention_v2(*call_args)

        def through_dispatcher(call_args=call_args):
            v2_op(*call_args)

        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            eager()
        stream.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            eager()
        cases.append(dict(shape=f"{num_seqs}x{seq_len}", eager=eager, through_dispatcher=through_dispatcher, graph=graph,
                          call_args=call_args, p=p))

    # Rounds: the C++ call, then the op, so that both see the machine in the same state; each figure is
    # the least of its rounds' medians (the state with the least interference).
    rounds = []
    for _ in range(args.rounds):
        cpp = run_cpp(args.cpp_bench, str(pathlib.Path(args.out).with_suffix(".cpp.json"))) if args.cpp_bench else {}
        r = {}
        for c in cases:
            m = {"eager_us": median_us(c["eager"], args.calls), "host_us": median_host_us(c["eager"], args.calls),
                 "graph_us": median_us(c["graph"].replay, args.calls),
                 "op_overload_eager_us": median_us(c["through_dispatcher"], args.calls),
                 "op_overload_host_us": median_host_us(c["through_dispatcher"], args.calls)}
            if c["shape"] in cpp:
                m.update(cpp_eager_us=cpp[c["shape"]]["eager_us"], cpp_host_us=cpp[c["shape"]]["host_us"],
                         cpp_graph_us=cpp[c["shape"]]["graph_us"])
            r[c["shape"]] = m
        rounds.append(r)
    rows = []
    breakdown = host_time_breakdown(cases[0], args.calls * 5) if hasattr(pagedattn._C, "_probe_noop_v2") else None
    for c in cases:
        row = {"shape": c["shape"], "heads": "24/4", "head_dim": 256, "dtype": "fp16"}
        for key in rounds[0][c["shape"]]:
            row[key] = min(r[c["shape"]][key] for r in rounds)
        if "cpp_eager_us" in row:
            row["overhead_vs_cpp_us"] = row["eager_us"] - row["cpp_eager_us"]
            row["host_overhead_vs_cpp_us"] = row["host_us"] - row["cpp_host_us"]
        row["rounds"] = [r[c["shape"]] for r in rounds]
        if seed_v2 is not None:
            row["seed_eager_us"] = median_us(lambda: seed_v2(*c["call_args"][:14]), args.calls)
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "rounds"}))
    result = {"breakdown": breakdown} if breakdown else {}
    result |= {"commit": args.commit, "device": torch.cuda.get_device_name(), "torch": torch.__version__, "method": __doc__.split("\n\n")[2], "rows": rows}
    pathlib.Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
