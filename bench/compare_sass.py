#!/usr/bin/env python3
"""Whether two source trees compile the decode kernels to the same machine code (no GPU needed).

Each tree's test/levels/every_path_compiles.cu (one kernel per fold, staging, type, layout and policy) is compiled
with that tree's include/ to a cubin per architecture, and each kernel's SASS (its .text section) is compared byte
for byte. A change meant to keep every kernel's arithmetic and speed (a rename, a type that replaces a flag) that
leaves the SASS identical has kept both; kernels whose SASS differs are listed with their sizes, and need the GPU's
A/B. Kernels are matched by name where both trees name them alike, else by their bytes.

    python3 bench/compare_sass.py OLD_TREE NEW_TREE [--arch 90 80] [--nvcc nvcc]

Exits 0 when every kernel of every architecture has an identical counterpart, 1 otherwise.
"""
import argparse
import pathlib
import struct
import subprocess
import sys
import tempfile


def kernel_sections(cubin):
    """{kernel name: SASS bytes} of a cubin (ELF64): its .text.<name> sections."""
    data = cubin.read_bytes()
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_at = sections[shstrndx][4]
    out = {}
    for name, _type, _flags, _addr, offset, size in sections:
        end = data.index(b"\0", names_at + name)
        section = data[names_at + name:end].decode()
        if section.startswith(".text."):
            out[section[len(".text."):]] = data[offset:offset + size]
    return out


def compile_tree(tree, arch, nvcc, out):
    cubin = out / f"{tree.name}-{arch}.cubin"
    subprocess.run([nvcc, "-std=c++17", "-O3", f"-arch=sm_{arch}", "-cubin", f"-I{tree / 'include'}", "-o", str(cubin),
                    str(tree / "test" / "levels" / "every_path_compiles.cu")], check=True)
    return kernel_sections(cubin)


def demangled(names):
    text = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.splitlines()
    return dict(zip(names, text)) if len(text) == len(names) else {n: n for n in names}


def report(label, old, new):
    """Print how the kernels of `new` ({name: SASS}) match those of `old`; True when every one has an identical counterpart."""
    pool = {}  # the new kernels not yet matched, by their SASS
    for name, sass in new.items():
        pool.setdefault(sass, []).append(name)
    differing = []
    for name, sass in old.items():
        candidates = pool.get(sass, [])
        if candidates:  # the same-named kernel first, else any with the same bytes
            candidates.remove(name if name in candidates else candidates[0])
        else:
            differing.append((name, len(sass), len(new[name]) if name in new else None))
    unmatched = [n for names_of in pool.values() for n in names_of]
    names = demangled([n for n, _, _ in differing] + unmatched)
    print(f"{label}: {len(old)} kernels before, {len(new)} after, {len(old) - len(differing)} with identical SASS")
    for name, before, after in differing:
        print(f"  differs: {names[name][:200]} ({before} bytes before, {after if after is not None else 'no same-named'} after)")
    for name in unmatched:
        print(f"  no identical counterpart before: {names[name][:200]} ({len(new[name])} bytes)")
    return not differing and not unmatched


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=pathlib.Path)
    parser.add_argument("new", type=pathlib.Path)
    parser.add_argument("--arch", nargs="+", default=["90", "80"])
    parser.add_argument("--nvcc", default="nvcc")
    args = parser.parse_args()
    same = True
    with tempfile.TemporaryDirectory() as tmp:
        for arch in args.arch:
            old = compile_tree(args.old.resolve(), arch, args.nvcc, pathlib.Path(tmp))
            new = compile_tree(args.new.resolve(), arch, args.nvcc, pathlib.Path(tmp))
            same &= report(f"sm_{arch}", old, new)
    print("identical" if same else "different")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
