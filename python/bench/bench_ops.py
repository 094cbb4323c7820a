#!/usr/bin/env python3
"""The Python op's cost: pagedattn.ops.paged_attention_v2 called eagerly against the same call replayed
from a CUDA graph (the device time alone), at 1 x 1000 and 64 x 4096 (Qwen3.6: 24/4 heads, head 256,
fp16), and the seed's Triton function on the same inputs (when .seed/ and Triton are there).

    python3 python/bench/bench_ops.py --out ops.json

Eager: the median over calls of the wall time of a call followed by a synchronize, so it includes the
Python call, the dispatcher, the argument checks and the launch. Graph: the same for graph.replay().
The difference is what the op adds to an eager call.
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
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
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
        row["op_overhead_us"] = row["eager_us"] - row["graph_us"]
        if seed_v2 is not None:
            row["seed_eager_us"] = median_us(lambda: seed_v2(*call_args[:14]), args.calls)
        rows.append(row)
        print(json.dumps(row))
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "method": __doc__.split("\n\n")[2], "rows": rows}
    pathlib.Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
