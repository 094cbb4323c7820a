"""The cases of vLLM 0.6.3's paged-attention kernel test (tests/kernels/test_attention.py, test_paged_attention)
that test_vllm_matrix.py runs: a pairwise-covering subset of its parameter grid, in plain Python (no torch), so
that the coverage itself is checked anywhere.

vLLM's grid is 2 head configurations x 8 head sizes x 2 block sizes x ALiBi on/off x 3 dtypes x 2 cache dtypes
x v1/v2 (768 cases, every one with 7 sequences up to the longest length vLLM tests). CASES holds every pair of
values of any two parameters in at least one case, built by a deterministic greedy all-pairs search:

- the computing cases (`refused` False) cover every pair but one: head size 120 with an fp8 cache, which
  pagedattn refuses (ValueError naming head_size 120);
- the refusal cases (`refused` True) are that pair, with every value of each other parameter in at least one of
  them, so that the refusal is seen on every dtype, both versions, both head configurations and block sizes.
"""
import itertools
from collections import namedtuple

# vLLM 0.6.3's values, in the order of the Case fields. dtype: the torch dtype's name.
PARAMETERS = (
    ("head_size", (64, 80, 96, 112, 120, 128, 192, 256)),
    ("dtype", ("float16", "bfloat16", "float32")),
    ("heads", ((40, 40), (64, 8))),  # (num_heads, num_kv_heads)
    ("block_size", (16, 32)),
    ("alibi", (False, True)),
    ("kv_cache_dtype", ("auto", "fp8")),
    ("version", ("v1", "v2")),
)
NAMES = tuple(name for name, _ in PARAMETERS)

# The one pair of values pagedattn refuses: an fp8 cache (1-byte elements) at head size 120.
REFUSED = (("head_size", 120), ("kv_cache_dtype", "fp8"))

NUM_SEQS = 7  # vLLM's NUM_GEN_SEQS
NUM_BLOCKS = 4321  # vLLM's NUM_BLOCKS: the block tables draw each entry from range(NUM_BLOCKS)


class Case(namedtuple("Case", NAMES)):
    __slots__ = ()

    @property
    def refused(self):
        """Whether pagedattn refuses the case (head size 120 with an fp8 cache)."""
        return all(getattr(self, name) == value for name, value in REFUSED)

    @property
    def id(self):
        """pytest's id: e.g. h128-40x40-float16-bs16-alibi-fp8-v2."""
        num_heads, num_kv_heads = self.heads
        return (f"h{self.head_size}-{num_heads}x{num_kv_heads}-{self.dtype}-bs{self.block_size}-"
                f"{'alibi' if self.alibi else 'noalibi'}-{self.kv_cache_dtype}-{self.version}")


def _is_refused(assignment):
    """assignment: {parameter index: value index}; whether it holds the refused pair."""
    values = {NAMES[i]: PARAMETERS[i][1][a] for i, a in assignment.items()}
    return all(name in values and values[name] == value for name, value in REFUSED)


def _all_pairs():
    """Every pair of values of two parameters, as ((i, a), (j, b)) with parameter indices i < j and value indices
    a, b."""
    return [((i, a), (j, b)) for i, j in itertools.combinations(range(len(PARAMETERS)), 2)
            for a in range(len(PARAMETERS[i][1])) for b in range(len(PARAMETERS[j][1]))]


def _greedy_all_pairs():
    """The computing cases: until every pair but the refused one is covered, a case seeded with the first
    uncovered pair (in _all_pairs()'s order), the other parameters filled one at a time with the value that covers
    the most uncovered pairs with those already set, never the refused pair (ties: the value used least so far,
    then the first). Deterministic."""
    order = _all_pairs()
    uncovered = {pair for pair in order if not _is_refused(dict(pair))}
    uses = [[0] * len(values) for _, values in PARAMETERS]
    cases = []
    while uncovered:
        seed = next(pair for pair in order if pair in uncovered)
        assignment = dict(seed)
        for i in range(len(PARAMETERS)):
            if i in assignment:
                continue
            best = None
            for a in range(len(PARAMETERS[i][1])):
                if _is_refused({**assignment, i: a}):
                    continue
                gain = sum(1 for j, b in assignment.items() if (min((i, a), (j, b)), max((i, a), (j, b))) in uncovered)
                key = (-gain, uses[i][a], a)
                if best is None or key < best[0]:
                    best = (key, a)
            assignment[i] = best[1]
        for i, a in assignment.items():
            uses[i][a] += 1
        uncovered -= {pair for pair in itertools.combinations(sorted(assignment.items()), 2)}
        cases.append(Case(*(PARAMETERS[i][1][assignment[i]] for i in range(len(PARAMETERS)))))
    return cases


def _refusal_cases():
    """The refused pair with every value of each other parameter at least once: case k takes value k (cyclically)
    of each, as many cases as the largest number of values among them."""
    fixed = dict(REFUSED)
    others = [(name, values) for name, values in PARAMETERS if name not in fixed]
    count = max(len(values) for _, values in others)
    return [Case(**fixed, **{name: values[k % len(values)] for name, values in others}) for k in range(count)]


CASES = _greedy_all_pairs() + _refusal_cases()


def coverage_gaps(cases):
    """What `cases` lacks of the rules in the module's docstring, one message per gap (none: an empty list).
    Checked from the cases alone, independently of how they were built."""
    gaps = []
    computing = [c for c in cases if not c.refused]
    refusing = [c for c in cases if c.refused]
    for case in cases:
        for name, values in PARAMETERS:
            if getattr(case, name) not in values:
                gaps.append(f"{case.id}: {name} {getattr(case, name)!r} is not one of vLLM's values")
    for (i, (name_i, values_i)), (j, (name_j, values_j)) in itertools.combinations(enumerate(PARAMETERS), 2):
        for a, b in itertools.product(values_i, values_j):
            if {(name_i, a), (name_j, b)} == set(REFUSED):
                if not refusing:
                    gaps.append(f"no refusal case ({name_i} {a!r}, {name_j} {b!r})")
                continue
            if not any(getattr(c, name_i) == a and getattr(c, name_j) == b for c in computing):
                gaps.append(f"no computing case has {name_i} {a!r} and {name_j} {b!r}")
    refused_names = {name for name, _ in REFUSED}
    for name, values in PARAMETERS:
        if name in refused_names:
            continue
        for value in values:
            if not any(getattr(c, name) == value for c in refusing):
                gaps.append(f"no refusal case has {name} {value!r}")
    if len(set(cases)) != len(cases):
        gaps.append("a case is listed twice")
    return gaps
