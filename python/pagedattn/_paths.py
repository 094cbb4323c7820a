"""Which path a call of pagedattn takes. The operators registered with torch.library
(torch.ops.pagedattn.*) are what torch.compile traces, what FakeTensor and dispatch modes see and what Meta
tensors reach. A plain eager call on CUDA tensors calls the same C++ function without the dispatcher
(pagedattn._C.*_eager): the dispatcher's boxing of vLLM's 22 arguments costs about as much as the
library's own call (python/bench/bench_ops.py measures both paths against the C++ call)."""
import torch
from torch.compiler import is_compiling

# Where this torch lacks one of the mode queries, every call takes the operator.
_dispatch_modes = getattr(torch._C, "_len_torch_dispatch_stack", lambda: 1)
_function_modes = getattr(torch._C, "_is_torch_function_mode_enabled", lambda: True)
_Tensor = torch.Tensor


def plain_eager(query) -> bool:
    """Whether a call with this query may skip the dispatcher: not traced by torch.compile (asked first:
    while tracing, nothing else is evaluated), a plain CUDA tensor (no subclass such as FakeTensor), and no
    dispatch or torch-function mode active. Anything else goes through the registered operator."""
    return (not is_compiling() and type(query) is _Tensor and query.is_cuda and not _dispatch_modes()
            and not _function_modes())
