#!/usr/bin/env python3
"""Joins bench_decode's results with the seed's and bench_combine's into one JSON file and a bar chart.

    python3 bench/merge_results.py --pagedattn A.json [B.json ...] --seed S.json --combine C.json \\
        --out bench/results/h200.json --plot bench/results/h200.png

Several --pagedattn files (bench_decode runs of other dtypes, layouts or policies, e.g. an fp8 cache or
--policy biv100) add their rows after the first's; each row keeps the pct_copy and pct_read of its own run,
whose bandwidths are listed in "runs".

A row is named by (shape, heads, head_dim, dtype, layout, policy); files without a policy are the default
policy's. Rows are joined with the seed's on that key (the seed's rows count as the default policy's, reading
vLLM's layout): each gains seed_us, seed_rel_err, seed_pct_copy and speedup_vs_seed = seed_us / median_us (and
keeps bench_decode's pct_copy and pct_read); another policy's rows keep them null. A missing or unreadable seed (or combine) file leaves those fields
null (or the combine list empty). Both percentages use the copy bandwidth of the bench_decode run, so that
the bars of a shape compare the two times directly.
"""
import argparse
import json
import pathlib
import sys


def load(path, what):
    if path is None:
        return None
    try:
        return json.loads(pathlib.Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        print(f"merge_results: no usable {what} results ({e}): their fields stay null", file=sys.stderr)
        return None


def key(row):
    return row["shape"], row["heads"], row["head_dim"], row["dtype"], row.get("layout", "vllm"), row.get("policy", "default")


def merge(decodes, seed, combine):
    decode = decodes[0]
    seed_rows = {key(r): r for r in (seed or {}).get("rows", [])}
    copy_gbps = decode["copy_gbps"]
    rows = []
    # A run's rows carry its policy (older files name none: the default policy's).
    for r in (dict(row, policy=row.get("policy", d.get("policy", "default"))) for d in decodes for row in d["rows"]):
        s = seed_rows.get(key(r), {})
        seed_us, median_us = s.get("seed_us"), r.get("median_us")
        row = dict(r, seed_us=seed_us, seed_rel_err=s.get("seed_rel_err"), seed_pct_copy=None, speedup_vs_seed=None)
        if "error" in s:
            row["seed_error"] = s["error"]
        if seed_us:
            row["seed_pct_copy"] = 100.0 * r["bytes"] / (seed_us * 1e3) / copy_gbps
            if median_us:
                row["speedup_vs_seed"] = seed_us / median_us
        rows.append(row)
    return {
        "device": decode["device"], "commit": decode["commit"], "copy_gbps": copy_gbps,
        "read_gbps": decode.get("read_gbps"), "read_method": decode.get("read_method"), "dtype": decode["dtype"],
        "seed_copy_gbps": (seed or {}).get("copy_gbps"),
        "median_method": decode.get("median_method"), "hot_method": decode.get("hot_method"),
        "runs": [{"dtype": d["dtype"], "layout": d.get("layout", "vllm"), "policy": d.get("policy", "default"),
                  "copy_gbps": d["copy_gbps"], "read_gbps": d.get("read_gbps")} for d in decodes],
        "rows": rows,
        "combine": (combine or {}).get("rows", []),
        "combine_bitwise_identical": (combine or {}).get("bitwise_identical"),
    }


def plot(result, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rows"]
    xs = range(len(rows))
    width = 0.4
    labels = [f"{r['shape']}\n{r['heads']} h{r['head_dim']}" + ("" if r["dtype"] == result["dtype"] else f"\n{r['dtype']}") +
              ("" if r.get("layout", "vllm") == "vllm" else f"\n{r['layout']}") +
              ("" if r.get("policy", "default") == "default" else f"\n{r['policy']}") +
              ("" if r.get("ok", True) else "\nFAILED") for r in rows]
    ours = [r.get("pct_copy") or 0 for r in rows]
    seed = [r.get("seed_pct_copy") or 0 for r in rows]
    fig, ax = plt.subplots(figsize=(max(8.0, 1.1 * len(rows)), 5.5))
    ax.bar([x - width / 2 for x in xs], ours, width, label="pagedattn", color="#2a6f97")
    ax.bar([x + width / 2 for x in xs], seed, width, label="seed (Triton)", color="#e07a5f")
    for x, r in zip(xs, rows):
        if r.get("speedup_vs_seed"):
            ax.annotate(f"{r['speedup_vs_seed']:.2f}x", (x - width / 2, ours[x]), ha="center", va="bottom", fontsize=7)
        if r.get("seed_pct_copy") is None:
            ax.annotate("n/a", (x + width / 2, 0), ha="center", va="bottom", fontsize=7)
    ax.axhline(100, color="gray", linestyle="--", linewidth=0.8, label="device copy bandwidth")
    ax.set_ylim(0, max([120.0] + [1.1 * v for v in ours + seed]))
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_ylabel("% of device copy bandwidth (L2 flushed, median)")
    ax.set_title(f"Paged decode, {result['dtype']}, block 16: {result['device']}, copy {result['copy_gbps']:.0f} GB/s, "
                 f"commit {str(result['commit'])[:12]}\n(labels above the bars: speedup vs the seed)", fontsize=9)
    ax.legend(loc="upper right", ncol=3, fontsize=8)
    fig.tight_layout()
    # The commit in the PNG's text chunk too: the results check (test/records) reads it there.
    fig.savefig(path, dpi=120, metadata={"Comment": f"commit {result['commit']}"})
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pagedattn", required=True, nargs="+", help="bench_decode --json outputs (the first sets the header)")
    ap.add_argument("--seed", help="seed_triton_bench.py --out output (optional)")
    ap.add_argument("--combine", help="bench_combine --json output (optional)")
    ap.add_argument("--out", required=True, help="merged JSON to write")
    ap.add_argument("--plot", help="PNG bar chart to write")
    args = ap.parse_args()

    decodes = [load(p, "bench_decode") for p in args.pagedattn]
    if decodes[0] is None:
        return 1
    result = merge([d for d in decodes if d is not None], load(args.seed, "seed"), load(args.combine, "bench_combine"))
    pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")
    for r in result["rows"]:
        speedup = r["speedup_vs_seed"]
        pct_read = r.get("pct_read")
        print(f"{r['shape']:<10} {r['heads']:<6} {r['head_dim']:>4} {r['dtype']:<13} {r.get('layout', 'vllm'):<4} {r['policy']:<7} "
              f"{r['pct_copy'] or 0:5.1f}% of copy  "
              f"{'-' if pct_read is None else f'{pct_read:5.1f}%'} of read  "
              f"speedup vs seed {'-' if speedup is None else f'{speedup:.2f}x'}")
    if args.plot:
        pathlib.Path(args.plot).parent.mkdir(parents=True, exist_ok=True)
        plot(result, args.plot)
        print(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
