/*
 * Native kernels of kernel (linear) attention: per-group outer-product
 * sums S_g = sum_{e : g(e) = g} k_e v_e^T and their readings
 * o_e = q_e^T S_{g(e)}, forward and backward, per head.
 *
 * A call visits E rows in runs of equal group: visit t reads data row
 * rows[t] and belongs to group groups[t] (sorted), so a group's [R, C]
 * summary block stays in cache while its run is processed. Rows are
 * [.., H, R] (keys, queries: row stride H R) or anything else for the
 * values of a summary: row stride ldb, head stride hb, and summary column
 * j < C' read from offset src[j] of the row's head (so a summary can
 * gather its columns from several classes' values without a copy); with
 * `ones`, the last column (j = C') is the sum of the keys alone (the
 * denominator). Summaries are [G, H, R, C] (C = C' + ones), readings and
 * their gradients [E, H, C] / [E, H, R].
 *
 * Everything reduces to two register-tiled loops over a run:
 *   contract: out[t, :] = sum_k a[t, k] M[k, :]   (reading a block)
 *   outer:    M[k, :]  += sum_t a[t, k] b[t, :]   (accumulating a block)
 * Each tile keeps TILE_ROWS x TILE_VECS vector accumulators in registers
 * (independent FMA chains; every loaded vector feeds TILE_ROWS of them).
 * Columns that do not form a whole vector of consecutive offsets (the
 * denominator, and C = 8 * classes + 1 always has one) are handled one
 * by one, vectorised over k. Summary blocks (and their gradients) are
 * written, not added to, so the caller does not zero-fill them: each
 * group's run writes its block and the blocks of groups without rows are
 * zeroed.
 *
 * Plain C11 with GCC vector extensions (VEC_BYTES-wide vectors, lowered to
 * whatever the target has); compiled at first use by
 * torch_geometric_hot.ops.native. Single-threaded. Functions that allocate
 * scratch return -1 when that fails, else 0.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* Columns of a block: `nvec` whole vectors (block column vm[i], row offset
   vx[i], W consecutive columns each), then `nscal` single columns (sm, sx).
   Columns past those (the denominator) are the caller's. */
typedef struct {
    int64_t nvec, nscal, *vm, *vx, *sm, *sx;
} colmap;

/* The map of block columns j < n to row offsets src[j] (NULL: j itself),
   whole vectors where W offsets are consecutive. */
static int colmap_build(colmap *m, const int64_t *src, int64_t n, int64_t W) {
    int64_t *buf = malloc(sizeof(int64_t) * 4 * (n + 1));
    if (!buf) return -1;
    m->vm = buf; m->vx = buf + n + 1; m->sm = buf + 2 * (n + 1);
    m->sx = buf + 3 * (n + 1); m->nvec = m->nscal = 0;
    for (int64_t j = 0; j < n;) {
        int64_t run = 1;
        while (run < W && j + run < n &&
               (src ? src[j + run] == src[j] + run : 1)) ++run;
        if (run == W) {
            m->vm[m->nvec] = j; m->vx[m->nvec++] = src ? src[j] : j; j += W;
        } else {
            m->sm[m->nscal] = j; m->sx[m->nscal++] = src ? src[j] : j; ++j;
        }
    }
    return 0;
}

/* The same map read the other way round: block column src[j] <-> row
   offset j (for kernels that read some columns of a block into a row). */
static colmap colmap_swapped(const colmap *m) {
    colmap out = {m->nvec, m->nscal, m->vx, m->vm, m->sx, m->sm};
    return out;
}

/* Runs `...` for every run of visits of one group (g: the group, t: its
   first visit, n: its length) and every head h. */
#define FOR_EACH_RUN_AND_HEAD(...)                                            \
    for (int64_t t = 0, n; t < E; t += n) {                                   \
        const int64_t g = groups[t];                                          \
        for (n = 1; t + n < E && groups[t + n] == g; ++n) {}                  \
        for (int64_t h = 0; h < H; ++h) { __VA_ARGS__ }                       \
    }

/* FOR_EACH_RUN_AND_HEAD for a kernel that writes the summary blocks
   (size elements per group) of groups g_lo .. g_hi - 1: the blocks of
   groups without visits are zeroed (when S is not NULL). */
#define FOR_EACH_RUN_AND_HEAD_WRITING(S, size, ...)                           \
    int64_t next = g_lo;                                                      \
    FOR_EACH_RUN_AND_HEAD(                                                    \
        if (h == 0 && S && g > next)                                          \
            memset(S + next * (size), 0, sizeof(*S) * (g - next) * (size));   \
        next = g + 1;                                                         \
        __VA_ARGS__)                                                          \
    if (S && g_hi > next)                                                     \
        memset(S + next * (size), 0, sizeof(*S) * (g_hi - next) * (size));

#define DEFINE_KERNELS(T, SUF)                                                \
typedef T vec_##SUF __attribute__((vector_size(VEC_BYTES), aligned(sizeof(T))));\
enum { W_##SUF = VEC_BYTES / sizeof(T) };                                     \
                                                                              \
INLINE vec_##SUF ld_##SUF(const T *p) { return *(const vec_##SUF *)p; }       \
INLINE void st_##SUF(T *p, vec_##SUF x) { *(vec_##SUF *)p = x; }              \
                                                                              \
/* o[m][vx[v]..] (+)= sum_k a[m][k] M[k, vm[v]..], m < MR, v < NV */          \
INLINE void contract_tile_##SUF(const T *const *a, const T *M, int64_t ldm,   \
                                int64_t K, T *const *o, const int64_t *vm,    \
                                const int64_t *vx, int add, const int MR,     \
                                const int NV) {                               \
    vec_##SUF acc[TILE_ROWS][TILE_VECS] = {{{0}}};                            \
    for (int64_t k = 0; k < K; ++k) {                                         \
        vec_##SUF y[TILE_VECS];                                               \
        for (int v = 0; v < NV; ++v) y[v] = ld_##SUF(M + k * ldm + vm[v]);    \
        for (int m = 0; m < MR; ++m) {                                        \
            const T w = a[m][k];                                              \
            for (int v = 0; v < NV; ++v) acc[m][v] += w * y[v];               \
        }                                                                     \
    }                                                                         \
    for (int m = 0; m < MR; ++m)                                              \
        for (int v = 0; v < NV; ++v) {                                        \
            T *p = o[m] + vx[v];                                              \
            st_##SUF(p, add ? ld_##SUF(p) + acc[m][v] : acc[m][v]);           \
        }                                                                     \
}                                                                             \
                                                                              \
/* out[rows[t]][cm] (+)= sum_k a_t[k] M[k, cm] over the mapped columns of a   \
   [K, ldm] block, where a_t = a[rows[t]][:K] or, with the map `ax`, the     \
   row's mapped columns (a_t[ax.vm] = a[rows[t]][ax.vx], whole vectors and  \
   single columns; 1 for k >= kx: the denominator column), gathered into    \
   buf [TILE_ROWS, K]; tail holds nscal x K scratch. */                     \
static void contract_run_##SUF(const T *a, int64_t lda, const colmap *ax,     \
                               int64_t kx, const T *M, int64_t K,             \
                               int64_t ldm, const colmap *cm, T *out,         \
                               int64_t ldo, int add, const int64_t *rows,     \
                               int64_t n, T *buf, T *tail) {                  \
    /* tail [nscal, K]: the single columns of M, transposed */                \
    for (int64_t s = 0; s < cm->nscal; ++s)                                   \
        for (int64_t k = 0; k < K; ++k) tail[s * K + k] = M[k * ldm + cm->sm[s]];\
    for (int64_t t = 0; t < n; t += TILE_ROWS) {                              \
        const int mr = (int)MIN(TILE_ROWS, n - t);                            \
        const T *ar[TILE_ROWS];                                               \
        T *orow[TILE_ROWS];                                                   \
        for (int m = 0; m < mr; ++m) {                                        \
            const T *x = a + rows[t + m] * lda;                               \
            orow[m] = out + rows[t + m] * ldo;                                \
            if (!ax) { ar[m] = x; continue; }                                 \
            T *y = buf + m * K;                                               \
            for (int64_t v = 0; v < ax->nvec; ++v)                            \
                st_##SUF(y + ax->vm[v], ld_##SUF(x + ax->vx[v]));             \
            for (int64_t s = 0; s < ax->nscal; ++s) y[ax->sm[s]] = x[ax->sx[s]];\
            for (int64_t k = kx; k < K; ++k) y[k] = 1;                        \
            ar[m] = y;                                                        \
        }                                                                     \
        for (int64_t v = 0; v < cm->nvec; v += TILE_VECS) {                   \
            const int nv = (int)MIN(TILE_VECS, cm->nvec - v);                 \
            const int64_t *vm = cm->vm + v, *vx = cm->vx + v;                 \
            DISPATCH_TILE(CONTRACT_TILE_##SUF, mr, nv)                        \
        }                                                                     \
        for (int64_t s = 0; s < cm->nscal; ++s)                               \
            for (int m = 0; m < mr; ++m) {                                    \
                const T *x = ar[m], *y = tail + s * K;                        \
                T acc = 0;                                                    \
                _Pragma("omp simd reduction(+:acc)")                          \
                for (int64_t k = 0; k < K; ++k) acc += x[k] * y[k];           \
                T *p = orow[m] + cm->sx[s];                                   \
                *p = add ? *p + acc : acc;                                    \
            }                                                                 \
    }                                                                         \
}                                                                             \
                                                                              \
/* M[k0 + m, vm[v]..] (+)= sum_t a[rows[t]][k0 + m] b[rows[t]][vx[v]..] */  \
INLINE void outer_tile_##SUF(const T *a, int64_t lda, const T *b, int64_t ldb,\
                             const int64_t *rows, int64_t n, T *M,            \
                             int64_t ldm, int64_t k0, const int64_t *vm,      \
                             const int64_t *vx, int add, const int MR,        \
                             const int NV) {                                  \
    vec_##SUF acc[TILE_ROWS][TILE_VECS] = {{{0}}};                            \
    for (int64_t t = 0; t < n; ++t) {                                         \
        const T *x = a + rows[t] * lda + k0, *y = b + rows[t] * ldb;          \
        vec_##SUF z[TILE_VECS];                                               \
        for (int v = 0; v < NV; ++v) z[v] = ld_##SUF(y + vx[v]);              \
        for (int m = 0; m < MR; ++m) {                                        \
            const T w = x[m];                                                 \
            for (int v = 0; v < NV; ++v) acc[m][v] += w * z[v];               \
        }                                                                     \
    }                                                                         \
    for (int m = 0; m < MR; ++m)                                              \
        for (int v = 0; v < NV; ++v) {                                        \
            T *p = M + (k0 + m) * ldm + vm[v];                                \
            st_##SUF(p, add ? ld_##SUF(p) + acc[m][v] : acc[m][v]);           \
        }                                                                     \
}                                                                             \
                                                                              \
/* M[k, cm] = sum_t a[rows[t]][k] b[rows[t]][cm] for a [K, ldm] block, and   \
   M[k, ones] = sum_t a[rows[t]][k] when ones >= 0 (written: the run holds   \
   all of the group's rows; added to with `accumulate`). */                 \
static void outer_run_##SUF(const T *a, int64_t lda, const T *b, int64_t ldb, \
                            const colmap *cm, int64_t ones,                   \
                            const int64_t *rows, int64_t n, T *M, int64_t K,  \
                            int64_t ldm, int accumulate) {                    \
    for (int64_t t0 = 0; t0 < n; t0 += RUN_CHUNK) {                           \
        const int64_t *r = rows + t0;                                         \
        const int64_t len = MIN(RUN_CHUNK, n - t0);                           \
        const int add = accumulate || t0 > 0;                                 \
        for (int64_t k0 = 0; k0 < K; k0 += TILE_ROWS) {                       \
            const int mr = (int)MIN(TILE_ROWS, K - k0);                       \
            for (int64_t v = 0; v < cm->nvec; v += TILE_VECS) {               \
                const int nv = (int)MIN(TILE_VECS, cm->nvec - v);             \
                const int64_t *vm = cm->vm + v, *vx = cm->vx + v;             \
                DISPATCH_TILE(OUTER_TILE_##SUF, mr, nv)                       \
            }                                                                 \
        }                                                                     \
        /* single columns: vectorised over k instead */                       \
        for (int64_t s = 0; s < cm->nscal + (ones >= 0); ++s) {               \
            T acc[K];                                                         \
            for (int64_t k = 0; k < K; ++k) acc[k] = 0;                       \
            for (int64_t t = 0; t < len; ++t) {                               \
                const T w = s < cm->nscal ? b[r[t] * ldb + cm->sx[s]] : 1;    \
                const T *x = a + r[t] * lda;                                  \
                _Pragma("omp simd")                                           \
                for (int64_t k = 0; k < K; ++k) acc[k] += w * x[k];           \
            }                                                                 \
            const int64_t j = s < cm->nscal ? cm->sm[s] : ones;               \
            for (int64_t k = 0; k < K; ++k)                                   \
                M[k * ldm + j] = add ? M[k * ldm + j] + acc[k] : acc[k];      \
        }                                                                     \
    }                                                                         \
}                                                                             \
                                                                              \
/* S[g, h] = sum over the group's visits of a[row, h] [b[row, h, src], 1]^T  \
   for groups g_lo .. g_hi - 1 (0 without visits). */                       \
int outer_sum_##SUF(const T *a, const T *b, const int64_t *rows,              \
                    const int64_t *groups, const int64_t *src, T *S,          \
                    int64_t E, int64_t H, int64_t R, int64_t C, int64_t ldb,  \
                    int64_t hb, int64_t ones, int64_t g_lo, int64_t g_hi) {   \
    colmap cm = {0};                                                          \
    if (colmap_build(&cm, src, C - ones, W_##SUF)) return -1;                 \
    FOR_EACH_RUN_AND_HEAD_WRITING(S, H * R * C,                               \
        outer_run_##SUF(a + h * R, H * R, b + h * hb, ldb, &cm,               \
                        ones ? C - 1 : -1, rows + t, n,                       \
                        S + (g * H + h) * R * C, R, C, 0);)                   \
    free(cm.vm);                                                              \
    return 0;                                                                 \
}                                                                             \
                                                                              \
/* out[row, j] = q[row]^T S[g][:, src[j]] for j < Cout, per head. */        \
int contract_##SUF(const T *q, const T *S, const int64_t *rows,               \
                   const int64_t *groups, const int64_t *src, T *out,         \
                   int64_t E, int64_t H, int64_t R, int64_t C, int64_t Cout) {\
    colmap cm = {0};                                                          \
    T *tail = malloc(sizeof(T) * (R * Cout + 1));                             \
    if (!tail || colmap_build(&cm, src, Cout, W_##SUF)) {                     \
        free(tail);                                                           \
        return -1;                                                            \
    }                                                                         \
    const colmap read = colmap_swapped(&cm);                                  \
    FOR_EACH_RUN_AND_HEAD(                                                    \
        contract_run_##SUF(q + h * R, H * R, NULL, R, S + (g * H + h) * R * C,\
                           R, C, &read, out + h * Cout, H * Cout, 0, rows + t,\
                           n, NULL, tail);)                                   \
    free(tail); free(cm.vm);                                                  \
    return 0;                                                                 \
}                                                                             \
                                                                              \
/* Columns src[0..Cout) (NULL: all) of the [R, C] block, transposed into   \
   [Cout, R]: the contraction of row values over them gives the gradient of \
   the R side. */                                                           \
static void transpose_##SUF(const T *M, int64_t R, int64_t C,                 \
                            const int64_t *src, int64_t Cout, T *out) {       \
    for (int64_t r = 0; r < R; ++r)                                           \
        for (int64_t c = 0; c < Cout; ++c)                                    \
            out[c * R + r] = M[r * C + (src ? src[c] : c)];                   \
}                                                                             \
                                                                              \
/* Backward of contract: grad_q[row] = S[g][:, src] grad[row] (when grad_q  \
   is not NULL) and grad_S[g][:, src] = sum q[row] grad[row]^T for groups   \
   g_lo .. g_hi - 1 (when grad_S is not NULL); bit 1 of `add` adds to       \
   grad_q instead, bit 2 to grad_S (needed when src leaves columns out:     \
   only the read columns are written). */                                   \
int contract_backward_##SUF(const T *q, const T *S, const T *grad,            \
                            const int64_t *rows, const int64_t *groups,       \
                            const int64_t *src, T *grad_q, T *grad_S,         \
                            int64_t E, int64_t H, int64_t R, int64_t C,       \
                            int64_t Cout, int64_t add, int64_t g_lo,          \
                            int64_t g_hi) {                                   \
    colmap cm = {0}, all_r = {0};                                             \
    T *scratch = malloc(sizeof(T) * (2 * R * Cout + 1));                      \
    if (!scratch || colmap_build(&cm, src, Cout, W_##SUF) ||                  \
            colmap_build(&all_r, NULL, R, W_##SUF)) {                         \
        free(scratch); free(cm.vm);                                           \
        return -1;                                                            \
    }                                                                         \
    const colmap read = colmap_swapped(&cm);                                  \
    T *const fresh = add & 2 ? (T *)0 : grad_S; /* blocks written */          \
    FOR_EACH_RUN_AND_HEAD_WRITING(fresh, H * R * C,                           \
        const int64_t block = (g * H + h) * R * C;                            \
        if (grad_q) {                                                         \
            transpose_##SUF(S + block, R, C, src, Cout, scratch);             \
            contract_run_##SUF(grad + h * Cout, H * Cout, NULL, Cout, scratch,\
                               Cout, R, &all_r, grad_q + h * R, H * R,        \
                               (int)(add & 1), rows + t, n, NULL,             \
                               scratch + R * Cout);                           \
        }                                                                     \
        if (grad_S)                                                           \
            outer_run_##SUF(q + h * R, H * R, grad + h * Cout, H * Cout,      \
                            &read, -1, rows + t, n, grad_S + block, R, C,     \
                            (int)(add & 2));)                                 \
    free(scratch); free(cm.vm); free(all_r.vm);                               \
    return 0;                                                                 \
}                                                                             \
                                                                              \
/* Backward of outer_sum, accumulated into grad_a / grad_b (laid out as a    \
   and b; each skipped when NULL): grad_a[row] += grad_S[g] [b[row, src], 1] \
   and grad_b[row, src] += grad_S[g, :, :C'] ^T a[row]. */                    \
int outer_sum_backward_##SUF(const T *a, const T *b, const T *grad_S,         \
                             const int64_t *rows, const int64_t *groups,      \
                             const int64_t *src, T *grad_a, T *grad_b,        \
                             int64_t E, int64_t H, int64_t R, int64_t C,      \
                             int64_t ldb, int64_t hb, int64_t ones) {         \
    const int64_t Cb = C - ones;                                              \
    colmap to_b = {0}, all_r = {0};                                           \
    /* transposed block [C, R], tail [<= R C], gathered rows [TILE_ROWS, C] */\
    T *scratch = malloc(sizeof(T) * (2 * R * C + TILE_ROWS * C + 1));         \
    if (!scratch || colmap_build(&to_b, src, Cb, W_##SUF) ||                  \
            colmap_build(&all_r, NULL, R, W_##SUF)) {                         \
        free(scratch); free(to_b.vm);                                         \
        return -1;                                                            \
    }                                                                         \
    FOR_EACH_RUN_AND_HEAD(                                                    \
        const T *block = grad_S + (g * H + h) * R * C;                        \
        if (grad_a) {                                                         \
            transpose_##SUF(block, R, C, NULL, C, scratch);                   \
            contract_run_##SUF(b + h * hb, ldb, &to_b, Cb, scratch, C, R,     \
                               &all_r,                                        \
                               grad_a + h * R, H * R, 1, rows + t, n,         \
                               scratch + 2 * R * C, scratch + R * C);         \
        }                                                                     \
        if (grad_b)                                                           \
            contract_run_##SUF(a + h * R, H * R, NULL, R, block, R, C, &to_b, \
                               grad_b + h * hb, ldb, 1, rows + t, n, NULL,    \
                               scratch + R * C);)                             \
    free(scratch); free(to_b.vm); free(all_r.vm);                             \
    return 0;                                                                 \
}

#define CONTRACT_TILE_f32(MR, NV) \
    contract_tile_f32(ar, M, ldm, K, orow, vm, vx, add, MR, NV)
#define CONTRACT_TILE_f64(MR, NV) \
    contract_tile_f64(ar, M, ldm, K, orow, vm, vx, add, MR, NV)
#define OUTER_TILE_f32(MR, NV) \
    outer_tile_f32(a, lda, b, ldb, r, len, M, ldm, k0, vm, vx, add, MR, NV)
#define OUTER_TILE_f64(MR, NV) \
    outer_tile_f64(a, lda, b, ldb, r, len, M, ldm, k0, vm, vx, add, MR, NV)

DEFINE_KERNELS(float, f32)
DEFINE_KERNELS(double, f64)
