/* RoPE for the half layout on a CPU: one read and one write per element.
 *
 * Built by rope_lab/_ckernel.py the first time it is needed, with the C compiler it finds
 * (cc, gcc or clang), and loaded with ctypes. It computes exactly the reference formula of
 * rope_lab.rope.rotate_reference, each product and sum rounded once (-ffp-contract=off):
 *
 *     a' = a·cos − b·sin,   b' = b·cos + a·sin,   a = x[i], b = x[i + half]
 *
 * Rows are addressed through three leading indices (i0, i1, i2) with their own strides for
 * x, the tables and out (a stride of 0 broadcasts), so q of shape (batch, heads, seq, dim) in
 * any memory order, and cos/sin of shape (seq, half) or (batch, 1, seq, half), need no copy.
 * Features within a row are contiguous. Rows are shared among `threads` OpenMP threads; built
 * with -fopenmp next to PyTorch, which loads libgomp.so.1 first, these are PyTorch's own
 * intra-op threads, so nothing else competes for the cores.
 */
#include <stdint.h>

int rope_has_openmp(void)
{
#ifdef _OPENMP
    return 1;
#else
    return 0;
#endif
}

#define ROPE_HALF(NAME, T)                                                                  \
    void NAME(const T *x, int64_t xs0, int64_t xs1, int64_t xs2,                            \
              const T *cosv, int64_t cs0, int64_t cs1, int64_t cs2,                         \
              const T *sinv, int64_t ss0, int64_t ss1, int64_t ss2,                         \
              T *out, int64_t os0, int64_t os1, int64_t os2,                                \
              int64_t n0, int64_t n1, int64_t n2, int64_t half, int64_t threads)             \
    {                                                                                       \
        int64_t rows = n0 * n1 * n2;                                                        \
        _Pragma("omp parallel for schedule(static) num_threads(threads) if(threads > 1)")  \
        for (int64_t row = 0; row < rows; row++) {                                          \
            int64_t i2 = row % n2, rest = row / n2, i1 = rest % n1, i0 = rest / n1;         \
            const T *a = x + i0 * xs0 + i1 * xs1 + i2 * xs2, *b = a + half;                 \
            const T *c = cosv + i0 * cs0 + i1 * cs1 + i2 * cs2;                             \
            const T *s = sinv + i0 * ss0 + i1 * ss1 + i2 * ss2;                             \
            T *out_a = out + i0 * os0 + i1 * os1 + i2 * os2, *out_b = out_a + half;         \
            for (int64_t i = 0; i < half; i++) {                                            \
                T av = a[i], bv = b[i], cv = c[i], sv = s[i];                               \
                out_a[i] = av * cv - bv * sv;                                               \
                out_b[i] = bv * cv + av * sv;                                               \
            }                                                                               \
        }                                                                                   \
    }

ROPE_HALF(rope_half_float32, float)
ROPE_HALF(rope_half_float64, double)
