"""Which path a call of pagedattn takes. The operators registered with torch.library
(torch.ops.pagedattn.*) are what torch.compile traces, what FakeTensor and dispatch modes see and what Meta
tensors reach. A plain eager call on CUDA tensors calls the same C++ function without the dispatcher
(pagedattn._C.*_eager): the dispatcher's boxing of vLLM's 22 arguments costs about as much as the
library's own call (python/bench/bench_ops.py measures both paths against the C++ call). The eager
function itself declines (NotImplemented) a call that the dispatcher must see: a tensor that is not a
plain CUDA torch.Tensor, or an active dispatch or torch-function mode (python/csrc/torch_ops.cu)."""
from torch.compiler import is_compiling


def call(eager, operator, args):
    """The eager function with these positional arguments, or the registered operator when the call is
    traced by torch.compile (asked first: while tracing, the eager function is never reached) or the eager
    function declines it."""
    if is_compiling() or eager(*args) is NotImplemented:
        operator(*args)
