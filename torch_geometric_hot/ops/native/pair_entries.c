/*
 * The entry-wise halves of the light 2->2 linear layer
 * (torch_geometric_hot.ops.pair_light_linear), each one pass over the
 * entries of a pair view; the matrix products around them stay torch's.
 *
 *   pair_gather:  out[e] = N[i, 0:C]                         (e = (i, i))
 *                 out[e] = Y[e, 0:C] + Y[t(e), C:2C]
 *                          + N[i, C:2C] + N[j, 2C:3C]        (e = (i, j))
 *   pair_scatter: its adjoint, G[e] = [g[e], g[t(e)]] (zero on the
 *                 diagonal) and the per-node sums
 *                 S[i] += [g[(i, i)], sum_j g[(i, j)], sum_j g[(j, i)]]
 *
 * with Y [entries, 2C], N [nodes, 3C], g [entries, C], G [entries, 2C],
 * S [nodes, 3C] (zero-filled by the caller), row/col the entries' nodes
 * and t(e) the position of the transposed entry (j, i), negative when it
 * is absent (its term is then zero); a call visits entries start..stop-1
 * (all arrays are whole: transposes point anywhere). Entries of
 * pair_gather are independent (a caller may split them across threads);
 * pair_scatter adds to shared node rows (a caller that splits it gives
 * each part node sums S of its own). Plain C11, compiled with the other
 * kernels by torch_geometric_hot.ops.native.
 */
#include <stdint.h>

/* Entries ahead whose transposed rows are asked for (the transposes of
   entries sorted by (row, col) lie all over the tensor). */
#define PAIR_AHEAD 8

#define DEFINE_PAIR(T, SUF)                                                   \
void pair_gather_##SUF(const T *Y, const T *N, const int64_t *row,            \
                       const int64_t *col, const int64_t *transpose, T *out,  \
                       int64_t start, int64_t stop, int64_t C) {              \
    for (int64_t e = start; e < stop; ++e) {                                  \
        if (e + PAIR_AHEAD < stop && transpose[e + PAIR_AHEAD] >= 0)          \
            __builtin_prefetch(Y + transpose[e + PAIR_AHEAD] * 2 * C + C);    \
        const int64_t i = row[e], j = col[e], t = transpose[e];               \
        T *o = out + e * C;                                                   \
        if (i == j) {                                                         \
            const T *d = N + i * 3 * C;                                       \
            _Pragma("omp simd")                                               \
            for (int64_t c = 0; c < C; ++c) o[c] = d[c];                      \
            continue;                                                         \
        }                                                                     \
        const T *y = Y + e * 2 * C, *a = N + i * 3 * C + C,                   \
                *b = N + j * 3 * C + 2 * C;                                   \
        if (t >= 0) {                                                         \
            const T *yt = Y + t * 2 * C + C;                                  \
            _Pragma("omp simd")                                               \
            for (int64_t c = 0; c < C; ++c)                                   \
                o[c] = y[c] + yt[c] + a[c] + b[c];                            \
        } else {                                                              \
            _Pragma("omp simd")                                               \
            for (int64_t c = 0; c < C; ++c) o[c] = y[c] + a[c] + b[c];        \
        }                                                                     \
    }                                                                         \
}                                                                             \
                                                                              \
void pair_scatter_##SUF(const T *g, const int64_t *row, const int64_t *col,   \
                        const int64_t *transpose, T *G, T *S,                 \
                        int64_t start, int64_t stop, int64_t C) {             \
    for (int64_t e = start; e < stop; ++e) {                                  \
        if (e + PAIR_AHEAD < stop && transpose[e + PAIR_AHEAD] >= 0)          \
            __builtin_prefetch(g + transpose[e + PAIR_AHEAD] * C);            \
        const int64_t i = row[e], j = col[e], t = transpose[e];               \
        const T *ge = g + e * C;                                              \
        T *o = G + e * 2 * C;                                                 \
        if (i == j) {                                                         \
            T *d = S + i * 3 * C;                                             \
            _Pragma("omp simd")                                               \
            for (int64_t c = 0; c < C; ++c) {                                 \
                d[c] += ge[c];                                                \
                o[c] = 0;                                                     \
                o[C + c] = 0;                                                 \
            }                                                                 \
            continue;                                                         \
        }                                                                     \
        const T *gt = t >= 0 ? g + t * C : (const T *)0;                      \
        T *a = S + i * 3 * C + C, *b = S + j * 3 * C + 2 * C;                 \
        _Pragma("omp simd")                                                   \
        for (int64_t c = 0; c < C; ++c) {                                     \
            o[c] = ge[c];                                                     \
            o[C + c] = gt ? gt[c] : 0;                                        \
            a[c] += ge[c];                                                    \
            b[c] += ge[c];                                                    \
        }                                                                     \
    }                                                                         \
}

DEFINE_PAIR(float, f32)
DEFINE_PAIR(double, f64)
