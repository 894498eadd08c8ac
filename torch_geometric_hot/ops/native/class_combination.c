/*
 * Kernel attention's class combination for one output part, fused: every
 * class's numerator and denominator are signed sums of terms,
 *
 *   reading term   (kind 0): num += s R[row, h, off : off + D],
 *                            den += s R[row, h, den_col]
 *   single-key term (kind 1): num += s dot[row, h] V_c[pos[row], h, :],
 *                            den += s dot[row, h]
 *
 * and out[row, c, h, :] = num / max(den, eps) where the class's group is
 * not empty (else 0). Terms are listed class by class: class c owns terms
 * start[c] .. start[c + 1] - 1; src[t] indexes the readings (kind 0) or the
 * single-key (dot, position) pairs (kind 1). Class c's values (and their
 * gradients) are [P, H, D] blocks ldv apart from row to row. Plain C11; see
 * torch_geometric_hot.ops.native. Single-threaded.
 */
#include <stdint.h>

/* The parameters both functions share: shapes, the term tables, the
   sources of the terms, the classes' non-empty flags and eps. */
#define COMBINE_PARAMS(T)                                                     \
    int64_t rows, int64_t H, int64_t D, int64_t nc, int64_t ldv,              \
    const int64_t *start, const int64_t *kind, const int64_t *sign,           \
    const int64_t *src, const int64_t *off, T *const *reading,                \
    const int64_t *width, T *const *dot, int64_t *const *position,            \
    T *const *value, const uint8_t *nonempty, T eps

#define DEFINE_COMBINE(T, SUF)                                                \
void combine_##SUF(COMBINE_PARAMS(T), T *out, T *den_out) {                   \
    const int64_t HD = H * D;                                                 \
    T num[HD], den[H];                                                        \
    for (int64_t row = 0; row < rows; ++row)                                  \
        for (int64_t c = 0; c < nc; ++c) {                                    \
            T *o = out + (row * nc + c) * HD, *dn = den_out + (row * nc + c) * H;\
            for (int64_t j = 0; j < HD; ++j) num[j] = 0;                      \
            for (int64_t h = 0; h < H; ++h) den[h] = 0;                       \
            for (int64_t t = start[c]; t < start[c + 1]; ++t) {               \
                const T s = (T)sign[t];                                       \
                if (kind[t] == 0) {                                           \
                    const int64_t w = width[src[t]];                          \
                    const T *r = reading[src[t]] + row * H * w;               \
                    for (int64_t h = 0; h < H; ++h) {                         \
                        const T *rh = r + h * w + off[t];                     \
                        T *nh = num + h * D;                                  \
                        _Pragma("omp simd")                                   \
                        for (int64_t i = 0; i < D; ++i) nh[i] += s * rh[i];   \
                        den[h] += s * r[h * w + w - 1];                       \
                    }                                                         \
                } else {                                                      \
                    const T *d = dot[src[t]] + row * H;                       \
                    const T *v = value[c] + position[src[t]][row] * ldv;      \
                    for (int64_t h = 0; h < H; ++h) {                         \
                        const T sd = s * d[h];                                \
                        const T *vh = v + h * D;                              \
                        T *nh = num + h * D;                                  \
                        _Pragma("omp simd")                                   \
                        for (int64_t i = 0; i < D; ++i) nh[i] += sd * vh[i];  \
                        den[h] += s * d[h];                                   \
                    }                                                         \
                }                                                             \
            }                                                                 \
            const int keep = nonempty[row * nc + c];                          \
            for (int64_t h = 0; h < H; ++h) {                                 \
                const T clamped = den[h] > eps ? den[h] : eps;                \
                dn[h] = den[h];                                               \
                for (int64_t i = 0; i < D; ++i)                               \
                    o[h * D + i] = keep ? num[h * D + i] / clamped : 0;       \
            }                                                                 \
        }                                                                     \
}                                                                             \
                                                                              \
/* Backward: accumulates into grad_reading (per reading, [rows, H, width]),  \
   grad_dot (per single-key source, [rows, H]) and grad_value (per class,    \
   [P, H, D] blocks ldv apart), all zero-filled by the caller; NULL entries \
   are skipped. */                                                          \
void combine_backward_##SUF(COMBINE_PARAMS(T), const T *out,                 \
                            const T *den_out, const T *grad_out,              \
                            T *const *grad_reading, T *const *grad_dot,       \
                            T *const *grad_value) {                           \
    (void)reading;                                                            \
    const int64_t HD = H * D;                                                 \
    T g_num[HD], g_den[H];                                                    \
    for (int64_t row = 0; row < rows; ++row)                                  \
        for (int64_t c = 0; c < nc; ++c) {                                    \
            if (!nonempty[row * nc + c]) continue;                            \
            const int64_t k = (row * nc + c) * H;                             \
            for (int64_t h = 0; h < H; ++h) {                                 \
                const T den = den_out[k + h];                                 \
                const T clamped = den > eps ? den : eps;                      \
                const T *g = grad_out + (k + h) * D, *o = out + (k + h) * D;  \
                T acc = 0;                                                    \
                for (int64_t i = 0; i < D; ++i) {                             \
                    g_num[h * D + i] = g[i] / clamped;                        \
                    acc -= g_num[h * D + i] * o[i];                           \
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
                        const T *nh = g_num + h * D;                          \
                        _Pragma("omp simd")                                   \
                        for (int64_t i = 0; i < D; ++i) gh[i] += s * nh[i];   \
                        gr[h * w + w - 1] += s * g_den[h];                    \
                    }                                                         \
                } else {                                                      \
                    const int64_t p = position[src[t]][row];                  \
                    const T *d = dot[src[t]] + row * H;                       \
                    const T *v = value[c] + p * ldv;                          \
                    T *gd = grad_dot[src[t]], *gv = grad_value[c];            \
                    for (int64_t h = 0; h < H; ++h) {                         \
                        const T *nh = g_num + h * D, *vh = v + h * D;         \
                        if (gd) {                                             \
                            T acc = g_den[h];                                 \
                            _Pragma("omp simd reduction(+:acc)")              \
                            for (int64_t i = 0; i < D; ++i)                   \
                                acc += nh[i] * vh[i];                         \
                            gd[row * H + h] += s * acc;                       \
                        }                                                     \
                        if (gv) {                                             \
                            T *gvh = gv + p * ldv + h * D;                    \
                            const T sd = s * d[h];                            \
                            _Pragma("omp simd")                               \
                            for (int64_t i = 0; i < D; ++i)                   \
                                gvh[i] += sd * nh[i];                         \
                        }                                                     \
                    }                                                         \
                }                                                             \
            }                                                                 \
        }                                                                     \
}

DEFINE_COMBINE(float, f32)
DEFINE_COMBINE(double, f64)
