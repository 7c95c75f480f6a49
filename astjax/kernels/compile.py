"""The system C compiler, an on-disk cache of compiled kernels, and loading them.

The compiler is ``$CC``, else the first of ``cc``, ``gcc``, ``clang`` on ``PATH``;
whether it has OpenMP is probed once.  Flags never allow value-changing rewrites
(no ``-ffast-math``; ``-ffp-contract=off`` forbids fused multiply-add), so compiled
``+ - * /`` round exactly as NumPy's do -- except in a kernel whose text begins with
``FASTMATH_MARK`` (``jit(f, fastmath=True)``, the user's choice), built with
``FASTMATH_FLAGS``.

Libraries are cached under ``$XDG_CACHE_HOME/astjax/kernels`` (else
``~/.cache/astjax/kernels``), a directory this user owns and nobody else may write
(anything else is refused: loading a library runs its code).  The file name is a
sha256 of the C text, the compiler's ``--version`` and the flags; a library is
written to a temporary file and renamed into place, with a ``.sha256`` of its bytes
beside it that is checked before every load, so a truncated or corrupt entry is
deleted and rebuilt, never loaded.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import threading

from astjax.errors import AstjaxError

FLAGS = ("-O3", "-std=c99", "-fPIC", "-shared", "-fno-math-errno", "-ffp-contract=off",
         "-fno-strict-aliasing")
# jit(f, fastmath=True): the value-changing rewrites that keep every algorithm the
# kernels inline correct.  a * b + c may fuse into one rounding, x / y become
# x * (1 / y) (a loop-invariant divisor's reciprocal is hoisted, (a / b) / c becomes
# a / (b * c)), the sign of a zero result may differ: values within a few ulp of
# NumPy's, not bit-identical.  Not reassociation (-fassociative-math folds
# ``(x + 2^52) - 2^52`` to ``x``: the range reductions in vmath.py would be wrong), not
# -ffinite-math-only (np.isnan and NaN propagation keep their meaning), and never
# -ffast-math itself (a shared library built with it may switch the whole process to
# flushing subnormals to zero; the kernels flush only while they run: flush.py).
FASTMATH_FLAGS = ("-ffp-contract=fast", "-freciprocal-math", "-fno-signed-zeros",
                  "-fno-trapping-math")
# the first line of a kernel's text built with FASTMATH_FLAGS (a comment: shown with it)
FASTMATH_MARK = ("/* astjax kernel flags: jit(..., fastmath=True) -- " +
                 " ".join(FASTMATH_FLAGS) + " (not bit-identical to NumPy) */\n")
_lock = threading.RLock()


class CompilerUnavailable(AstjaxError):
    """No working C compiler: the compiled backend cannot run here."""


class KernelCompileError(AstjaxError):
    """A kernel's C text did not compile: shows the kernel line and the user's line."""


@functools.lru_cache(maxsize=None)
def _find(cc_env):
    """(compiler path, version text, openmp flag or '') for ``$CC`` = ``cc_env``."""
    candidates = [cc_env] if cc_env else ["cc", "gcc", "clang"]
    why = []
    for name in candidates:
        path = shutil.which(name) if not os.path.isabs(name) else (
            name if os.access(name, os.X_OK) else None)
        if path is None:
            why.append(f"{name}: not found")
            continue
        try:
            out = subprocess.run([path, "--version"], capture_output=True, text=True,
                                 timeout=30)
        except (OSError, subprocess.SubprocessError) as e:
            why.append(f"{name}: {e}")
            continue
        version = (out.stdout or out.stderr).strip()
        ok, err = _try(path, "int astjax_probe(void) { return 1; }\n", ())
        if not ok:
            why.append(f"{name}: cannot build a shared library ({err.strip()[:200]})")
            continue
        omp_src = ("#include <omp.h>\nint astjax_probe(void) { int s = 0;\n"
                   "#pragma omp parallel for simd reduction(+:s)\n"
                   "for (int i = 0; i < 8; i++) s += i;\nreturn s + omp_get_max_threads(); }\n")
        omp = "-fopenmp" if _try(path, omp_src, ("-fopenmp",))[0] else ""
        return path, version, omp
    where = "$CC" if cc_env else "cc, gcc, clang"
    raise CompilerUnavailable(f"no working C compiler ({where}): " + "; ".join(why))


def _try(cc, text, extra):
    with tempfile.TemporaryDirectory(prefix="astjax-probe-") as d:
        src, lib = os.path.join(d, "p.c"), os.path.join(d, "p.so")
        with open(src, "w") as f:
            f.write(text)
        try:
            r = subprocess.run([cc, *FLAGS, *extra, src, "-o", lib], capture_output=True,
                               text=True, timeout=60)
        except (OSError, subprocess.SubprocessError) as e:
            return False, str(e)
        return r.returncode == 0 and os.path.exists(lib), r.stderr


def compiler():
    """(path, version, openmp flag); raises ``CompilerUnavailable`` with the reason."""
    return _find(os.environ.get("CC", ""))


def available():
    """(True, '') when kernels can be compiled here, else (False, why not)."""
    try:
        compiler()
    except CompilerUnavailable as e:
        return False, str(e)
    return True, ""


def reset():
    """Forget the probed compiler (after changing ``$CC``) and the loaded libraries."""
    _find.cache_clear()
    _loaded.clear()


def cache_dir() -> str:
    """The per-user kernel cache, created 0700; refused when another user owns it or
    others may write to it."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"),
                                                            ".cache")
    path = os.path.join(base, "astjax", "kernels")
    os.makedirs(path, mode=0o700, exist_ok=True)
    st = os.stat(path)
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise CompilerUnavailable(f"kernel cache {path} belongs to another user; "
                                  "set XDG_CACHE_HOME to a directory of your own")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise CompilerUnavailable(f"kernel cache {path} is writable by others; "
                                  f"run chmod 700 {path}")
    return path


def _cpu() -> str:
    """What -march=native means here (a cached library is only valid on this CPU)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return line
    except OSError:
        pass
    return platform.processor() or platform.machine()


def flags(openmp: str, fastmath: bool = False) -> tuple:
    extra = ("-march=native",) if platform.machine() in ("x86_64", "AMD64") else ()
    base = FLAGS
    if fastmath:
        base = tuple(f for f in FLAGS if not f.startswith("-ffp-contract")) + FASTMATH_FLAGS
    return base + extra + ((openmp,) if openmp else ())


def text_flags(text: str, openmp: str) -> tuple:
    """The flags ``text`` is built with: fast-math ones when it begins with the mark."""
    return flags(openmp, text.startswith(FASTMATH_MARK))


def key(text: str) -> str:
    cc, version, omp = compiler()
    h = hashlib.sha256()
    for part in (text, cc, version, " ".join(text_flags(text, omp)), _cpu(), sys.platform):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


_loaded: dict = {}


def _digest(path) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _passive_openmp():
    """OpenMP threads spin a while when a kernel ends, then sleep.  libgomp's default
    spins for up to 300,000 rounds (idle threads then compete with NumPy's and BLAS's
    between kernels); a passive policy sleeps at once, and the next kernel pays a
    wake-up (tens of microseconds on a virtual machine: the 300x300 wave ran at 97 ms
    with two threads against 72 with one).  10,000 rounds keep the threads of a loop
    body awake across the host code between its kernels (FWI's ``value_and_grad``,
    whose forward and backward steps run from Python: 306-331 ms with 1,000 rounds,
    266-274 with 10,000; the forward's compiled loop: 59 ms either way) and cost the
    MLP's BLAS calls nothing measurable (its kernels take threads only for 64x the
    usual work: 2.90-3.02 ms against 2.90-2.97 with 1,000).  Read once, when libgomp
    loads; the user's own ``OMP_WAIT_POLICY``/``GOMP_SPINCOUNT`` win."""
    if "OMP_WAIT_POLICY" not in os.environ:
        os.environ.setdefault("GOMP_SPINCOUNT", "10000")
        os.environ.setdefault("KMP_BLOCKTIME", "0")    # (clang's libomp: milliseconds)


def _load_checked(lib, sha):
    """The library at ``lib`` when its bytes hash to the digest saved beside it."""
    try:
        with open(sha) as f:
            want = f.read().strip()
        if _digest(lib) != want:
            return None
        _passive_openmp()
        return ctypes.CDLL(lib)
    except OSError:
        return None


def _remove(*paths):
    for p in paths:
        try:
            os.unlink(p)
        except OSError:
            pass


def build(text: str, symbol: str, origin=None):
    """The function ``symbol`` of ``text`` compiled (or from the cache), as a ctypes
    function.  ``origin(c_line) -> str`` explains a failing C line (compile errors)."""
    k = key(text)
    with _lock:
        got = _loaded.get(k)
        if got is not None:
            return getattr(got, symbol)
        d = cache_dir()
        lib, sha = os.path.join(d, k + ".so"), os.path.join(d, k + ".so.sha256")
        handle = _load_checked(lib, sha) if os.path.exists(lib) else None
        if handle is None:
            _remove(lib, sha)
            _compile(text, d, lib, sha, origin)
            handle = _load_checked(lib, sha)
            if handle is None:
                raise KernelCompileError(f"the compiled kernel {lib} could not be loaded")
        _loaded[k] = handle
        return getattr(handle, symbol)


def _compile(text, d, lib, sha, origin):
    cc, _, omp = compiler()
    fd, tmp_src = tempfile.mkstemp(prefix="tmp-", suffix=".c", dir=d)
    tmp_lib = tmp_src[:-2] + ".so"
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        r = subprocess.run([cc, *text_flags(text, omp), tmp_src, "-o", tmp_lib, "-lm"],
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0 or not os.path.exists(tmp_lib):
            raise KernelCompileError(_explain(r.stderr, text, tmp_src, origin))
        digest = _digest(tmp_lib)
        fd2, tmp_sha = tempfile.mkstemp(prefix="tmp-", suffix=".sha256", dir=d)
        with os.fdopen(fd2, "w") as f:
            f.write(digest + "\n")
        os.replace(tmp_lib, lib)
        os.replace(tmp_sha, sha)
    finally:
        _remove(tmp_src, tmp_lib)


def _explain(stderr, text, src, origin):
    """The compiler's first error, with the kernel line and the user's line."""
    lines = text.splitlines()
    m = re.search(re.escape(os.path.basename(src)) + r":(\d+):(?:\d+:)? *(?:fatal )?error: (.*)",
                  stderr)
    if not m:
        return "a kernel failed to compile:\n" + stderr.strip()[:2000]
    n = int(m.group(1))
    c_line = lines[n - 1] if 0 < n <= len(lines) else ""
    msg = [f"a kernel failed to compile: {m.group(2).strip()}",
           f"  kernel line {n}: {c_line.strip()}"]
    user = origin(n) if origin else None
    if user:
        msg.append(f"  from {user}")
    msg.append("  (this is a bug in astjax; jit(f, backend=\"numpy\") runs "
               "the same code with NumPy)")
    return "\n".join(msg)
