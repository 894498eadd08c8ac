/*
 * Native FAVOR+ feature map (torch_geometric_hot.ops.feature_maps): the
 * logits of a row x (one head of one query or key, d channels) against the
 * random projection W [r, d],
 *     l_j = W_j . (s x) - |s x|^2 / 2,
 * the shift that stabilises them, and the backward pass
 *     dL/dx = s (W^T w - (s x) sum_j w_j),  w_j = dL/dphi_j phi_j,
 * each in one pass over the rows (the exp stays torch's). Rows are
 * independent: a caller may split them across threads.
 *
 * The r logits of a row are FV-wide vectors (the projection padded with
 * zero columns, the padding lanes masked); the d channels of the backward
 * pass likewise. A row's last vector may read or write past the row's end
 * (into the rows after it, processed later), except where it would pass
 * the end of the call's rows: those rows go through a scratch row. Plain
 * C11 with GCC vector extensions; compiled with the other kernels by
 * torch_geometric_hot.ops.native. Functions that allocate scratch return -1
 * when that fails, else 0.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FV_BYTES 32
#define INLINE_F static inline __attribute__((always_inline))
#define MIN_F(a, b) ((a) < (b) ? (a) : (b))
/* Vectors a register block holds (4 accumulators, their loads and one
   broadcast fit in 16 registers). */
#define MAXV 4
/* Calls F(..., NV) with NV = n (1 to MAXV) a compile-time constant. */
#define WITH_NV(n, F, ...)                                                    \
    switch (n) {                                                              \
    case 1: F(__VA_ARGS__, 1); break;                                         \
    case 2: F(__VA_ARGS__, 2); break;                                         \
    case 3: F(__VA_ARGS__, 3); break;                                         \
    default: F(__VA_ARGS__, 4); break;                                        \
    }

#define DEFINE_FAVOR(T, SUF)                                                  \
typedef T fvec_##SUF __attribute__((vector_size(FV_BYTES), aligned(sizeof(T))));\
enum { FW_##SUF = FV_BYTES / sizeof(T) };                                     \
typedef __typeof__((fvec_##SUF){0} > (fvec_##SUF){0}) fmask_##SUF;            \
                                                                              \
/* [n, cols] -> [n, ceil(cols / FW) * FW], zero padded (vecs: the vectors \
   of a row). */                                                            \
static T *padded_##SUF(const T *M, int64_t n, int64_t cols, int64_t *vecs) { \
    const int64_t nv = (cols + FW_##SUF - 1) / FW_##SUF, w = nv * FW_##SUF;   \
    T *out = calloc((size_t)(n * w + 1), sizeof(T));                          \
    if (!out) return NULL;                                                    \
    for (int64_t i = 0; i < n; ++i) memcpy(out + i * w, M + i * cols,         \
                                           sizeof(T) * cols);                 \
    *vecs = nv;                                                               \
    return out;                                                               \
}                                                                             \
                                                                              \
INLINE_F fvec_##SUF fld_##SUF(const T *p) { return *(const fvec_##SUF *)p; } \
INLINE_F void fst_##SUF(T *p, fvec_##SUF x) { *(fvec_##SUF *)p = x; }       \
                                                                              \
/* Vectors [v0, v0 + NV) of row i's logits (NV <= MAXV, a compile-time     \
   constant in every call): stored at o, their maximum folded into top     \
   (padding lanes of the row's last vector excluded). */                    \
INLINE_F void logits_block_##SUF(const T *xi, const T *w, int64_t d,         \
                                 int64_t nv, int64_t v0, T s, T sq, T *o,     \
                                 fvec_##SUF pad, fvec_##SUF *top,             \
                                 const int NV) {                              \
    fvec_##SUF acc[MAXV];                                                     \
    for (int v = 0; v < NV; ++v) acc[v] = (fvec_##SUF){0} - sq / 2;          \
    for (int64_t k = 0; k < d; ++k) {                                         \
        const T xk = s * xi[k];                                               \
        for (int v = 0; v < NV; ++v)                                          \
            acc[v] += xk * fld_##SUF(w + (k * nv + v0 + v) * FW_##SUF);       \
    }                                                                         \
    for (int v = 0; v < NV; ++v) {                                            \
        const fvec_##SUF a = v0 + v + 1 == nv ? acc[v] + pad : acc[v];       \
        const fmask_##SUF more = a > *top;                                    \
        *top = (fvec_##SUF)(((fmask_##SUF)a & more) |                         \
                            ((fmask_##SUF)*top & ~more));                     \
        fst_##SUF(o + (v0 + v) * FW_##SUF, acc[v]);                           \
    }                                                                         \
}                                                                             \
                                                                              \
/* out[i] = l (then, with shift_rows, l - max_j l_j + log_scale) and         \
   row_max[i] = max_j l_j for rows [0, rows), from W transposed: Wt [d, r]. */\
int favor_logits_##SUF(const T *x, const T *Wt, T *out, T *row_max,           \
                       int64_t rows, int64_t d, int64_t r, int64_t shift_rows,\
                       T s, T log_scale) {                                    \
    int64_t nv = 0;                                                           \
    fvec_##SUF pad; /* of the last vector: 0 on real lanes, -inf past r */   \
    T *w = padded_##SUF(Wt, d, r, &nv);                                       \
    T *last = malloc(sizeof(T) * (nv + 1) * FW_##SUF);                        \
    if (!w || !last) { free(w); free(last); return -1; }                      \
    for (int j = 0; j < FW_##SUF; ++j)                                        \
        pad[j] = (nv - 1) * FW_##SUF + j < r ? 0 : -(T)INFINITY;              \
    for (int64_t i = 0; i < rows; ++i) {                                      \
        const T *xi = x + i * d;                                              \
        T sq = 0;                                                             \
        for (int64_t k = 0; k < d; ++k) sq += (s * xi[k]) * (s * xi[k]);      \
        T *o = (i * r + nv * FW_##SUF <= rows * r) ? out + i * r : last;      \
        fvec_##SUF top = (fvec_##SUF){0} - (T)INFINITY;                       \
        for (int64_t v0 = 0; v0 < nv; v0 += MAXV) {                           \
            WITH_NV(MIN_F(nv - v0, MAXV), logits_block_##SUF, xi, w, d, nv,  \
                    v0, s, sq, o, pad, &top)                                  \
        }                                                                     \
        T m = top[0];                                                         \
        for (int j = 1; j < FW_##SUF; ++j) m = top[j] > m ? top[j] : m;       \
        row_max[i] = m;                                                       \
        if (shift_rows)                                                       \
            for (int64_t j = 0; j < r; ++j) o[j] += log_scale - m;            \
        if (o == last) memcpy(out + i * r, last, sizeof(T) * r);              \
    }                                                                         \
    free(w); free(last);                                                      \
    return 0;                                                                 \
}                                                                             \
                                                                              \
/* out[i, :] += shift[i] for rows [0, rows). */                              \
void favor_shift_##SUF(T *out, const T *shift, int64_t rows, int64_t r) {    \
    for (int64_t i = 0; i < rows; ++i) {                                      \
        const T c = shift[i];                                                 \
        T *o = out + i * r;                                                   \
        for (int64_t j = 0; j < r; ++j) o[j] += c;                            \
    }                                                                         \
}                                                                             \
                                                                              \
/* Vectors [v0, v0 + NV) of row i's input gradient (NV <= MAXV, a         \
   compile-time constant in every call), stored at o. */                    \
INLINE_F void backward_block_##SUF(const T *p, const T *g, const T *xi,      \
                                   const T *w, int64_t r, int64_t nv,         \
                                   int64_t v0, T s, T total, T *o,            \
                                   const int NV) {                            \
    fvec_##SUF acc[MAXV];                                                     \
    for (int v = 0; v < NV; ++v) acc[v] = (fvec_##SUF){0};                   \
    for (int64_t j = 0; j < r; ++j) {                                         \
        const T wj = g[j] * p[j];                                             \
        for (int v = 0; v < NV; ++v)                                          \
            acc[v] += wj * fld_##SUF(w + (j * nv + v0 + v) * FW_##SUF);       \
    }                                                                         \
    for (int v = 0; v < NV; ++v) {                                            \
        const fvec_##SUF xs = fld_##SUF(xi + (v0 + v) * FW_##SUF);            \
        fst_##SUF(o + (v0 + v) * FW_##SUF, s * (acc[v] - (s * total) * xs));  \
    }                                                                         \
}                                                                             \
                                                                              \
/* grad_x[i] = s (W^T w - (s x_i) sum_j w_j), w = grad[i] * phi[i], from W   \
   [r, d]. */                                                                 \
int favor_backward_##SUF(const T *x, const T *W, const T *phi,                \
                         const T *grad, T *grad_x, int64_t rows, int64_t d,   \
                         int64_t r, T s) {                                    \
    int64_t nv = 0;                                                           \
    T *w = padded_##SUF(W, r, d, &nv); /* padding lanes land past the row */  \
    T *last = malloc(sizeof(T) * 2 * nv * FW_##SUF);                          \
    if (!w || !last) { free(w); free(last); return -1; }                      \
    for (int64_t i = 0; i < rows; ++i) {                                      \
        const T *p = phi + i * r, *g = grad + i * r, *xi = x + i * d;         \
        T *o = grad_x + i * d;                                                \
        if (i * d + nv * FW_##SUF > rows * d) { /* past the call's rows */  \
            memcpy(last + nv * FW_##SUF, xi, sizeof(T) * d);                  \
            xi = last + nv * FW_##SUF;                                        \
            o = last;                                                         \
        }                                                                     \
        T total = 0;                                                          \
        for (int64_t j = 0; j < r; ++j) total += g[j] * p[j];                 \
        for (int64_t v0 = 0; v0 < nv; v0 += MAXV) {                           \
            WITH_NV(MIN_F(nv - v0, MAXV), backward_block_##SUF, p, g, xi, w, \
                    r, nv, v0, s, total, o)                                   \
        }                                                                     \
        if (o == last) memcpy(grad_x + i * d, last, sizeof(T) * d);           \
    }                                                                         \
    free(w); free(last);                                                      \
    return 0;                                                                 \
}

DEFINE_FAVOR(float, f32)
DEFINE_FAVOR(double, f64)
