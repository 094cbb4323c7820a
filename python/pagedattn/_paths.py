"""Which path a call of pagedattn takes. The operators registered with torch.library
(torch.ops.pagedattn.*) are what torch.compile traces, what FakeTensor and dispatch modes see and what Meta
tensors reach. A plain eager call on CUDA tensors calls the same C++ function without the dispatcher
(pagedattn._C.*_eager): boxing vLLM's 22 arguments costs it about 4 µs, as much as the library's own call
(python/bench/bench_ops.py measures both paths against the C++ call)."""
import torch
from torch.compiler import is_compiling

_dispatch_modes = getattr(torch._C, "_len_torch_dispatch_stack", None)
_function_modes = getattr(torch._C, "_is_torch_function_mode_enabled", None)


def plain_eager(query) -> bool:
    """Whether a call with this query may skip the dispatcher: not traced by torch.compile (checked first:
    under tracing nothing else is evaluated), a plain CUDA tensor (no subclass such as FakeTensor), and no
    dispatch or torch-function mode active. Anything else goes through the registered operator."""
    return (not is_compiling() and type(query) is torch.Tensor and query.is_cuda and _dispatch_modes is not None
            and _dispatch_modes() == 0 and _function_modes is not None and not _function_modes())
