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
 * Plain C11 with GCC vector extensions (VEC_BYTES-wide vectors, lowered to
 * whatever the target has); compiled at first use by
 * torch_geometric_hot.ops.native. Single-threaded.
 */
#include <stdint.h>

#define VEC_BYTES 32
/* Rows accumulated in registers before a summary block is updated. */
#define RUN_CHUNK 64

/* Runs `...` for every run of rows of one group (g: the group, order + t:
   its n rows) and every head h. */
#define FOR_EACH_RUN_AND_HEAD(SUF, ...)                                       \
    for (int64_t t = 0, n; t < E; t += n) {                                   \
        n = run_##SUF(index, order, t, E);                                    \
        const int64_t g = index[order[t]];                                    \
        for (int64_t h = 0; h < H; ++h) { __VA_ARGS__ }                       \
    }

#define DEFINE_KERNELS(T, SUF)                                                \
typedef T vec_##SUF __attribute__((vector_size(VEC_BYTES), aligned(sizeof(T))));\
enum { W_##SUF = VEC_BYTES / sizeof(T) };                                     \
                                                                              \
static inline vec_##SUF ld_##SUF(const T *p) { return *(const vec_##SUF *)p; }\
static inline void st_##SUF(T *p, vec_##SUF x) { *(vec_##SUF *)p = x; }       \
                                                                              \
/* S[R, C] += sum_t a[rows[t]] b[rows[t]]^T, rows of a/b lda/ldb apart. */    \
static void outer_run_##SUF(const T *a, int64_t lda, const T *b, int64_t ldb, \
                            const int64_t *rows, int64_t n, T *S, int64_t R,  \
                            int64_t C) {                                      \
    const int64_t W = W_##SUF, full = C - C % W;                              \
    for (int64_t t0 = 0; t0 < n; t0 += RUN_CHUNK) {                           \
        const int64_t t1 = t0 + RUN_CHUNK < n ? t0 + RUN_CHUNK : n;           \
        for (int64_t r = 0; r < R; ++r) {                                     \
            T *out = S + r * C;                                               \
            int64_t c = 0;                                                    \
            for (; c + 4 * W <= full; c += 4 * W) {                           \
                vec_##SUF s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};             \
                for (int64_t t = t0; t < t1; ++t) {                           \
                    const T w = a[rows[t] * lda + r];                         \
                    const T *x = b + rows[t] * ldb + c;                       \
                    s0 += w * ld_##SUF(x);                                    \
                    s1 += w * ld_##SUF(x + W);                                \
                    s2 += w * ld_##SUF(x + 2 * W);                            \
                    s3 += w * ld_##SUF(x + 3 * W);                            \
                }                                                             \
                st_##SUF(out + c, ld_##SUF(out + c) + s0);                    \
                st_##SUF(out + c + W, ld_##SUF(out + c + W) + s1);            \
                st_##SUF(out + c + 2 * W, ld_##SUF(out + c + 2 * W) + s2);    \
                st_##SUF(out + c + 3 * W, ld_##SUF(out + c + 3 * W) + s3);    \
            }                                                                 \
            for (; c < full; c += W) {                                        \
                vec_##SUF s0 = {0};                                           \
                for (int64_t t = t0; t < t1; ++t)                             \
                    s0 += a[rows[t] * lda + r] * ld_##SUF(b + rows[t] * ldb + c);\
                st_##SUF(out + c, ld_##SUF(out + c) + s0);                    \
            }                                                                 \
        }                                                                     \
        /* tail columns: vectorised over r instead of c */                    \
        for (int64_t c = full; c < C; ++c) {                                  \
            T acc[R];                                                         \
            for (int64_t r = 0; r < R; ++r) acc[r] = 0;                       \
            for (int64_t t = t0; t < t1; ++t) {                               \
                const T w = b[rows[t] * ldb + c], *x = a + rows[t] * lda;     \
                for (int64_t r = 0; r < R; ++r) acc[r] += w * x[r];           \
            }                                                                 \
            for (int64_t r = 0; r < R; ++r) S[r * C + c] += acc[r];           \
        }                                                                     \
    }                                                                         \
}                                                                             \
                                                                              \
/* out[rows[t]][:C] = sum_r a[rows[t]][r] S[r, :] */                          \
static void contract_run_##SUF(const T *a, int64_t lda, const T *S,           \
                               int64_t R, int64_t C, T *out, int64_t ldo,     \
                               const int64_t *rows, int64_t n) {              \
    const int64_t W = W_##SUF, full = C - C % W;                              \
    /* tail columns of S, transposed: contiguous dot products over r */       \
    T tail[(C - full) * R + 1];                                               \
    for (int64_t c = full; c < C; ++c)                                        \
        for (int64_t r = 0; r < R; ++r) tail[(c - full) * R + r] = S[r * C + c];\
    for (int64_t t = 0; t < n; ++t) {                                         \
        const T *w = a + rows[t] * lda;                                       \
        T *o = out + rows[t] * ldo;                                           \
        int64_t c = 0;                                                        \
        for (; c + 4 * W <= full; c += 4 * W) {                               \
            vec_##SUF s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};                 \
            for (int64_t r = 0; r < R; ++r) {                                 \
                const T *x = S + r * C + c;                                   \
                s0 += w[r] * ld_##SUF(x);                                     \
                s1 += w[r] * ld_##SUF(x + W);                                 \
                s2 += w[r] * ld_##SUF(x + 2 * W);                             \
                s3 += w[r] * ld_##SUF(x + 3 * W);                             \
            }                                                                 \
            st_##SUF(o + c, s0);                                              \
            st_##SUF(o + c + W, s1);                                          \
            st_##SUF(o + c + 2 * W, s2);                                      \
            st_##SUF(o + c + 3 * W, s3);                                      \
        }                                                                     \
        for (; c < full; c += W) {                                            \
            vec_##SUF s0 = {0};                                               \
            for (int64_t r = 0; r < R; ++r)                                   \
                s0 += w[r] * ld_##SUF(S + r * C + c);                         \
            st_##SUF(o + c, s0);                                              \
        }                                                                     \
        for (; c < C; ++c) {                                                  \
            const T *y = tail + (c - full) * R;                               \
            T s = 0;                                                          \
            _Pragma("omp simd reduction(+:s)")                                \
            for (int64_t r = 0; r < R; ++r) s += w[r] * y[r];                 \
            o[c] = s;                                                         \
        }                                                                     \
    }                                                                         \
}                                                                             \
                                                                              \
/* out[rows[t]][r] = sum_c b[rows[t]][c] S[r, c] */                           \
static void dot_run_##SUF(const T *b, int64_t ldb, const T *S, int64_t R,     \
                          int64_t C, T *out, int64_t ldo,                     \
                          const int64_t *rows, int64_t n) {                   \
    const int64_t W = W_##SUF, full = C - C % W;                              \
    for (int64_t t = 0; t < n; ++t) {                                         \
        const T *x = b + rows[t] * ldb;                                       \
        T *o = out + rows[t] * ldo;                                           \
        for (int64_t r = 0; r < R; ++r) {                                     \
            const T *y = S + r * C;                                           \
            vec_##SUF s0 = {0}, s1 = {0};                                     \
            int64_t c = 0;                                                    \
            for (; c + 2 * W <= full; c += 2 * W) {                           \
                s0 += ld_##SUF(x + c) * ld_##SUF(y + c);                      \
                s1 += ld_##SUF(x + c + W) * ld_##SUF(y + c + W);              \
            }                                                                 \
            for (; c < full; c += W) s0 += ld_##SUF(x + c) * ld_##SUF(y + c); \
            s0 += s1;                                                         \
            T s = 0;                                                          \
            for (int64_t i = 0; i < W; ++i) s += s0[i];                       \
            for (; c < C; ++c) s += x[c] * y[c];                              \
            o[r] = s;                                                         \
        }                                                                     \
    }                                                                         \
}                                                                             \
                                                                              \
/* Length of the run of equal groups starting at order[t]. */                 \
static inline int64_t run_##SUF(const int64_t *index, const int64_t *order,   \
                                int64_t t, int64_t E) {                       \
    const int64_t g = index[order[t]];                                        \
    int64_t end = t + 1;                                                      \
    while (end < E && index[order[end]] == g) ++end;                          \
    return end - t;                                                           \
}                                                                             \
                                                                              \
/* S[g] += sum_{e : index[e] = g} k[e] v[e]^T, per head. */                   \
void outer_sum_##SUF(const T *k, const T *v, const int64_t *index,            \
                     const int64_t *order, T *S, int64_t E, int64_t H,        \
                     int64_t R, int64_t C) {                                  \
    FOR_EACH_RUN_AND_HEAD(SUF,                                                \
        outer_run_##SUF(k + h * R, H * R, v + h * C, H * C, order + t, n,     \
                        S + (g * H + h) * R * C, R, C);)                      \
}                                                                             \
                                                                              \
/* out[e] = q[e]^T S[index[e]], per head. */                                  \
void contract_##SUF(const T *q, const T *S, const int64_t *index,             \
                    const int64_t *order, T *out, int64_t E, int64_t H,       \
                    int64_t R, int64_t C) {                                   \
    FOR_EACH_RUN_AND_HEAD(SUF,                                                \
        contract_run_##SUF(q + h * R, H * R, S + (g * H + h) * R * C, R, C,   \
                           out + h * C, H * C, order + t, n);)                \
}                                                                             \
                                                                              \
/* Backward of contract: grad_q[e] = S[index[e]] grad[e] (when grad_q is    \
   not NULL) and grad_S[g] += sum q[e] grad[e]^T (when grad_S is not NULL).*/\
void contract_backward_##SUF(const T *q, const T *S, const T *grad,           \
                             const int64_t *index, const int64_t *order,      \
                             T *grad_q, T *grad_S, int64_t E, int64_t H,      \
                             int64_t R, int64_t C) {                          \
    FOR_EACH_RUN_AND_HEAD(SUF,                                                \
        const int64_t block = (g * H + h) * R * C;                            \
        if (grad_q)                                                           \
            dot_run_##SUF(grad + h * C, H * C, S + block, R, C,               \
                          grad_q + h * R, H * R, order + t, n);               \
        if (grad_S)                                                           \
            outer_run_##SUF(q + h * R, H * R, grad + h * C, H * C, order + t, \
                            n, grad_S + block, R, C);)                        \
}                                                                             \
                                                                              \
/* Backward of outer_sum: grad_k[e] = grad_S[index[e]] v[e] and             \
   grad_v[e] = grad_S[index[e]]^T k[e] (each skipped when NULL). */           \
void outer_sum_backward_##SUF(const T *k, const T *v, const T *grad_S,        \
                              const int64_t *index, const int64_t *order,     \
                              T *grad_k, T *grad_v, int64_t E, int64_t H,     \
                              int64_t R, int64_t C) {                         \
    FOR_EACH_RUN_AND_HEAD(SUF,                                                \
        const T *block = grad_S + (g * H + h) * R * C;                        \
        if (grad_k)                                                           \
            dot_run_##SUF(v + h * C, H * C, block, R, C, grad_k + h * R,      \
                          H * R, order + t, n);                               \
        if (grad_v)                                                           \
            contract_run_##SUF(k + h * R, H * R, block, R, C, grad_v + h * C, \
                               H * C, order + t, n);)                         \
}

DEFINE_KERNELS(float, f32)
DEFINE_KERNELS(double, f64)
