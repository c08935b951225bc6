/* RoPE for the half layout on a CPU: one read and one write per element.
 *
 * Built by rope_lab/_ckernel.py the first time it is needed, with the C compiler it finds
 * (cc, gcc or clang), and loaded with ctypes. It computes exactly the reference formula of
 * rope_lab.rope.rotate_reference, each product and sum rounded once (-ffp-contract=off):
 *
 *     a' = a·cos − b·sin,   b' = b·cos + a·sin,   a = x[i], b = x[i + half]
 *
 * x and out are float32, float64 or bfloat16 (computed in float with float32 tables, rounded
 * once on store).
 *
 * Rows are addressed through three leading indices (i0, i1, i2) with their own strides for
 * x, the tables and out (a stride of 0 broadcasts), so q of shape (batch, heads, seq, dim) in
 * any memory order, and cos/sin of shape (seq, half) or (batch, 1, seq, half), need no copy.
 * Features within a row are contiguous. Rows are shared among `threads` OpenMP threads; built
 * with -fopenmp next to PyTorch, which loads libgomp.so.1 first, these are PyTorch's own
 * intra-op threads, so nothing else competes for the cores.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

int rope_has_openmp(void)
{
#ifdef _OPENMP
    return 1;
#else
    return 0;
#endif
}

/* bfloat16 x and out (stored as uint16_t) are computed in float with float tables: widen on
 * load (a shift), round to nearest even once on store. */
static inline float bf16_load(const uint16_t *p)
{
    uint32_t bits = (uint32_t)*p << 16;
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

static inline uint16_t bf16_round(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u) /* NaN stays NaN (quiet) */
        return (uint16_t)((bits >> 16) | 0x40u);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

#define LOAD_PLAIN(p) (*(p))
#define STORE_PLAIN(p, v) (*(p) = (v))
#define LOAD_BF16(p) bf16_load(p)
#define STORE_BF16(p, v) (*(p) = bf16_round(v))

/* T: the type of x and out; C: of the tables and the arithmetic. */
#define ROPE_HALF(NAME, T, C, LOAD, STORE)                                                  \
    void NAME(const T *x, int64_t xs0, int64_t xs1, int64_t xs2,                            \
              const C *cosv, int64_t cs0, int64_t cs1, int64_t cs2,                         \
              const C *sinv, int64_t ss0, int64_t ss1, int64_t ss2,                         \
              T *out, int64_t os0, int64_t os1, int64_t os2,                                \
              int64_t n0, int64_t n1, int64_t n2, int64_t half, int64_t threads)             \
    {                                                                                       \
        int64_t rows = n0 * n1 * n2;                                                        \
        _Pragma("omp parallel for schedule(static) num_threads(threads) if(threads > 1)")  \
        for (int64_t row = 0; row < rows; row++) {                                          \
            int64_t i2 = row % n2, rest = row / n2, i1 = rest % n1, i0 = rest / n1;         \
            const T *a = x + i0 * xs0 + i1 * xs1 + i2 * xs2, *b = a + half;                 \
            const C *c = cosv + i0 * cs0 + i1 * cs1 + i2 * cs2;                             \
            const C *s = sinv + i0 * ss0 + i1 * ss1 + i2 * ss2;                             \
            T *out_a = out + i0 * os0 + i1 * os1 + i2 * os2, *out_b = out_a + half;         \
            for (int64_t i = 0; i < half; i++) {                                            \
                C av = LOAD(a + i), bv = LOAD(b + i), cv = c[i], sv = s[i];                 \
                STORE(out_a + i, av * cv - bv * sv);                                        \
                STORE(out_b + i, bv * cv + av * sv);                                        \
            }                                                                               \
        }                                                                                   \
    }

ROPE_HALF(rope_half_float32, float, float, LOAD_PLAIN, STORE_PLAIN)
ROPE_HALF(rope_half_float64, double, double, LOAD_PLAIN, STORE_PLAIN)
ROPE_HALF(rope_half_bfloat16, uint16_t, float, LOAD_BF16, STORE_BF16)

/* A decode step (a handful of positions, a tensor of a few thousand numbers) in one call:
 * cos and sin of m·θ_i for every given position, then the rotation. At that size the calls
 * around the work cost more than the work, so a table built with PyTorch (nine small
 * kernels) and a second call would triple the time.
 *
 * The angles follow rope_lab.rope.apply_rope's rule. float θ: m exact; below 2^24 the angle
 * is the float32 product (float)m·θ_i, rounded once, as transformers computes it; at or
 * beyond 2^24 it is the product formed in double, whose cos and sin are taken in double
 * (libm reduces any angle exactly) and rounded to float. double θ: the double product.
 * positions: contiguous int64, n_positions of them, or NULL for 0 … n_positions − 1 (the
 * index along seq); ps0..ps2 are their (broadcast) strides over the rows, so row (i0, i1, i2)
 * uses position number i0·ps0 + i1·ps1 + i2·ps2. n_positions · half must not exceed
 * ROPE_POSITIONS_MAX (the caller checks). One thread.
 */
#define ROPE_POSITIONS_MAX 512

static void angles_float(int64_t m, const float *theta, int64_t half, float *c, float *s)
{
    if (m > -16777216 && m < 16777216) {
        float mf = (float)m;
        for (int64_t i = 0; i < half; i++) {
            float a = mf * theta[i];
            c[i] = cosf(a);
            s[i] = sinf(a);
        }
    } else {
        double md = (double)m;
        for (int64_t i = 0; i < half; i++) {
            double a = md * (double)theta[i];
            c[i] = (float)cos(a);
            s[i] = (float)sin(a);
        }
    }
}

static void angles_double(int64_t m, const double *theta, int64_t half, double *c, double *s)
{
    double md = (double)m;
    for (int64_t i = 0; i < half; i++) {
        double a = md * theta[i];
        c[i] = cos(a);
        s[i] = sin(a);
    }
}

#define ROPE_HALF_POSITIONS(NAME, T, C, ANGLES, LOAD, STORE)                               \
    void NAME(const T *x, int64_t xs0, int64_t xs1, int64_t xs2,                            \
              const int64_t *positions, int64_t n_positions,                                \
              int64_t ps0, int64_t ps1, int64_t ps2, const C *theta,                        \
              T *out, int64_t os0, int64_t os1, int64_t os2,                                \
              int64_t n0, int64_t n1, int64_t n2, int64_t half)                             \
    {                                                                                       \
        C table[2 * ROPE_POSITIONS_MAX];                                                    \
        C *cos_table = table, *sin_table = table + n_positions * half;                      \
        for (int64_t p = 0; p < n_positions; p++)                                           \
            ANGLES(positions ? positions[p] : p, theta, half, cos_table + p * half,         \
                   sin_table + p * half);                                                   \
        int64_t rows = n0 * n1 * n2;                                                        \
        for (int64_t row = 0; row < rows; row++) {                                          \
            int64_t i2 = row % n2, rest = row / n2, i1 = rest % n1, i0 = rest / n1;         \
            const T *a = x + i0 * xs0 + i1 * xs1 + i2 * xs2, *b = a + half;                 \
            int64_t p = i0 * ps0 + i1 * ps1 + i2 * ps2;                                     \
            const C *c = cos_table + p * half, *s = sin_table + p * half;                   \
            T *out_a = out + i0 * os0 + i1 * os1 + i2 * os2, *out_b = out_a + half;         \
            for (int64_t i = 0; i < half; i++) {                                            \
                C av = LOAD(a + i), bv = LOAD(b + i), cv = c[i], sv = s[i];                 \
                STORE(out_a + i, av * cv - bv * sv);                                        \
                STORE(out_b + i, bv * cv + av * sv);                                        \
            }                                                                               \
        }                                                                                   \
    }

ROPE_HALF_POSITIONS(rope_half_positions_float32, float, float, angles_float, LOAD_PLAIN,
                    STORE_PLAIN)
ROPE_HALF_POSITIONS(rope_half_positions_float64, double, double, angles_double, LOAD_PLAIN,
                    STORE_PLAIN)
ROPE_HALF_POSITIONS(rope_half_positions_bfloat16, uint16_t, float, angles_float, LOAD_BF16,
                    STORE_BF16)
