"""Subnormal floats flushed to zero in the C kernels of ``jit(f, fastmath=True)``.

x86 cores take a microcode assist (on the order of a hundred cycles) for each vector
instruction that reads or produces a subnormal float, unless MXCSR's flush-to-zero
(FTZ) and denormals-are-zero (DAZ) bits are set.  A simulation whose front decays
through the subnormal range (the seeds' wave) makes such values every step: on an
Intel core half the wave step's time went to assists.  XLA's CPU runtime sets both
bits for every computation (``jax.jit`` gives 0 for ``float32(1e-10) * 1e-30``);
NumPy never does, and exact kernels must not (their values are NumPy's).

So only fastmath kernels flush, and only while they run.  MXCSR belongs to a thread:
the exported kernel function sets the bits on entry and restores the caller's value
before each ``return`` (the calling thread's code, the one-thread paths), and each
OpenMP region does the same on each of its threads (a worker thread later runs exact
kernels and must find its MXCSR as it was).  The calling thread leaves the flushing
state while it starts a region: a thread OpenMP creates then (the first region, a
larger team) inherits its creator's MXCSR, and would otherwise keep flushing in every
exact kernel after.  ARM's FPCR.FZ bit plays FTZ's part on aarch64; elsewhere
nothing changes.

The rewrite works on the rendered text (``with_flushing``), so every renderer's
parallel loops get it: a combined ``#pragma omp parallel for ...`` becomes a region
holding the entry, a ``#pragma omp for ...`` and the exit.
"""
from __future__ import annotations

import re

PRELUDE = r"""/* jit(..., fastmath=True): subnormals flush to zero while this kernel runs
   (every thread restores its own state on the way out: kernels/flush.py) */
#if defined(__x86_64__) || defined(_M_X64) || defined(__SSE2__)
#include <xmmintrin.h>
#define ASTJAX_FLUSH_ENTER const unsigned int astjax_csr = _mm_getcsr(); \
    _mm_setcsr(astjax_csr | 0x8040u);
#define ASTJAX_FLUSH_LEAVE _mm_setcsr(astjax_csr);
#define ASTJAX_FLUSH_RESUME _mm_setcsr(astjax_csr | 0x8040u);
#elif defined(__aarch64__)
#define ASTJAX_FLUSH_ENTER unsigned long astjax_fpcr; \
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(astjax_fpcr)); \
    __asm__ __volatile__("msr fpcr, %0" : : "r"(astjax_fpcr | (1ul << 24)));
#define ASTJAX_FLUSH_LEAVE __asm__ __volatile__("msr fpcr, %0" : : "r"(astjax_fpcr));
#define ASTJAX_FLUSH_RESUME \
    __asm__ __volatile__("msr fpcr, %0" : : "r"(astjax_fpcr | (1ul << 24)));
#else
#define ASTJAX_FLUSH_ENTER
#define ASTJAX_FLUSH_LEAVE
#define ASTJAX_FLUSH_RESUME
#endif
"""

ENTER, LEAVE, RESUME = "ASTJAX_FLUSH_ENTER", "ASTJAX_FLUSH_LEAVE", "ASTJAX_FLUSH_RESUME"
# clauses of a combined ``parallel for`` that belong to the region
_REGION_CLAUSES = ("num_threads", "if")
_CLAUSE = re.compile(r"(\w+)\s*(\((?:[^()]|\([^()]*\))*\))?")
_EXPORTED = re.compile(r"^int (\w+)\(", re.M)
_RETURN = re.compile(r"\breturn\b")


def _code_mask(text: str) -> list:
    """Per character: True where it is code (not in a comment, string or char)."""
    mask = [True] * len(text)
    i, n = 0, len(text)
    while i < n:
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif text[i] in "\"'":
            j = i + 1
            while j < n and text[j] != text[i]:
                j += 2 if text[j] == "\\" else 1
            j += 1
        else:
            i += 1
            continue
        for k in range(i, min(j, n)):
            mask[k] = False
        i = j
    return mask


def _next_code(text, mask, i):
    """The index of the first code character at or after ``i`` that is not a space."""
    while i < len(text) and (not mask[i] or text[i].isspace()):
        i += 1
    return i


def _close(text, mask, i, open_ch="{", close_ch="}"):
    """The index just past the bracket matching the one at ``i``."""
    depth = 0
    for j in range(i, len(text)):
        if mask[j]:
            if text[j] == open_ch:
                depth += 1
            elif text[j] == close_ch:
                depth -= 1
                if depth == 0:
                    return j + 1
    raise ValueError("unbalanced brackets in a kernel's text")


def _statement_end(text, mask, i):
    """The index just past the statement starting at ``i`` (a block, a ``for`` with its
    body, or a simple statement ending in ``;``)."""
    i = _next_code(text, mask, i)
    if text[i] == "{":
        return _close(text, mask, i)
    if text.startswith("for", i) and not (text[i + 3].isalnum() or text[i + 3] == "_"):
        head = _next_code(text, mask, i + 3)
        return _statement_end(text, mask, _close(text, mask, head, "(", ")"))
    depth = 0
    for j in range(i, len(text)):
        if mask[j]:
            if text[j] in "([":
                depth += 1
            elif text[j] in ")]":
                depth -= 1
            elif text[j] == ";" and depth == 0:
                return j + 1
    raise ValueError("a statement without its ';' in a kernel's text")


def _split_clauses(rest: str):
    """(region clauses, loop clauses) of a combined construct's clause text."""
    region, loop = [], []
    for m in _CLAUSE.finditer(rest):
        (region if m.group(1) in _REGION_CLAUSES else loop).append(m.group(0))
    return " ".join(region), " ".join(loop)


def _regions(text: str) -> str:
    """Each OpenMP parallel region of ``text`` entering and leaving the flushing state
    on each of its threads, started with the calling thread's own state (the state
    of the exported function's caller, ``astjax_csr``: threads created for the team
    inherit it), the flushing state resumed after."""
    mask = _code_mask(text)
    edits = []              # (start, end, replacement), applied from the last
    for m in re.finditer(r"^([ \t]*)#pragma omp parallel\b(.*)$", text, re.M):
        indent, rest = m.group(1), m.group(2).strip()
        body = m.end() + 1
        if rest.startswith("for"):
            simd = rest.startswith("for simd")
            region, loop = _split_clauses(rest[len("for simd" if simd else "for"):])
            end = _statement_end(text, mask, body)
            pragma = f"#pragma omp {'for simd' if simd else 'for'} {loop}".rstrip()
            replacement = (f"{indent}#pragma omp parallel {region}".rstrip() +
                           f"\n{indent}{{\n{indent}{ENTER}\n{indent}{pragma}\n" +
                           text[body:end] + f"\n{indent}{LEAVE}\n{indent}}}")
            edits.append((m.start(), end, f"{indent}{{ {LEAVE}\n{replacement}\n"
                                          f"{indent}{RESUME} }}"))
        else:
            start = _next_code(text, mask, body)
            if text[start] != "{":
                end = _statement_end(text, mask, start)
                inner = f"{{ {ENTER}\n{text[start:end]}\n{LEAVE} }}"
            else:
                end = _close(text, mask, start)
                inner = (f"{{ {ENTER}{text[start + 1:end - 1]}"
                         f"{indent}{LEAVE}\n{indent}}}")
            edits.append((m.start(), end, f"{indent}{{ {LEAVE}\n{text[m.start():start]}"
                                          f"{inner}\n{indent}{RESUME} }}"))
    for start, end, replacement in reversed(edits):
        text = text[:start] + replacement + text[end:]
    return text


def _exported(text: str) -> str:
    """Each exported function (``int name(`` at the start of a line) entering the
    flushing state on entry and leaving it before each ``return``."""
    mask = _code_mask(text)
    edits = []
    for m in _EXPORTED.finditer(text):
        if not mask[m.start()]:
            continue
        params_end = _close(text, mask, m.end() - 1, "(", ")")
        start = _next_code(text, mask, params_end)
        if text[start] != "{":
            continue                        # a declaration
        end = _close(text, mask, start)
        edits.append((start + 1, start + 1, f"\n    {ENTER}"))
        for r in _RETURN.finditer(text, start, end):
            if mask[r.start()]:
                stop = _statement_end(text, mask, r.start())
                edits.append((r.start(), stop, f"{{ {LEAVE} {text[r.start():stop]} }}"))
    for start, end, replacement in sorted(edits, reverse=True):
        text = text[:start] + replacement + text[end:]
    return text


def with_flushing(text: str) -> str:
    """A C kernel's ``text`` running with subnormals flushed to zero on every thread,
    each thread's floating-point state restored when the kernel returns."""
    body = _exported(_regions(text))
    return PRELUDE + body
