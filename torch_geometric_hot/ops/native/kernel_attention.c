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
 * Each tile keeps up to MAX_ACC vector accumulators in registers
 * (independent FMA chains; every loaded vector feeds a row of them).
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
/* Visits ahead of the current piece whose data rows are prefetched (group
   order makes the rows of most pools a walk through memory). */
#define AHEAD 16
/* Visits processed together, all heads in turn, while their rows are in
   cache (a longer run is cut into pieces of this many). */
#define RUN_CHUNK 64
/* Register tiles: MR x NV vector accumulators with MR * NV <= MAX_ACC and
   NV <= MAX_VECS (with the NV loaded vectors and one broadcast, at most 16
   registers). A dimension is cut into the fewest tiles that fit, of near
   equal size (17 features: 9 + 8 rows one vector wide, 6 + 6 + 5 two
   vectors wide), not into full tiles and a thin remainder. */
#define MAX_ACC 12
#define MAX_VECS 3
/* Independent accumulator sets of a tile of `acc` accumulators (the
   reduced dimension is split round robin between them), so that at least
   six FMA chains are in flight even for a one-row tile. */
#define SETS(acc) ((acc) >= 6 ? 1 : (acc) >= 3 ? 2 : 4)
#define INLINE static inline __attribute__((always_inline))
#define MIN(a, b) ((a) < (b) ? (a) : (b))

/* The next piece when `left` items are cut into the fewest pieces of at
   most `cap`, as equal as possible. */
INLINE int64_t piece(int64_t left, int64_t cap) {
    const int64_t parts = (left + cap - 1) / cap;
    return (left + parts - 1) / parts;
}

/* Calls F(..., mr, nv) with compile-time constants for mr x nv. */
#define DISPATCH_TILE(mr, nv, F, ...)                                         \
    switch ((nv) * 16 + (mr)) {                                               \
    case 17: F(__VA_ARGS__, 1, 1); break; case 18: F(__VA_ARGS__, 2, 1); break; \
    case 19: F(__VA_ARGS__, 3, 1); break; case 20: F(__VA_ARGS__, 4, 1); break; \
    case 21: F(__VA_ARGS__, 5, 1); break; case 22: F(__VA_ARGS__, 6, 1); break; \
    case 23: F(__VA_ARGS__, 7, 1); break; case 24: F(__VA_ARGS__, 8, 1); break; \
    case 25: F(__VA_ARGS__, 9, 1); break; case 26: F(__VA_ARGS__, 10, 1); break; \
    case 27: F(__VA_ARGS__, 11, 1); break; case 28: F(__VA_ARGS__, 12, 1); break; \
    case 33: F(__VA_ARGS__, 1, 2); break; case 34: F(__VA_ARGS__, 2, 2); break; \
    case 35: F(__VA_ARGS__, 3, 2); break; case 36: F(__VA_ARGS__, 4, 2); break; \
    case 37: F(__VA_ARGS__, 5, 2); break; case 38: F(__VA_ARGS__, 6, 2); break; \
    case 49: F(__VA_ARGS__, 1, 3); break; case 50: F(__VA_ARGS__, 2, 3); break; \
    case 51: F(__VA_ARGS__, 3, 3); break; default: F(__VA_ARGS__, 4, 3); break; \
    }

/* Columns of a block: `nvec` whole vectors (block column vm[i], row offset
   vx[i], W consecutive columns each), then `nscal` single columns (sm, sx).
   Columns past those (the denominator) are the caller's. The tiling, fixed
   per call (no divisions in the loops): the vector groups of at most
   MAX_VECS (group[v]: the size of the group starting at v) and, for the
   rows of a tile, cut[left]: the next tile's rows when `left` <= RUN_CHUNK
   rows remain (piece() of `rows` past that). */
typedef struct {
    int64_t nvec, nscal, *vm, *vx, *sm, *sx, *group, rows;
    unsigned char cut[RUN_CHUNK + 1];
} colmap;

/* The map of block columns j < n to row offsets src[j] (NULL: j itself),
   whole vectors where W offsets are consecutive. */
static int colmap_build(colmap *m, const int64_t *src, int64_t n, int64_t W) {
    int64_t *buf = malloc(sizeof(int64_t) * 5 * (n + 1));
    if (!buf) return -1;
    m->vm = buf; m->vx = buf + n + 1; m->sm = buf + 2 * (n + 1);
    m->sx = buf + 3 * (n + 1); m->group = buf + 4 * (n + 1);
    m->nvec = m->nscal = 0;
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
    for (int64_t v = 0; v < m->nvec; v += m->group[v])
        m->group[v] = piece(m->nvec - v, MAX_VECS);
    /* the widest group sets the rows of a tile */
    m->rows = MAX_ACC / (m->nvec ? m->group[0] : 1);
    for (int64_t left = 1; left <= RUN_CHUNK; ++left)
        m->cut[left] = (unsigned char)piece(left, m->rows);
    return 0;
}

/* The rows of the next tile when `left` rows remain. */
INLINE int64_t next_rows(const colmap *m, int64_t left) {
    return left <= RUN_CHUNK ? m->cut[left] : piece(left, m->rows);
}

/* The same map read the other way round: block column src[j] <-> row
   offset j (for kernels that read some columns of a block into a row). */
static colmap colmap_swapped(const colmap *m) {
    colmap out = *m;
    out.vm = m->vx; out.vx = m->vm; out.sm = m->sx; out.sx = m->sm;
    return out;
}

/* Data rows a kernel reads or writes at each visit: base + rows[t] * ld,
   `bytes` long. */
typedef struct {
    const void *base;
    int64_t ld, bytes;
} rowspec;

/* Prefetches the rows of visits [from, to) (clipped to the E visits) of
   `count` row specs (those with a base); returns the visit prefetching has
   reached. */
static int64_t prefetch_rows(const int64_t *rows, int64_t from, int64_t to,
                             int64_t E, const rowspec *spec, int count) {
    to = MIN(to, E);
    for (int64_t t = from; t < to; ++t)
        for (int i = 0; i < count; ++i) {
            if (!spec[i].base) continue;
            const char *p = (const char *)spec[i].base + rows[t] * spec[i].ld;
            for (int64_t b = 0; b < spec[i].bytes; b += 64)
                __builtin_prefetch(p + b);
        }
    return to > from ? to : from;
}

/* Runs `...` for every piece of at most RUN_CHUNK visits of one group (g:
   the group, t: its first visit, n: its length, first: whether it starts
   the group's run) and every head h: the heads of a piece reuse its rows
   while they are in cache. The rows of the array of rowspecs `fetch` are
   prefetched AHEAD visits ahead. */
#define FOR_EACH_RUN_AND_HEAD(fetch, ...)                                     \
    int64_t ahead = 0;                                                        \
    for (int64_t t = 0, n; t < E; t += n) {                                   \
        const int64_t g = groups[t];                                          \
        const int first = t == 0 || groups[t - 1] != g;                       \
        for (n = 1; n < RUN_CHUNK && t + n < E && groups[t + n] == g; ++n) {} \
        ahead = prefetch_rows(rows, ahead, t + n + AHEAD, E, fetch,           \
                              sizeof(fetch) / sizeof(*fetch));                \
        (void)first;                                                          \
        for (int64_t h = 0; h < H; ++h) { __VA_ARGS__ }                       \
    }

/* FOR_EACH_RUN_AND_HEAD for a kernel that writes the summary blocks
   (size elements per group) of groups g_lo .. g_hi - 1: the blocks of
   groups without visits are zeroed (when S is not NULL). */
#define FOR_EACH_RUN_AND_HEAD_WRITING(S, size, fetch, ...)                    \
    int64_t next = g_lo;                                                      \
    FOR_EACH_RUN_AND_HEAD(fetch,                                              \
        if (h == 0 && first && S && g > next)                                 \
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
    const int S = SETS(MR * NV);                                              \
    vec_##SUF acc[MAX_ACC] = {0}; /* [S][MR][NV] */                           \
    int64_t k = 0;                                                            \
    for (; k + S <= K; k += S)                                                \
        for (int s = 0; s < S; ++s) {                                         \
            vec_##SUF y[MAX_VECS];                                            \
            for (int v = 0; v < NV; ++v)                                      \
                y[v] = ld_##SUF(M + (k + s) * ldm + vm[v]);                   \
            for (int m = 0; m < MR; ++m) {                                    \
                const T w = a[m][k + s];                                      \
                for (int v = 0; v < NV; ++v)                                  \
                    acc[(s * MR + m) * NV + v] += w * y[v];                   \
            }                                                                 \
        }                                                                     \
    for (; k < K; ++k)                                                        \
        for (int m = 0; m < MR; ++m)                                          \
            for (int v = 0; v < NV; ++v)                                      \
                acc[m * NV + v] += a[m][k] * ld_##SUF(M + k * ldm + vm[v]);   \
    for (int s = 1; s < S; ++s)                                               \
        for (int i = 0; i < MR * NV; ++i) acc[i] += acc[s * MR * NV + i];     \
    for (int m = 0; m < MR; ++m)                                              \
        for (int v = 0; v < NV; ++v) {                                        \
            T *p = o[m] + vx[v];                                              \
            const vec_##SUF sum = acc[m * NV + v];                            \
            st_##SUF(p, add ? ld_##SUF(p) + sum : sum);                       \
        }                                                                     \
}                                                                             \
                                                                              \
/* out[rows[t]][cm] (+)= sum_k a_t[k] M[k, cm] over the mapped columns of a   \
   [K, ldm] block, where a_t = a[rows[t]][:K] or, with the map `ax`, the      \
   row's mapped columns (a_t[ax.vm] = a[rows[t]][ax.vx], whole vectors and    \
   single columns; 1 for k >= kx: the denominator column), gathered into      \
   buf [MAX_ACC, K]; tail holds nscal x K scratch. */                         \
static void contract_run_##SUF(const T *a, int64_t lda, const colmap *ax,     \
                               int64_t kx, const T *M, int64_t K,             \
                               int64_t ldm, const colmap *cm, T *out,         \
                               int64_t ldo, int add, const int64_t *rows,     \
                               int64_t n, T *buf, T *tail) {                  \
    /* tail [nscal, K]: the single columns of M, transposed */                \
    for (int64_t s = 0; s < cm->nscal; ++s)                                   \
        for (int64_t k = 0; k < K; ++k)                                       \
            tail[s * K + k] = M[k * ldm + cm->sm[s]];                         \
    for (int64_t t = 0, mr; t < n; t += mr) {                                 \
        mr = next_rows(cm, n - t);                                            \
        const T *ar[MAX_ACC];                                                 \
        T *orow[MAX_ACC];                                                     \
        for (int m = 0; m < mr; ++m) {                                        \
            const T *x = a + rows[t + m] * lda;                               \
            orow[m] = out + rows[t + m] * ldo;                                \
            if (!ax) { ar[m] = x; continue; }                                 \
            T *y = buf + m * K;                                               \
            for (int64_t v = 0; v < ax->nvec; ++v)                            \
                st_##SUF(y + ax->vm[v], ld_##SUF(x + ax->vx[v]));             \
            for (int64_t s = 0; s < ax->nscal; ++s)                           \
                y[ax->sm[s]] = x[ax->sx[s]];                                  \
            for (int64_t k = kx; k < K; ++k) y[k] = 1;                        \
            ar[m] = y;                                                        \
        }                                                                     \
        for (int64_t v = 0, nv; v < cm->nvec; v += nv) {                      \
            nv = cm->group[v];                                                \
            const int64_t *vm = cm->vm + v, *vx = cm->vx + v;                 \
            DISPATCH_TILE(mr, nv, contract_tile_##SUF, ar, M, ldm, K, orow,   \
                          vm, vx, add)                                        \
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
/* M[k0 + m, vm[v]..] (+)= sum_t a[rows[t]][k0 + m] b[rows[t]][vx[v]..] */    \
INLINE void outer_tile_##SUF(const T *a, int64_t lda, const T *b, int64_t ldb,\
                             const int64_t *rows, int64_t n, T *M,            \
                             int64_t ldm, int64_t k0, const int64_t *vm,      \
                             const int64_t *vx, int add, const int MR,        \
                             const int NV) {                                  \
    const int S = SETS(MR * NV);                                              \
    vec_##SUF acc[MAX_ACC] = {0}; /* [S][MR][NV] */                           \
    int64_t t = 0;                                                            \
    for (; t + S <= n; t += S)                                                \
        for (int s = 0; s < S; ++s) {                                         \
            const T *x = a + rows[t + s] * lda + k0;                          \
            const T *y = b + rows[t + s] * ldb;                               \
            vec_##SUF z[MAX_VECS];                                            \
            for (int v = 0; v < NV; ++v) z[v] = ld_##SUF(y + vx[v]);          \
            for (int m = 0; m < MR; ++m) {                                    \
                const T w = x[m];                                             \
                for (int v = 0; v < NV; ++v)                                  \
                    acc[(s * MR + m) * NV + v] += w * z[v];                   \
            }                                                                 \
        }                                                                     \
    for (; t < n; ++t) {                                                      \
        const T *x = a + rows[t] * lda + k0, *y = b + rows[t] * ldb;          \
        for (int m = 0; m < MR; ++m)                                          \
            for (int v = 0; v < NV; ++v)                                      \
                acc[m * NV + v] += x[m] * ld_##SUF(y + vx[v]);                \
    }                                                                         \
    for (int s = 1; s < S; ++s)                                               \
        for (int i = 0; i < MR * NV; ++i) acc[i] += acc[s * MR * NV + i];     \
    for (int m = 0; m < MR; ++m)                                              \
        for (int v = 0; v < NV; ++v) {                                        \
            T *p = M + (k0 + m) * ldm + vm[v];                                \
            const vec_##SUF sum = acc[m * NV + v];                            \
            st_##SUF(p, add ? ld_##SUF(p) + sum : sum);                       \
        }                                                                     \
}                                                                             \
                                                                              \
/* M[k, j] (+)= sum_t a[rows[t]][k] w_t for k < K, w_t = b[rows[t]][x]        \
   (or 1 when x < 0): one column of a block, vectorised over k, two visits    \
   at a time (independent chains). */                                         \
INLINE void outer_column_##SUF(const T *a, int64_t lda, const T *b,           \
                               int64_t ldb, int64_t x, const int64_t *rows,   \
                               int64_t n, T *M, int64_t K, int64_t ldm,       \
                               int64_t j, int add) {                          \
    for (int64_t k0 = 0; k0 < K; k0 += 4 * W_##SUF) {                         \
        const int64_t nk = MIN(4 * W_##SUF, K - k0), nv = nk / W_##SUF;       \
        vec_##SUF acc[2][4] = {{{0}}};                                        \
        T rest[2][W_##SUF] = {{0}};                                           \
        for (int64_t t = 0; t < n; ++t) {                                     \
            const int s = (int)(t & 1);                                       \
            const T w = x < 0 ? 1 : b[rows[t] * ldb + x];                     \
            const T *p = a + rows[t] * lda + k0;                              \
            for (int64_t v = 0; v < nv; ++v)                                  \
                acc[s][v] += w * ld_##SUF(p + v * W_##SUF);                   \
            for (int64_t k = nv * W_##SUF; k < nk; ++k)                       \
                rest[s][k - nv * W_##SUF] += w * p[k];                        \
        }                                                                     \
        T col[4 * W_##SUF];                                                   \
        for (int64_t v = 0; v < nv; ++v)                                      \
            st_##SUF(col + v * W_##SUF, acc[0][v] + acc[1][v]);               \
        for (int64_t k = nv * W_##SUF; k < nk; ++k)                           \
            col[k] = rest[0][k - nv * W_##SUF] + rest[1][k - nv * W_##SUF];   \
        for (int64_t k = 0; k < nk; ++k) {                                    \
            T *q = M + (k0 + k) * ldm + j;                                    \
            *q = add ? *q + col[k] : col[k];                                  \
        }                                                                     \
    }                                                                         \
}                                                                             \
                                                                              \
/* M[k, cm] (+)= sum_t a[rows[t]][k] b[rows[t]][cm] for a [K, ldm] block,     \
   and M[k, ones] (+)= sum_t a[rows[t]][k] when ones >= 0 (added to with      \
   `add`, else written). */                                                   \
static void outer_run_##SUF(const T *a, int64_t lda, const T *b, int64_t ldb, \
                            const colmap *cm, int64_t ones,                   \
                            const int64_t *r, int64_t len, T *M, int64_t K,   \
                            int64_t ldm, int add) {                           \
    for (int64_t k0 = 0, mr; k0 < K; k0 += mr) {                              \
        mr = next_rows(cm, K - k0);                                           \
        for (int64_t v = 0, nv; v < cm->nvec; v += nv) {                      \
            nv = cm->group[v];                                                \
            const int64_t *vm = cm->vm + v, *vx = cm->vx + v;                 \
            DISPATCH_TILE(mr, nv, outer_tile_##SUF, a, lda, b, ldb, r, len,   \
                          M, ldm, k0, vm, vx, add)                            \
        }                                                                     \
    }                                                                         \
    for (int64_t s = 0; s < cm->nscal; ++s)                                   \
        outer_column_##SUF(a, lda, b, ldb, cm->sx[s], r, len, M, K, ldm,      \
                           cm->sm[s], add);                                   \
    if (ones >= 0)                                                            \
        outer_column_##SUF(a, lda, b, ldb, -1, r, len, M, K, ldm, ones, add); \
}                                                                             \
/* S[g, h] = sum over the group's visits of a[row, h] [b[row, h, src], 1]^T  \
   for groups g_lo .. g_hi - 1 (0 without visits). */                       \
int outer_sum_##SUF(const T *a, const T *b, const int64_t *rows,              \
                    const int64_t *groups, const int64_t *src, T *S,          \
                    int64_t E, int64_t H, int64_t R, int64_t C, int64_t ldb,  \
                    int64_t hb, int64_t ones, int64_t g_lo, int64_t g_hi) {   \
    colmap cm = {0};                                                          \
    if (colmap_build(&cm, src, C - ones, W_##SUF)) return -1;                 \
    const rowspec fetch[] = {{a, sizeof(T) * H * R, sizeof(T) * H * R},       \
                             {b, sizeof(T) * ldb, sizeof(T) * ldb}};          \
    FOR_EACH_RUN_AND_HEAD_WRITING(S, H * R * C, fetch,                        \
        outer_run_##SUF(a + h * R, H * R, b + h * hb, ldb, &cm,               \
                        ones ? C - 1 : -1, rows + t, n,                       \
                        S + (g * H + h) * R * C, R, C, !first);)              \
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
    const rowspec fetch[] = {                                                 \
        {q, sizeof(T) * H * R, sizeof(T) * H * R},                            \
        {out, sizeof(T) * H * Cout, sizeof(T) * H * Cout}};                   \
    FOR_EACH_RUN_AND_HEAD(fetch,                                              \
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
int contract_backward_##SUF(                                                  \
        const T *q, const T *S, const T *grad, const int64_t *rows,           \
        const int64_t *groups, const int64_t *src, T *grad_q, T *grad_S,      \
        int64_t E, int64_t H, int64_t R, int64_t C, int64_t Cout, int64_t add,\
        int64_t g_lo, int64_t g_hi) {                                         \
    colmap cm = {0}, all_r = {0};                                             \
    T *scratch = malloc(sizeof(T) * (2 * R * Cout + 1));                      \
    if (!scratch || colmap_build(&cm, src, Cout, W_##SUF) ||                  \
            colmap_build(&all_r, NULL, R, W_##SUF)) {                         \
        free(scratch); free(cm.vm);                                           \
        return -1;                                                            \
    }                                                                         \
    const colmap read = colmap_swapped(&cm);                                  \
    T *const fresh = add & 2 ? (T *)0 : grad_S; /* blocks written */          \
    const rowspec fetch[] = {                                                 \
        {q, sizeof(T) * H * R, sizeof(T) * H * R},                            \
        {grad, sizeof(T) * H * Cout, sizeof(T) * H * Cout},                   \
        {grad_q, sizeof(T) * H * R, sizeof(T) * H * R}};                      \
    FOR_EACH_RUN_AND_HEAD_WRITING(fresh, H * R * C, fetch,                    \
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
                            (add & 2) || !first);)                            \
    free(scratch); free(cm.vm); free(all_r.vm);                               \
    return 0;                                                                 \
}                                                                             \
                                                                              \
/* Backward of outer_sum, accumulated into grad_a / grad_b (laid out as a    \
   and b; each skipped when NULL): grad_a[row] += grad_S[g] [b[row, src], 1] \
   and grad_b[row, src] += grad_S[g, :, :C'] ^T a[row]. */                    \
int outer_sum_backward_##SUF(                                                 \
        const T *a, const T *b, const T *grad_S, const int64_t *rows,         \
        const int64_t *groups, const int64_t *src, T *grad_a, T *grad_b,      \
        int64_t E, int64_t H, int64_t R, int64_t C, int64_t ldb, int64_t hb,  \
        int64_t ones) {                                                       \
    const int64_t Cb = C - ones;                                              \
    colmap to_b = {0}, all_r = {0};                                           \
    /* transposed block [C, R], tail [<= R C], gathered rows [MAX_ACC, C] */  \
    T *scratch = malloc(sizeof(T) * (2 * R * C + MAX_ACC * C + 1));           \
    if (!scratch || colmap_build(&to_b, src, Cb, W_##SUF) ||                  \
            colmap_build(&all_r, NULL, R, W_##SUF)) {                         \
        free(scratch); free(to_b.vm);                                         \
        return -1;                                                            \
    }                                                                         \
    const rowspec fetch[] = {{a, sizeof(T) * H * R, sizeof(T) * H * R},       \
                             {b, sizeof(T) * ldb, sizeof(T) * ldb},           \
                             {grad_a, sizeof(T) * H * R, sizeof(T) * H * R},  \
                             {grad_b, sizeof(T) * ldb, sizeof(T) * ldb}};     \
    FOR_EACH_RUN_AND_HEAD(fetch,                                              \
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

DEFINE_KERNELS(float, f32)
DEFINE_KERNELS(double, f64)
