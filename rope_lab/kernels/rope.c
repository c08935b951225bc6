/* RoPE on a CPU in one pass: one read and one write per element, both layouts.
 *
 * Built by rope_lab/_ckernel.py the first time it is needed, with the C compiler it finds
 * (cc, gcc or clang), and loaded with ctypes. It computes exactly the reference formula of
 * rope_lab.rope.rotate_reference, each product and sum rounded once (-ffp-contract=off):
 *
 *     a' = a·cos − b·sin,   b' = b·cos + a·sin
 *
 * with (a, b) the pair (x[i], x[i + half]) in the half layout and (x[2i], x[2i + 1]) in the
 * interleaved one. x and out are float32, float64 or bfloat16 (computed in float with float32
 * tables, rounded once on store).
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
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#include <unistd.h>
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels refuse it, harmlessly */
#endif
#endif

int rope_has_openmp(void)
{
#ifdef _OPENMP
    return 1;
#else
    return 0;
#endif
}

#ifdef _OPENMP
#include <omp.h>
static inline int64_t omp_threads(void) { return omp_get_num_threads(); }
static inline int64_t omp_thread(void) { return omp_get_thread_num(); }
#else /* no OpenMP: the Python side never asks for threads > 1 */
static inline int64_t omp_threads(void) { return 1; }
static inline int64_t omp_thread(void) { return 0; }
#endif

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

/* One row: the pairs of the half layout, (i, i + half). */
#define PAIRS_HALF(T, C, LOAD, STORE)                                                       \
    for (int64_t i = 0; i < half; i++) {                                                    \
        C av = LOAD(xr + i), bv = LOAD(xr + half + i), cv = c[i], sv = s[i];                \
        STORE(outr + i, av * cv - bv * sv);                                                 \
        STORE(outr + half + i, bv * cv + av * sv);                                          \
    }

/* One row: the pairs of the interleaved layout, (2i, 2i + 1). Through two small arrays (a
 * row of at most ROPE_ROW_PAIRS pairs at a time, in the L1 cache): written as one loop, GCC
 * recognizes a' = a·c − b·s, b' = b·c + a·s on neighbouring lanes as a complex multiply and
 * fuses it into fmaddsub instructions, one rounding fewer than the formula (whatever
 * -ffp-contract says), so the products are formed in one loop and combined in another. */
#define ROPE_ROW_PAIRS 256
#define PAIRS_INTERLEAVED(T, C, LOAD, STORE)                                                \
    for (int64_t start = 0; start < half; start += ROPE_ROW_PAIRS) {                        \
        int64_t count = half - start < ROPE_ROW_PAIRS ? half - start : ROPE_ROW_PAIRS;      \
        C first[ROPE_ROW_PAIRS], second[ROPE_ROW_PAIRS];                                    \
        const T *xs = xr + 2 * start;                                                       \
        const C *cs = c + start, *sn = s + start;                                           \
        for (int64_t i = 0; i < count; i++) {                                               \
            C av = LOAD(xs + 2 * i), bv = LOAD(xs + 2 * i + 1);                             \
            first[i] = av * cs[i] - bv * sn[i];                                             \
            second[i] = bv * cs[i];                                                         \
            second[i] += av * sn[i];                                                        \
        }                                                                                   \
        T *os = outr + 2 * start;                                                           \
        for (int64_t i = 0; i < count; i++) {                                               \
            STORE(os + 2 * i, first[i]);                                                    \
            STORE(os + 2 * i + 1, second[i]);                                               \
        }                                                                                   \
    }

/* A fresh output's pages, faulted in by one system call before the loop writes them. Left to
 * the loop, each first write to a page traps into the kernel, which zeroes the page and on
 * the way back has evicted part of the caches: the cos/sin rows and the inputs the loop was
 * reusing. So a fresh 32 MiB output cost 1.15-1.3 x a copy (which reuses nothing) where a
 * warm one costs 1.0-1.1 x; populated first, the rotation runs at copy speed (measured on
 * 2 loaded cores, C only: fresh 68.7 ms, populated first 55.0 ms, memcpy 56.6 ms). The
 * caller asks for it (bytes > 0) only for an output it has just allocated, contiguous, of a
 * MiB or more. Each thread populates the rows it will write. */
static void populate(void *start, int64_t bytes)
{
#ifdef __linux__
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t first = ((uintptr_t)start + page - 1) & ~(page - 1);
    uintptr_t end = ((uintptr_t)start + (uintptr_t)bytes) & ~(page - 1);
    if (end > first)
        madvise((void *)first, end - first, MADV_POPULATE_WRITE); /* a failure: plain faults */
#else
    (void)start;
    (void)bytes;
#endif
}

/* The rows [row_first, row_last) of a thread: a static share, as "omp for schedule(static)"
 * gives. */
#define THREAD_ROWS(rows, threads, thread)                                                  \
    int64_t row_first = (rows) * (thread) / (threads);                                      \
    int64_t row_last = (rows) * ((thread) + 1) / (threads);

/* T: the type of x and out; C: of the tables and the arithmetic. The sizes and strides come
 * in one array (one argument for ctypes to convert instead of seventeen: at a decode step
 * converting arguments costs more than the loop):
 *     sizes = {xs0, xs1, xs2, cs0, cs1, cs2, ss0, ss1, ss2, os0, os1, os2, n0, n1, n2, half,
 *              threads, populate}
 * populate: bytes per row of a contiguous fresh out to fault in first (0: none; see
 * populate()). One thread runs the plain loop: entering an OpenMP region, even with if(0),
 * costs about a microsecond, as much as a decode step's rotation. */
#define TABLE_ROW(T, C, LOAD, STORE, PAIRS)                                                 \
    {                                                                                       \
        int64_t i2 = row % n2, rest = row / n2, i1 = rest % n1, i0 = rest / n1;             \
        const T *xr = x + i0 * xs0 + i1 * xs1 + i2 * xs2;                                   \
        const C *c = cosv + i0 * cs0 + i1 * cs1 + i2 * cs2;                                 \
        const C *s = sinv + i0 * ss0 + i1 * ss1 + i2 * ss2;                                 \
        T *outr = out + i0 * os0 + i1 * os1 + i2 * os2;                                     \
        PAIRS(T, C, LOAD, STORE)                                                            \
    }

#define ROPE_TABLES(NAME, T, C, LOAD, STORE, PAIRS)                                         \
    void NAME(const T *x, const C *cosv, const C *sinv, T *out, const int64_t *sizes)      \
    {                                                                                       \
        int64_t xs0 = sizes[0], xs1 = sizes[1], xs2 = sizes[2], cs0 = sizes[3];             \
        int64_t cs1 = sizes[4], cs2 = sizes[5], ss0 = sizes[6], ss1 = sizes[7];             \
        int64_t ss2 = sizes[8], os0 = sizes[9], os1 = sizes[10], os2 = sizes[11];           \
        int64_t n0 = sizes[12], n1 = sizes[13], n2 = sizes[14], half = sizes[15];           \
        int64_t threads = sizes[16], row_bytes = sizes[17], rows = n0 * n1 * n2;            \
        if (threads > 1) {                                                                  \
            _Pragma("omp parallel num_threads(threads)")                                   \
            {                                                                               \
                THREAD_ROWS(rows, omp_threads(), omp_thread())                              \
                if (row_bytes)                                                              \
                    populate((char *)out + row_first * row_bytes,                           \
                             (row_last - row_first) * row_bytes);                           \
                for (int64_t row = row_first; row < row_last; row++)                        \
                    TABLE_ROW(T, C, LOAD, STORE, PAIRS)                                     \
            }                                                                               \
        } else {                                                                            \
            if (row_bytes)                                                                  \
                populate(out, rows * row_bytes);                                            \
            for (int64_t row = 0; row < rows; row++)                                        \
                TABLE_ROW(T, C, LOAD, STORE, PAIRS)                                         \
        }                                                                                   \
    }

ROPE_TABLES(rope_half_float32, float, float, LOAD_PLAIN, STORE_PLAIN, PAIRS_HALF)
ROPE_TABLES(rope_half_float64, double, double, LOAD_PLAIN, STORE_PLAIN, PAIRS_HALF)
ROPE_TABLES(rope_half_bfloat16, uint16_t, float, LOAD_BF16, STORE_BF16, PAIRS_HALF)
ROPE_TABLES(rope_interleaved_float32, float, float, LOAD_PLAIN, STORE_PLAIN, PAIRS_INTERLEAVED)
ROPE_TABLES(rope_interleaved_float64, double, double, LOAD_PLAIN, STORE_PLAIN,
            PAIRS_INTERLEAVED)
ROPE_TABLES(rope_interleaved_bfloat16, uint16_t, float, LOAD_BF16, STORE_BF16,
            PAIRS_INTERLEAVED)

/* Position ids in one call: cos and sin of m·θ_i for every given position (the table), then
 * the rotation. The angles follow rope_lab/_angles.py's rule:
 *
 * float θ: below 2^24 the angle is the float32 product (float)m·θ_i, rounded once, as
 * transformers computes it, and its cos and sin are computed in double and rounded once to
 * float (correctly rounded: the numbers of _angles.cos_sin_table). At or beyond 2^24 the
 * product is formed in double, whose cos and sin are taken in double (libm reduces any angle
 * exactly) and rounded to float. double θ: the double product, libm's cos and sin.
 *
 * cos and sin of a float angle below 2^24 without libm, so that the loop vectorizes: the
 * angle a (exact in double) is reduced to r = a − k·π/2, |r| ≤ π/4, with π/2 in three parts
 * of which the first two have 28 bits (|k| < 2^24, so k·part is exact, and so is a − k·part1
 * by Sterbenz's lemma),
 * then fdlibm's polynomials for sin and cos on [−π/4, π/4] (errors below 1e-16), and the
 * quadrant k mod 4 picks and signs them. In double throughout, then rounded once to float:
 * the correctly rounded result except where the exact value lies within ~1e-16 of a
 * rounding boundary of float (the tests compare it with double cos and sin). */
#define TWO_OVER_PI 0.63661977236758134308
#define PIO2_1 0x1.921fb54p+0       /* π/2: its first 28 bits */
#define PIO2_2 0x1.10b4612p-30      /* the next 28 */
#define PIO2_3 -1.2177051777973966e-18 /* the rest, rounded to double */
#define ROUNDER 0x1.8p52              /* x + ROUNDER − ROUNDER: x rounded to an integer */

static const double S1 = -1.66666666666666324348e-01, S2 = 8.33333333332248946124e-03,
                    S3 = -1.98412698298579493134e-04, S4 = 2.75573137070700676789e-06,
                    S5 = -2.50507602534068634195e-08, S6 = 1.58969099521155010221e-10;
static const double C1 = 4.16666666666666019037e-02, C2 = -1.38888888888741095749e-03,
                    C3 = 2.48015872894767294178e-05, C4 = -2.75573143513906633035e-07,
                    C5 = 2.08757232129817482790e-09, C6 = -1.13596475577881948265e-11;

/* theta_max: the largest |θ_i|; the polynomial path needs |angle| < 2^23 (so |k| < 2^24). */
static void angles_float(int64_t m, const float *theta, int64_t half, double theta_max,
                         float *c, float *s)
{
    int exact_m = m > -16777216 && m < 16777216;
    if (exact_m && fabs((double)m) * theta_max < 8388608.0) {
        float mf = (float)m;
        for (int64_t i = 0; i < half; i++) {
            double a = (double)(mf * theta[i]);
            double k = (a * TWO_OVER_PI + ROUNDER) - ROUNDER;
            double r = ((a - k * PIO2_1) - k * PIO2_2) - k * PIO2_3;
            double z = r * r;
            double sin_r = r + r * z * (S1 + z * (S2 + z * (S3 + z * (S4 + z * (S5 + z * S6)))));
            double cos_r = 1.0 - 0.5 * z
                           + z * z * (C1 + z * (C2 + z * (C3 + z * (C4 + z * (C5 + z * C6)))));
            int64_t quadrant = (int64_t)k & 3;
            double sv = (quadrant & 1) ? cos_r : sin_r;
            double cv = (quadrant & 1) ? sin_r : cos_r;
            s[i] = (float)((quadrant & 2) ? -sv : sv);
            c[i] = (float)(((quadrant + 1) & 2) ? -cv : cv);
        }
    } else if (exact_m) { /* frequencies above 1 (inv_freq given by hand): libm reduces */
        float mf = (float)m;
        for (int64_t i = 0; i < half; i++) {
            double a = (double)(mf * theta[i]);
            c[i] = (float)cos(a);
            s[i] = (float)sin(a);
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

static void angles_double(int64_t m, const double *theta, int64_t half, double theta_max,
                          double *c, double *s)
{
    (void)theta_max;
    double md = (double)m;
    for (int64_t i = 0; i < half; i++) {
        double a = md * theta[i];
        c[i] = cos(a);
        s[i] = sin(a);
    }
}

/* positions: contiguous int64, n_positions of them, or NULL for 0 … n_positions − 1 (the
 * index along seq); ps0..ps2 are their (broadcast) strides over the rows, so row (i0, i1, i2)
 * uses position number i0·ps0 + i1·ps1 + i2·ps2. The sizes and strides come in one array:
 *     sizes = {xs0, xs1, xs2, n_positions, ps0, ps1, ps2, os0, os1, os2, n0, n1, n2, half,
 *              threads, populate}
 * The table lives on the stack for a decode step (n_positions·half ≤ ROPE_STACK_TABLE), else
 * in table_memory(). It is filled on one thread (2048 positions × 64 pairs take about 0.2 ms),
 * then the rows are shared among the threads: a second parallel loop would add a barrier,
 * which on a busy machine waits for a descheduled thread (measured at load 11 on 2 cores:
 * medians 56 ms this way, 76 ms with the table shared too, 56 ms for the rotation by a
 * ready table). Returns 0, or −1 when the table could not be allocated. */
#define ROPE_STACK_TABLE 512

/* The table of a larger call, kept per calling thread from one call to the next up to
 * ROPE_KEPT_TABLE bytes: a model calls with the same sizes on every layer, and a fresh
 * malloc of a MiB would be new pages, each faulted in on its first write (2048 positions ×
 * 64 pairs: 1 MiB, 256 faults, several percent of the rotation on a busy machine). A bigger
 * table is allocated and freed by its call. */
#define ROPE_KEPT_TABLE (4 << 20)
static _Thread_local void *kept_table;
static _Thread_local size_t kept_bytes;

static void *table_memory(size_t bytes)
{
    if (bytes > ROPE_KEPT_TABLE)
        return malloc(bytes);
    if (bytes > kept_bytes) {
        free(kept_table);
        kept_table = malloc(bytes);
        kept_bytes = kept_table ? bytes : 0;
    }
    return kept_table;
}

static void table_done(void *table, size_t bytes)
{
    if (bytes > ROPE_KEPT_TABLE)
        free(table);
}

#define POSITION_ANGLES(ANGLES)                                                             \
    ANGLES(positions ? positions[n] : n, theta, half, theta_max, cos_table + n * half,      \
           sin_table + n * half);

#define POSITION_ROW(T, C, LOAD, STORE, PAIRS)                                              \
    {                                                                                       \
        int64_t i2 = row % n2, rest = row / n2, i1 = rest % n1, i0 = rest / n1;             \
        const T *xr = x + i0 * xs0 + i1 * xs1 + i2 * xs2;                                   \
        int64_t n = i0 * ps0 + i1 * ps1 + i2 * ps2;                                         \
        const C *c = cos_table + n * half, *s = sin_table + n * half;                       \
        T *outr = out + i0 * os0 + i1 * os1 + i2 * os2;                                     \
        PAIRS(T, C, LOAD, STORE)                                                            \
    }

#define ROPE_POSITIONS(NAME, T, C, ANGLES, LOAD, STORE, PAIRS)                              \
    int NAME(const T *x, const int64_t *positions, const C *theta, T *out,                  \
             const int64_t *sizes)                                                          \
    {                                                                                       \
        int64_t xs0 = sizes[0], xs1 = sizes[1], xs2 = sizes[2], n_positions = sizes[3];     \
        int64_t ps0 = sizes[4], ps1 = sizes[5], ps2 = sizes[6], os0 = sizes[7];             \
        int64_t os1 = sizes[8], os2 = sizes[9], n0 = sizes[10], n1 = sizes[11];             \
        int64_t n2 = sizes[12], half = sizes[13], threads = sizes[14], row_bytes = sizes[15]; \
        C stack[2 * ROPE_STACK_TABLE];                                                      \
        C *table = stack;                                                                   \
        size_t table_bytes = 2 * (size_t)(n_positions * half) * sizeof(C);                  \
        if (n_positions * half > ROPE_STACK_TABLE) {                                        \
            table = table_memory(table_bytes);                                              \
            if (table == NULL)                                                              \
                return -1;                                                                  \
        }                                                                                   \
        C *cos_table = table, *sin_table = table + n_positions * half;                      \
        double theta_max = 0;                                                               \
        for (int64_t i = 0; i < half; i++)                                                  \
            theta_max = fabs((double)theta[i]) > theta_max ? fabs((double)theta[i])         \
                                                           : theta_max;                     \
        int64_t rows = n0 * n1 * n2;                                                        \
        for (int64_t n = 0; n < n_positions; n++)                                           \
            POSITION_ANGLES(ANGLES)                                                         \
        if (threads > 1) {                                                                  \
            _Pragma("omp parallel num_threads(threads)")                                   \
            {                                                                               \
                THREAD_ROWS(rows, omp_threads(), omp_thread())                              \
                if (row_bytes)                                                              \
                    populate((char *)out + row_first * row_bytes,                           \
                             (row_last - row_first) * row_bytes);                           \
                for (int64_t row = row_first; row < row_last; row++)                        \
                    POSITION_ROW(T, C, LOAD, STORE, PAIRS)                                  \
            }                                                                               \
        } else {                                                                            \
            if (row_bytes)                                                                  \
                populate(out, rows * row_bytes);                                            \
            for (int64_t row = 0; row < rows; row++)                                        \
                POSITION_ROW(T, C, LOAD, STORE, PAIRS)                                      \
        }                                                                                   \
        if (table != stack)                                                                 \
            table_done(table, table_bytes);                                                 \
        return 0;                                                                           \
    }

ROPE_POSITIONS(rope_half_positions_float32, float, float, angles_float, LOAD_PLAIN,
               STORE_PLAIN, PAIRS_HALF)
ROPE_POSITIONS(rope_half_positions_float64, double, double, angles_double, LOAD_PLAIN,
               STORE_PLAIN, PAIRS_HALF)
ROPE_POSITIONS(rope_half_positions_bfloat16, uint16_t, float, angles_float, LOAD_BF16,
               STORE_BF16, PAIRS_HALF)
ROPE_POSITIONS(rope_interleaved_positions_float32, float, float, angles_float, LOAD_PLAIN,
               STORE_PLAIN, PAIRS_INTERLEAVED)
ROPE_POSITIONS(rope_interleaved_positions_float64, double, double, angles_double, LOAD_PLAIN,
               STORE_PLAIN, PAIRS_INTERLEAVED)
ROPE_POSITIONS(rope_interleaved_positions_bfloat16, uint16_t, float, angles_float, LOAD_BF16,
               STORE_BF16, PAIRS_INTERLEAVED)
