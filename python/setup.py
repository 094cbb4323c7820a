"""Builds pagedattn._C, the PyTorch operators of pagedattn, from the library's headers in ../include.

    pip install --no-build-isolation ./python      (from the repository's root; uses the installed torch)

The CUDA architectures are PyTorch's choice: TORCH_CUDA_ARCH_LIST, else the GPUs present. Extra nvcc
flags come from PAGEDATTN_NVCC_FLAGS (for BI-V100 with the CoreX toolchain: "-D__ILUVATAR__").
"""
import os
import pathlib

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

here = pathlib.Path(__file__).resolve().parent
include = here.parent / "include"
if not (include / "pagedattn" / "pagedattn.cuh").is_file():
    raise RuntimeError(f"pagedattn's headers are not at {include}: build from a checkout of the repository (pip install ./python)")

extra_nvcc = os.environ.get("PAGEDATTN_NVCC_FLAGS", "").split()
setup(
    ext_modules=[
        CUDAExtension(
            "pagedattn._C",
            # Each pair of query and cache types in a translation unit of its own (csrc/torch_decode.cuh),
            # built side by side (ninja; MAX_JOBS caps the jobs).
            ["csrc/torch_ops.cu"] + sorted(str(p.relative_to(here)) for p in (here / "csrc").glob("decode_*.cu")),
            include_dirs=[str(include), str(here / "csrc")],
            # No -std flag: PyTorch adds the standard its headers need (C++17 or later, which pagedattn needs too).
            extra_compile_args={"cxx": ["-O3"], "nvcc": ["-O3", "--expt-relaxed-constexpr"] + extra_nvcc},
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
