/*
 * Native kernels of kernel (linear) attention: per-group outer-product
 * sums S_g = sum_{e : g(e) = g} k_e v_e^T and their readings
 * o_e = q_e^T S_{g(e)}, forward and backward, per head.
 *
 * Layouts (all contiguous, row-major): rows [E, H, R] or [E, H, C],
 * summaries [G, H, R, C]. Rows are visited in `order`, a permutation that
 * sorts `index` (the group of every row), so the rows of one group form a
 * run and the group's [R, C] block stays in cache while the run is
 * processed. Outputs are written, never read, except the summaries, which
 * are accumulated into (the caller zero-fills them).
 *
 * Everything reduces to two register-tiled loops over a run:
 *   contract: out[t, :N] = sum_k a[t, k] M[k, :N]   (reading a block)
 *   outer:    M[k, :N]  += sum_t a[t, k] b[t, :N]   (accumulating a block)
 * Each tile keeps TILE_ROWS x TILE_VECS vector accumulators in registers
 * (independent FMA chains; every loaded vector feeds TILE_ROWS of them).
 * Columns past the last full vector (C = 8 * classes + 1 always has one)
 * are dot products over k instead.
 *
 * Plain C11 with GCC vector extensions (VEC_BYTES-wide vectors, lowered to
 * whatever the target has); compiled at first use by
 * torch_geometric_hot.ops.native. Single-threaded.
 */
#include <stdint.h>
#include <stdlib.h>

#define VEC_BYTES 32
/* Rows accumulated in registers before a summary block is updated. */
#define RUN_CHUNK 64
/* Register tile: rows x vectors of accumulators (12 of 16 registers). */
#define TILE_ROWS 4
#define TILE_VECS 3
#define INLINE static inline __attribute__((always_inline))
#define MIN(a, b) ((a) < (b) ? (a) : (b))

/* Calls TILE(rows, vecs) with compile-time constants for mr x nv. */
#define DISPATCH_TILE(TILE, mr, nv)                                           \
    switch ((mr) * 4 + (nv)) {                                                \
    case 5: TILE(1, 1); break;  case 6: TILE(1, 2); break;                    \
    case 7: TILE(1, 3); break;  case 9: TILE(2, 1); break;                    \
    case 10: TILE(2, 2); break; case 11: TILE(2, 3); break;                   \
    case 13: TILE(3, 1); break; case 14: TILE(3, 2); break;                   \
    case 15: TILE(3, 3); break; case 17: TILE(4, 1); break;                   \
    case 18: TILE(4, 2); break; default: TILE(4, 3); break;                   \
    }

/* Runs `...` for every run of rows of one group (g: the group, order + t:
   its n rows) and every head h. */
#define FOR_EACH_RUN_AND_HEAD(...)                                            \
    for (int64_t t = 0, n; t < E; t += n) {                                   \
        const int64_t g = index[order[t]];                                    \
        for (n = 1; t + n < E && index[order[t + n]] == g; ++n) {}            \
        for (int64_t h = 0; h < H; ++h) { __VA_ARGS__ }                       \
    }

#define DEFINE_KERNELS(T, SUF)                                                \
typedef T vec_##SUF __attribute__((vector_size(VEC_BYTES), aligned(sizeof(T))));\
enum { W_##SUF = VEC_BYTES / sizeof(T) };                                     \
                                                                              \
INLINE vec_##SUF ld_##SUF(const T *p) { return *(const vec_##SUF *)p; }       \
INLINE void st_##SUF(T *p, vec_##SUF x) { *(vec_##SUF *)p = x; }              \
                                                                              \
/* o[m][c + v W ..] = sum_k a[m][k] M[k, c + v W ..], m < MR, v < NV */       \
INLINE void contract_tile_##SUF(const T *const *a, const T *M, int64_t ldm,   \
                                int64_t K, T *const *o, int64_t c,            \
                                const int MR, const int NV) {                 \
    vec_##SUF acc[TILE_ROWS][TILE_VECS] = {{{0}}};                            \
    for (int64_t k = 0; k < K; ++k) {                                         \
        vec_##SUF y[TILE_VECS];                                               \
        for (int v = 0; v < NV; ++v) y[v] = ld_##SUF(M + k * ldm + c + v * W_##SUF);\
        for (int m = 0; m < MR; ++m) {                                        \
            const T w = a[m][k];                                              \
            for (int v = 0; v < NV; ++v) acc[m][v] += w * y[v];               \
        }                                                                     \
    }                                                                         \
    for (int m = 0; m < MR; ++m)                                              \
        for (int v = 0; v < NV; ++v) st_##SUF(o[m] + c + v * W_##SUF, acc[m][v]);\
}                                                                             \
                                                                              \
/* out[rows[t]][:N] = sum_k a[rows[t]][k] M[k, :N] */                         \
static void contract_run_##SUF(const T *a, int64_t lda, const T *M,           \
                               int64_t K, int64_t N, T *out, int64_t ldo,     \
                               const int64_t *rows, int64_t n) {              \
    const int64_t W = W_##SUF, full = N - N % W;                              \
    T tail[(N - full) * K + 1]; /* tail columns of M, transposed */           \
    for (int64_t c = full; c < N; ++c)                                        \
        for (int64_t k = 0; k < K; ++k) tail[(c - full) * K + k] = M[k * N + c];\
    for (int64_t t = 0; t < n; t += TILE_ROWS) {                              \
        const int mr = (int)MIN(TILE_ROWS, n - t);                            \
        const T *ar[TILE_ROWS];                                               \
        T *orow[TILE_ROWS];                                                   \
        for (int m = 0; m < mr; ++m) {                                        \
            ar[m] = a + rows[t + m] * lda;                                     \
            orow[m] = out + rows[t + m] * ldo;                                \
        }                                                                     \
        for (int64_t c = 0; c < full; c += TILE_VECS * W) {                   \
            const int nv = (int)MIN(TILE_VECS, (full - c) / W);               \
            _Pragma("GCC diagnostic push")                                    \
            _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")       \
            DISPATCH_TILE(CONTRACT_TILE_##SUF, mr, nv)                        \
            _Pragma("GCC diagnostic pop")                                     \
        }                                                                     \
        for (int64_t c = full; c < N; ++c)                                    \
            for (int m = 0; m < mr; ++m) {                                    \
                const T *x = ar[m], *y = tail + (c - full) * K;               \
                T s = 0;                                                      \
                _Pragma("omp simd reduction(+:s)")                            \
                for (int64_t k = 0; k < K; ++k) s += x[k] * y[k];             \
                orow[m][c] = s;                                               \
            }                                                                 \
    }                                                                         \
}                                                                             \
                                                                              \
/* M[k0 + m, c + v W ..] += sum_t a[rows[t]][k0 + m] b[rows[t]][c + v W ..] */\
INLINE void outer_tile_##SUF(const T *a, int64_t lda, const T *b, int64_t ldb,\
                             const int64_t *rows, int64_t n, T *M,            \
                             int64_t ldm, int64_t k0, int64_t c,              \
                             const int MR, const int NV) {                    \
    vec_##SUF acc[TILE_ROWS][TILE_VECS] = {{{0}}};                            \
    for (int64_t t = 0; t < n; ++t) {                                         \
        const T *x = a + rows[t] * lda + k0, *y = b + rows[t] * ldb + c;      \
        vec_##SUF z[TILE_VECS];                                               \
        for (int v = 0; v < NV; ++v) z[v] = ld_##SUF(y + v * W_##SUF);        \
        for (int m = 0; m < MR; ++m) {                                        \
            const T w = x[m];                                                 \
            for (int v = 0; v < NV; ++v) acc[m][v] += w * z[v];               \
        }                                                                     \
    }                                                                         \
    for (int m = 0; m < MR; ++m)                                              \
        for (int v = 0; v < NV; ++v) {                                        \
            T *p = M + (k0 + m) * ldm + c + v * W_##SUF;                      \
            st_##SUF(p, ld_##SUF(p) + acc[m][v]);                             \
        }                                                                     \
}                                                                             \
                                                                              \
/* M[k, :N] += sum_t a[rows[t]][k] b[rows[t]][:N] */                          \
static void outer_run_##SUF(const T *a, int64_t lda, const T *b, int64_t ldb, \
                            const int64_t *rows, int64_t n, T *M, int64_t K,  \
                            int64_t N) {                                      \
    const int64_t W = W_##SUF, full = N - N % W;                              \
    for (int64_t t0 = 0; t0 < n; t0 += RUN_CHUNK) {                           \
        const int64_t *r = rows + t0;                                         \
        const int64_t len = MIN(RUN_CHUNK, n - t0);                           \
        for (int64_t k0 = 0; k0 < K; k0 += TILE_ROWS) {                       \
            const int mr = (int)MIN(TILE_ROWS, K - k0);                       \
            for (int64_t c = 0; c < full; c += TILE_VECS * W) {               \
                const int nv = (int)MIN(TILE_VECS, (full - c) / W);           \
                DISPATCH_TILE(OUTER_TILE_##SUF, mr, nv)                       \
            }                                                                 \
        }                                                                     \
        /* tail columns: vectorised over k instead of c */                    \
        for (int64_t c = full; c < N; ++c) {                                  \
            T acc[K];                                                         \
            for (int64_t k = 0; k < K; ++k) acc[k] = 0;                       \
            for (int64_t t = 0; t < len; ++t) {                               \
                const T w = b[r[t] * ldb + c], *x = a + r[t] * lda;           \
                _Pragma("omp simd")                                           \
                for (int64_t k = 0; k < K; ++k) acc[k] += w * x[k];           \
            }                                                                 \
            for (int64_t k = 0; k < K; ++k) M[k * N + c] += acc[k];           \
        }                                                                     \
    }                                                                         \
}                                                                             \
                                                                              \
/* out[rows[t]][k] = sum_c b[rows[t]][c] M[k, c]: a contraction with the     \
   block transposed into `scratch` [N, K] */                                  \
static void dot_run_##SUF(const T *b, int64_t ldb, const T *M, int64_t K,     \
                          int64_t N, T *out, int64_t ldo,                     \
                          const int64_t *rows, int64_t n, T *scratch) {       \
    for (int64_t k = 0; k < K; ++k)                                           \
        for (int64_t c = 0; c < N; ++c) scratch[c * K + k] = M[k * N + c];    \
    contract_run_##SUF(b, ldb, scratch, N, K, out, ldo, rows, n);             \
}                                                                             \
                                                                              \
/* S[g] += sum_{e : index[e] = g} k[e] v[e]^T, per head. */                   \
void outer_sum_##SUF(const T *k, const T *v, const int64_t *index,            \
                     const int64_t *order, T *S, int64_t E, int64_t H,        \
                     int64_t R, int64_t C) {                                  \
    FOR_EACH_RUN_AND_HEAD(                                                    \
        outer_run_##SUF(k + h * R, H * R, v + h * C, H * C, order + t, n,     \
                        S + (g * H + h) * R * C, R, C);)                      \
}                                                                             \
                                                                              \
/* out[e] = q[e]^T S[index[e]], per head. */                                  \
void contract_##SUF(const T *q, const T *S, const int64_t *index,             \
                    const int64_t *order, T *out, int64_t E, int64_t H,       \
                    int64_t R, int64_t C) {                                   \
    FOR_EACH_RUN_AND_HEAD(                                                    \
        contract_run_##SUF(q + h * R, H * R, S + (g * H + h) * R * C, R, C,   \
                           out + h * C, H * C, order + t, n);)                \
}                                                                             \
                                                                              \
/* Backward of contract: grad_q[e] = S[index[e]] grad[e] (when grad_q is    \
   not NULL) and grad_S[g] += sum q[e] grad[e]^T (when grad_S is not NULL).\
   Returns -1 when its scratch block cannot be allocated, else 0. */        \
int contract_backward_##SUF(const T *q, const T *S, const T *grad,           \
                             const int64_t *index, const int64_t *order,      \
                             T *grad_q, T *grad_S, int64_t E, int64_t H,      \
                             int64_t R, int64_t C) {                          \
    T *scratch = grad_q ? malloc(sizeof(T) * R * C) : NULL;                   \
    if (grad_q && !scratch) return -1;                                        \
    FOR_EACH_RUN_AND_HEAD(                                                    \
        const int64_t block = (g * H + h) * R * C;                            \
        if (grad_q)                                                           \
            dot_run_##SUF(grad + h * C, H * C, S + block, R, C,               \
                          grad_q + h * R, H * R, order + t, n, scratch);      \
        if (grad_S)                                                           \
            outer_run_##SUF(q + h * R, H * R, grad + h * C, H * C, order + t, \
                            n, grad_S + block, R, C);)                        \
    free(scratch);                                                            \
    return 0;                                                                 \
}                                                                             \
                                                                              \
/* Backward of outer_sum: grad_k[e] = grad_S[index[e]] v[e] and             \
   grad_v[e] = grad_S[index[e]]^T k[e] (each skipped when NULL); returns -1  \
   when its scratch block cannot be allocated, else 0. */                   \
int outer_sum_backward_##SUF(const T *k, const T *v, const T *grad_S,        \
                              const int64_t *index, const int64_t *order,     \
                              T *grad_k, T *grad_v, int64_t E, int64_t H,     \
                              int64_t R, int64_t C) {                         \
    T *scratch = grad_k ? malloc(sizeof(T) * R * C) : NULL;                   \
    if (grad_k && !scratch) return -1;                                        \
    FOR_EACH_RUN_AND_HEAD(                                                    \
        const T *block = grad_S + (g * H + h) * R * C;                        \
        if (grad_k)                                                           \
            dot_run_##SUF(v + h * C, H * C, block, R, C, grad_k + h * R,      \
                          H * R, order + t, n, scratch);                      \
        if (grad_v)                                                           \
            contract_run_##SUF(k + h * R, H * R, block, R, C, grad_v + h * C, \
                               H * C, order + t, n);)                         \
    free(scratch);                                                            \
    return 0;                                                                 \
}

#define CONTRACT_TILE_f32(MR, NV) contract_tile_f32(ar, M, N, K, orow, c, MR, NV)
#define CONTRACT_TILE_f64(MR, NV) contract_tile_f64(ar, M, N, K, orow, c, MR, NV)
#define OUTER_TILE_f32(MR, NV) \
    outer_tile_f32(a, lda, b, ldb, r, len, M, N, k0, c, MR, NV)
#define OUTER_TILE_f64(MR, NV) \
    outer_tile_f64(a, lda, b, ldb, r, len, M, N, k0, c, MR, NV)

DEFINE_KERNELS(float, f32)
DEFINE_KERNELS(double, f64)
