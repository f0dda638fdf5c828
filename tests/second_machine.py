"""A second floating-point machine for the notebook kernels.

Float results of numpy depend on the machine: OpenBLAS picks its matmul kernel by CPU model,
and numpy dispatches its loops to the widest SIMD extension the CPU has. A float32 error printed
on an Intel Xeon with AVX-512 (`max |batch - dense| = 1e-07`) read `3e-07` on an AMD EPYC.
`environment()` names the settings that make this machine compute like one without AVX-512:
OpenBLAS's Haswell kernels (AVX2, what it picks on AMD Zen) and numpy with its AVX-512 loops
switched off. tests/conftest.py sets them for the kernels strict nbval starts, so `make test`
compares the committed outputs (executed natively by `make notebooks`) with what a second kind
of machine computes: a digit that depends on the CPU shows up as a mismatch on this machine
already, not only on the next one.

Leaves out: a different libm (`exp`, `log`); on a machine without AVX-512 (or not x86-64) the
settings are empty and both runs compute alike.
"""

from __future__ import annotations

import platform

# numpy's dispatch targets that need AVX-512, under the names numpy 1.x and 2.x give them.
AVX512_TARGETS = ("X86_V4", "AVX512F", "AVX512_SKX", "AVX512_CLX", "AVX512_CNL", "AVX512_ICL", "AVX512_SPR")


def environment() -> dict[str, str]:
    """Environment variables for a child process that computes like an AVX2 machine;
    {} where this machine cannot differ from one (no AVX-512, or not x86-64)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return {}
    try:
        from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    except ImportError:  # numpy 1.x
        from numpy.core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    if not (__cpu_features__.get("AVX2") and __cpu_features__.get("FMA3")):
        return {}  # Haswell kernels need AVX2 and FMA
    disabled = [t for t in __cpu_dispatch__ if t in AVX512_TARGETS and __cpu_features__.get(t)]
    if not disabled:
        return {}
    return {"OPENBLAS_CORETYPE": "Haswell", "NPY_DISABLE_CPU_FEATURES": " ".join(disabled)}
