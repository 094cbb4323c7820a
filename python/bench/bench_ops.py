#!/usr/bin/env python3
"""The Python op's cost: pagedattn.ops.paged_attention_v2 called eagerly, against the same call replayed
from a CUDA graph and against the C++ call (bench/bench_call_overhead's JSON, measured the same way in the
same run), at 1 x 1000, 64 x 4096 and 1 x 100000 (Qwen3.6: 24/4 heads, head 256, fp16, block 16), and the
seed's Triton function on the same inputs (when .seed/ and Triton are there).

    python3 python/bench/bench_ops.py --out ops.json [--cpp call_overhead.json]

Eager: the median over calls of the wall time of a call followed by a synchronize, so it includes the
Python call, the argument checks and the launch. Host: the median time until the call returns (the GPU
drained between calls). Graph: the same for graph.replay(). overhead_vs_cpp_us is what the op adds to
the C++ call (issue 16's target: < 5 µs); the op_overload_* fields are the same call through the
dispatcher (torch.ops.pagedattn.paged_attention_v2, the path torch.compile's graphs take).
"""
import argparse
import importlib.util
import json
import pathlib
import statistics
import sys
import time

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
from paged_problem import Problem  # noqa: E402

import pagedattn  # noqa: E402

SEED = pathlib.Path(__file__).resolve().parents[2] / ".seed" / "paged_attention_v2_triton.py"


def median_us(fn, n):
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


def median_host_us(fn, n):
    """Median time until the call returns (the host's work: Python, checks, launch), the GPU drained
    between calls so that no launch queue builds up."""
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e6)
        torch.cuda.synchronize()
    return statistics.median(times)


def load_seed():
    try:
        import triton  # noqa: F401
    except ImportError:
        return None
    if not SEED.is_file():
        return None
    spec = importlib.util.spec_from_file_location("seed_paged_attention_v2_triton", SEED)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.paged_attention_v2_triton


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--cpp", help="bench_call_overhead's JSON from the same run")
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    cpp = {}
    if args.cpp:
        cpp = {r["shape"]: r for r in json.loads(pathlib.Path(args.cpp).read_text())["rows"]}
    v2_op = torch.ops.pagedattn.paged_attention_v2.default
    seed_v2 = load_seed()
    rows = []
    for num_seqs, seq_len in [(1, 1000), (64, 4096), (1, 100000)]:
        p = Problem([seq_len] * num_seqs, 24, 4, 256, seed=num_seqs)
        parts = -(-seq_len // 512)
        exp_sums = torch.empty(num_seqs, 24, parts, dtype=torch.float32, device="cuda")
        max_logits = torch.empty_like(exp_sums)
        tmp = torch.empty(num_seqs, 24, parts, 256, dtype=p.dtype, device="cuda")
        out = torch.empty_like(p.query)
        call_args = (out, exp_sums, max_logits, tmp, p.query, p.key_cache, p.value_cache, 4, p.scale, p.block_tables, p.seq_lens,
                     16, seq_len, None, "auto", 1.0, 1.0)

        def eager():
            pagedattn.ops.paged_attention_v2(*call_args)

        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            eager()
        stream.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            eager()
        row = {"shape": f"{num_seqs}x{seq_len}", "heads": "24/4", "head_dim": 256, "dtype": "fp16",
               "eager_us": median_us(eager, args.calls), "graph_us": median_us(graph.replay, args.calls)}
        row["host_us"] = median_host_us(eager, args.calls)
        row["op_overload_eager_us"] = median_us(lambda: v2_op(*call_args), args.calls)
        row["op_overload_host_us"] = median_host_us(lambda: v2_op(*call_args), args.calls)
        if row["shape"] in cpp:
            c = cpp[row["shape"]]
            row.update(cpp_eager_us=c["eager_us"], cpp_graph_us=c["graph_us"], cpp_host_us=c["host_us"],
                       overhead_vs_cpp_us=row["eager_us"] - c["eager_us"], host_overhead_vs_cpp_us=row["host_us"] - c["host_us"])
        if seed_v2 is not None:
            row["seed_eager_us"] = median_us(lambda: seed_v2(*call_args[:14]), args.calls)
        rows.append(row)
        print(json.dumps(row))
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "method": __doc__.split("\n\n")[2], "rows": rows}
    pathlib.Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
