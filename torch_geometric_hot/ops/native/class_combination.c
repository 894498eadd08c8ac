/*
 * Kernel attention's class combination for one output part, fused: every
 * class's numerator and denominator are signed sums of terms,
 *
 *   reading term   (kind 0): num += s R[row, h, off : off + D],
 *                            den += s R[row, h, den_col]
 *   single-key term (kind 1): num += s d[row, h] V_c[pos[row], h, :],
 *                            den += s d[row, h],
 *                            d[row, h] = q[row, h, :] . k[pos[row], h, :]
 *
 * and out[row, c, h, :] = num / max(den, eps) where the class's group is
 * not empty (else 0). A single-key source whose position is negative (a
 * key that does not exist) adds nothing. Terms are listed class by class:
 * class c owns terms start[c] .. start[c + 1] - 1; src[t] indexes the
 * readings (kind 0) or the single-key sources (kind 1), whose dots are
 * computed once per row. q is [rows, H, R], k [P, H, R]; class c's values
 * (and their gradients) are [P, H, D] blocks ldv apart from row to row.
 * Plain C11; see torch_geometric_hot.ops.native. A call is single-threaded;
 * the caller splits the rows across threads (rows are independent), and
 * gives each backward call past the first key and value gradients of its
 * own (rows share key and value rows, which the backward pass adds to).
 */
#include <stdint.h>

#define INLINE static inline __attribute__((always_inline))

/* The parameters both functions share: shapes, the term tables, the
   sources of the terms, the classes' non-empty flags and eps. */
#define COMBINE_PARAMS(T)                                                     \
    int64_t rows, int64_t H, int64_t D, int64_t R, int64_t nc, int64_t ldv,   \
    int64_t nk, const int64_t *start, const int64_t *kind,                    \
    const int64_t *sign, const int64_t *src, const int64_t *off,              \
    T *const *reading, const int64_t *width, const T *q, const T *k,          \
    int64_t *const *position, T *const *value, const uint8_t *nonempty, T eps

#define COMBINE_ARGS                                                          \
    rows, H, D, R, nc, ldv, nk, start, kind, sign, src, off, reading, width,  \
    q, k, position, value, nonempty, eps

/* Calls F(COMBINE_ARGS, ..., d) with d a compile-time constant for the
   usual head sizes. */
#define DISPATCH_D(F, ...)                                                    \
    switch (D) {                                                              \
    case 4: F(COMBINE_ARGS, __VA_ARGS__, 4); break;                           \
    case 8: F(COMBINE_ARGS, __VA_ARGS__, 8); break;                           \
    case 16: F(COMBINE_ARGS, __VA_ARGS__, 16); break;                         \
    default: F(COMBINE_ARGS, __VA_ARGS__, D); break;                          \
    }

/* Rows ahead whose keys and value rows (and, backward, their gradient
   rows) are prefetched: they are gathered at random positions, and the
   loads would otherwise wait on memory. */
#define PREFETCH_ROWS 4
#define LINE 64

#define DEFINE_COMBINE(T, SUF)                                                \
/* Asks for the key rows that row `row` dots its query with (and, when        \
   grad_k is not NULL, their gradient rows, which it adds to). */             \
INLINE void prefetch_keys_##SUF(int64_t row, int64_t rows, int64_t nk,        \
                                int64_t *const *position, const T *k,         \
                                T *grad_k, int64_t key_size) {                \
    if (row >= rows) return;                                                  \
    for (int64_t s = 0; s < nk; ++s) {                                        \
        const int64_t p = position[s][row];                                   \
        if (p < 0) continue;                                                  \
        for (int64_t b = 0; b < key_size * (int64_t)sizeof(T); b += LINE) {   \
            __builtin_prefetch((const char *)(k + p * key_size) + b);         \
            if (grad_k)                                                       \
                __builtin_prefetch((char *)(grad_k + p * key_size) + b, 1);   \
        }                                                                     \
    }                                                                         \
}                                                                             \
                                                                              \
/* Asks for the value rows that the single-key terms of class c of row `row` \
   read (and, when grad_value is not NULL, the gradient rows they add to).   \
   Called class by class: the lines of all classes at once would hold up    \
   the core until most of them had arrived. */                               \
INLINE void prefetch_values_##SUF(int64_t row, int64_t rows, int64_t c,       \
                                  const int64_t *start, const int64_t *kind,  \
                                  const int64_t *src,                         \
                                  int64_t *const *position,                   \
                                  T *const *value, T *const *grad_value,      \
                                  int64_t ldv, int64_t vsize) {               \
    if (row >= rows) return;                                                  \
    for (int64_t t = start[c]; t < start[c + 1]; ++t) {                       \
        if (kind[t] == 0) continue;                                           \
        const int64_t p = position[src[t]][row];                              \
        if (p < 0) continue;                                                  \
        for (int64_t b = 0; b < vsize * (int64_t)sizeof(T); b += LINE) {      \
            __builtin_prefetch((const char *)(value[c] + p * ldv) + b);       \
            if (grad_value && grad_value[c])                                  \
                __builtin_prefetch((char *)(grad_value[c] + p * ldv) + b, 1); \
        }                                                                     \
    }                                                                         \
}                                                                             \
                                                                              \
/* dots[s, h] of the row's single-key sources (0 for missing keys) */         \
INLINE void row_dots_##SUF(const T *q, const T *k, int64_t *const *position,  \
                           int64_t nk, int64_t H, int64_t R, int64_t row,     \
                           T *dots) {                                         \
    for (int64_t s = 0; s < nk; ++s) {                                        \
        const int64_t p = position[s][row];                                   \
        for (int64_t h = 0; h < H; ++h) {                                     \
            T acc = 0;                                                        \
            if (p >= 0) {                                                     \
                const T *a = q + (row * H + h) * R, *b = k + (p * H + h) * R; \
                _Pragma("omp simd reduction(+:acc)")                          \
                for (int64_t r = 0; r < R; ++r) acc += a[r] * b[r];           \
            }                                                                 \
            dots[s * H + h] = acc;                                            \
        }                                                                     \
    }                                                                         \
}                                                                             \
                                                                              \
INLINE void combine_body_##SUF(COMBINE_PARAMS(T), T *out, T *den_out,         \
                               const int64_t Dc) {                            \
    T num[H * Dc], den[H], dots[nk * H + 1];                                  \
    for (int64_t row = 0; row < rows; ++row) {                                \
        prefetch_keys_##SUF(row + PREFETCH_ROWS, rows, nk, position, k,       \
                            (T *)0, H * R);                                   \
        row_dots_##SUF(q, k, position, nk, H, R, row, dots);                  \
        for (int64_t c = 0; c < nc; ++c) {                                    \
            prefetch_values_##SUF(row + PREFETCH_ROWS, rows, c, start, kind,  \
                                  src, position, value, (T *const *)0, ldv,   \
                                  H * Dc);                                    \
            T *o = out + (row * nc + c) * H * Dc;                             \
            T *dn = den_out + (row * nc + c) * H;                             \
            for (int64_t j = 0; j < H * Dc; ++j) num[j] = 0;                  \
            for (int64_t h = 0; h < H; ++h) den[h] = 0;                       \
            for (int64_t t = start[c]; t < start[c + 1]; ++t) {               \
                const T s = (T)sign[t];                                       \
                if (kind[t] == 0) {                                           \
                    const int64_t w = width[src[t]];                          \
                    const T *r = reading[src[t]] + row * H * w;               \
                    for (int64_t h = 0; h < H; ++h) {                         \
                        const T *rh = r + h * w + off[t];                     \
                        T *nh = num + h * Dc;                                 \
                        _Pragma("omp simd")                                   \
                        for (int64_t i = 0; i < Dc; ++i) nh[i] += s * rh[i];  \
                        den[h] += s * r[h * w + w - 1];                       \
                    }                                                         \
                    continue;                                                 \
                }                                                             \
                const int64_t p = position[src[t]][row];                      \
                if (p < 0) continue;                                          \
                const T *d = dots + src[t] * H, *v = value[c] + p * ldv;      \
                for (int64_t h = 0; h < H; ++h) {                             \
                    const T sd = s * d[h], *vh = v + h * Dc;                  \
                    T *nh = num + h * Dc;                                     \
                    _Pragma("omp simd")                                       \
                    for (int64_t i = 0; i < Dc; ++i) nh[i] += sd * vh[i];     \
                    den[h] += sd;                                             \
                }                                                             \
            }                                                                 \
            const int keep = nonempty[row * nc + c];                          \
            for (int64_t h = 0; h < H; ++h) {                                 \
                const T inv = keep ? 1 / (den[h] > eps ? den[h] : eps) : 0;   \
                dn[h] = den[h];                                               \
                _Pragma("omp simd")                                           \
                for (int64_t i = 0; i < Dc; ++i)                              \
                    o[h * Dc + i] = num[h * Dc + i] * inv;                    \
            }                                                                 \
        }                                                                     \
    }                                                                         \
}                                                                             \
                                                                              \
void combine_##SUF(COMBINE_PARAMS(T), T *out, T *den_out) {                   \
    DISPATCH_D(combine_body_##SUF, out, den_out)                              \
}                                                                             \
                                                                              \
INLINE void combine_backward_body_##SUF(COMBINE_PARAMS(T), const T *out,     \
                                        const T *den_out, const T *grad_out, \
                                        T *const *grad_reading, T *grad_q,    \
                                        T *grad_k, T *const *grad_value,      \
                                        const int64_t Dc) {                   \
    T g_num[H * Dc], g_den[H], dots[nk * H + 1], g_dots[nk * H + 1];          \
    for (int64_t row = 0; row < rows; ++row) {                                \
        prefetch_keys_##SUF(row + PREFETCH_ROWS, rows, nk, position, k,       \
                            grad_k, H * R);                                   \
        row_dots_##SUF(q, k, position, nk, H, R, row, dots);                  \
        for (int64_t j = 0; j < nk * H; ++j) g_dots[j] = 0;                   \
        for (int64_t c = 0; c < nc; ++c) {                                    \
            prefetch_values_##SUF(row + PREFETCH_ROWS, rows, c, start, kind,  \
                                  src, position, value, grad_value, ldv,      \
                                  H * Dc);                                    \
            if (!nonempty[row * nc + c]) continue;                            \
            const int64_t base = (row * nc + c) * H;                          \
            for (int64_t h = 0; h < H; ++h) {                                 \
                const T den = den_out[base + h];                              \
                const T inv = 1 / (den > eps ? den : eps);                    \
                const T *g = grad_out + (base + h) * Dc;                      \
                const T *o = out + (base + h) * Dc;                           \
                T acc = 0;                                                    \
                _Pragma("omp simd reduction(+:acc)")                          \
                for (int64_t i = 0; i < Dc; ++i) {                            \
                    g_num[h * Dc + i] = g[i] * inv;                           \
                    acc -= g[i] * inv * o[i];                                 \
                }                                                             \
                g_den[h] = den >= eps ? acc : 0;                              \
            }                                                                 \
            for (int64_t t = start[c]; t < start[c + 1]; ++t) {               \
                const T s = (T)sign[t];                                       \
                if (kind[t] == 0) {                                           \
                    T *gr = grad_reading[src[t]];                             \
                    if (!gr) continue;                                        \
                    const int64_t w = width[src[t]];                          \
                    gr += row * H * w;                                        \
                    for (int64_t h = 0; h < H; ++h) {                         \
                        T *gh = gr + h * w + off[t];                          \
                        const T *nh = g_num + h * Dc;                         \
                        _Pragma("omp simd")                                   \
                        for (int64_t i = 0; i < Dc; ++i) gh[i] += s * nh[i];  \
                        gr[h * w + w - 1] += s * g_den[h];                    \
                    }                                                         \
                    continue;                                                 \
                }                                                             \
                const int64_t p = position[src[t]][row];                      \
                if (p < 0) continue;                                          \
                const T *d = dots + src[t] * H, *v = value[c] + p * ldv;      \
                T *gd = g_dots + src[t] * H, *gv = grad_value[c];             \
                for (int64_t h = 0; h < H; ++h) {                             \
                    const T *nh = g_num + h * Dc, *vh = v + h * Dc;           \
                    T acc = g_den[h];                                         \
                    _Pragma("omp simd reduction(+:acc)")                      \
                    for (int64_t i = 0; i < Dc; ++i) acc += nh[i] * vh[i];    \
                    gd[h] += s * acc;                                         \
                    if (gv) {                                                 \
                        T *gvh = gv + p * ldv + h * Dc;                       \
                        const T sd = s * d[h];                                \
                        _Pragma("omp simd")                                   \
                        for (int64_t i = 0; i < Dc; ++i) gvh[i] += sd * nh[i];\
                    }                                                         \
                }                                                             \
            }                                                                 \
        }                                                                     \
        /* the dots' gradients: q's row is written, k's rows added to */      \
        T *gq = grad_q ? grad_q + row * H * R : (T *)0;                       \
        if (gq)                                                               \
            for (int64_t j = 0; j < H * R; ++j) gq[j] = 0;                    \
        for (int64_t s = 0; s < nk; ++s) {                                    \
            const int64_t p = position[s][row];                               \
            if (p < 0) continue;                                              \
            for (int64_t h = 0; h < H; ++h) {                                 \
                const T gd = g_dots[s * H + h];                               \
                const int64_t a = (row * H + h) * R, b = (p * H + h) * R;     \
                if (gq) {                                                     \
                    _Pragma("omp simd")                                       \
                    for (int64_t r = 0; r < R; ++r) gq[h * R + r] += gd * k[b + r];\
                }                                                             \
                if (grad_k) {                                                 \
                    _Pragma("omp simd")                                       \
                    for (int64_t r = 0; r < R; ++r) grad_k[b + r] += gd * q[a + r];\
                }                                                             \
            }                                                                 \
        }                                                                     \
    }                                                                         \
}                                                                             \
                                                                              \
/* Backward: accumulates into grad_reading (per reading, [rows, H, width]),  \
   grad_k ([P, H, R]) and grad_value (per class, [P, H, D] blocks ldv       \
   apart), all zero-filled by the caller, and writes grad_q ([rows, H, R]); \
   NULL ones are skipped. */                                                \
void combine_backward_##SUF(COMBINE_PARAMS(T), const T *out,                 \
                            const T *den_out, const T *grad_out,              \
                            T *const *grad_reading, T *grad_q, T *grad_k,     \
                            T *const *grad_value) {                           \
    DISPATCH_D(combine_backward_body_##SUF, out, den_out, grad_out,           \
               grad_reading, grad_q, grad_k, grad_value)                      \
}

DEFINE_COMBINE(float, f32)
DEFINE_COMBINE(double, f64)
