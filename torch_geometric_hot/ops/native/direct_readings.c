/*
 * Readings of small key groups computed directly from their keys: for a
 * query row i of group g and head h,
 *     o_i = sum_{j in g} (q_i . k_j) [v_j, 1]
 * which is q_i^T S_g of kernel_attention.c without the summary S_g. A
 * group of n keys costs n (R + C) per query instead of R C per key and
 * per query plus the [R, C] block's stores and transposes: cheaper while
 * n is small (at most KEY_VECS vectors of keys here: 32 floats, 16 doubles).
 *
 * Per group and head, the group's keys are gathered once into cache-
 * resident panels (keys transposed [R, NK], keys [NK, RP], values
 * [NK, CP] and transposed [C, NK]; RP, CP: whole vectors), then every
 * query of every reading of the group is one pass over them: the n
 * weights q_i . k_j as NK-lane vectors, then their products with the
 * values, vectorised over the value columns (a reading stores the columns
 * it reads). The backward pass recomputes the weights and, a chunk of
 * queries at a time, accumulates the group's key and value gradients in
 * transposed panels (register blocks over the chunk), added to the
 * gradient rows once per group and head. A group of at most
 * ROW_LAYOUT_KEYS keys (a node's row or column in a sparse graph) would
 * leave most lanes of those panels empty: its weights are dot products
 * over the features instead, its panels and gradient blocks rows [n, R]
 * and [n, C], and a reading's selected columns are handled as runs of
 * consecutive columns. While a group runs, the rows of the next one are
 * prefetched a share at each of its heads and readings (a whole group's
 * lines issued at once stall the core until most have arrived, which
 * hides nothing). Lanes and rows past a group's n keys hold stale data
 * that no result reads. Groups (and so the rows
 * they write) are distinct, so a caller may split the list of groups
 * across threads.
 *
 * Keys and queries are [.., H, R] rows (row stride H R); the pool's value
 * column c of head h of data row x is v[x * ldv + h * hb + src[c]], and a
 * reading reads columns sel[0, nsel) of them. Readings and their
 * gradients are [rows, H, nsel + 1] (the last column: the denominator).
 * Plain C11 with GCC vector extensions; compiled with the other kernels by
 * torch_geometric_hot.ops.native. Functions that allocate scratch return
 * -1 when that fails, else 0.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define DV_BYTES 32
#define INLINE_D static inline __attribute__((always_inline))
/* Vectors of keys a group may have (its weights stay in registers). */
#define KEY_VECS 4
/* Partial sums (vectors) a dot product over the features keeps. */
#define ACC_VECS 4
/* Groups of at most this many keys are read, forward and backward, in row
   layout (small_group_read, small_group_backward): a transposed panel
   would leave most lanes of its vectors empty. */
#define ROW_LAYOUT_KEYS 4
/* What panels_fill fills: keys transposed, keys, values, values
   transposed. */
enum { PANEL_KT = 1, PANEL_K = 2, PANEL_V = 4, PANEL_VT = 8 };
/* Vectors of columns accumulated at once. */
#define COL_VECS 4
/* Queries whose weights the backward pass holds at once. */
#define CHUNK 64
/* Queries ahead (in a group's list) whose rows are prefetched, whole (all
   heads) during the first head's pass: they lie all over their tensors, and
   their loads would otherwise wait on memory. The next group's first
   queries are fetched with its keys. */
#define QUERY_AHEAD 6
/* Calls F(..., NW) with NW = n (1 for 0, 4 for more) a compile-time
   constant. */
#define WITH_NW(n, F, ...)                                                    \
    switch (n) {                                                              \
    case 0: case 1: F(__VA_ARGS__, 1); break;                                 \
    case 2: F(__VA_ARGS__, 2); break;                                         \
    case 3: F(__VA_ARGS__, 3); break;                                         \
    default: F(__VA_ARGS__, 4); break;                                        \
    }
/* Prefetches the n elements from p (RW: 1 when they will be written). */
#define FETCH_SPAN(p, n, RW)                                                  \
    do {                                                                      \
        const char *s_ = (const char *)(p);                                   \
        const int64_t b_ = (int64_t)sizeof(*(p)) * (n);                       \
        for (int64_t o_ = 0; o_ < b_; o_ += 64)                               \
            __builtin_prefetch(s_ + o_, RW);                                  \
        __builtin_prefetch(s_ + b_ - 1, RW);                                  \
    } while (0)
/* Most cache lines a call queues for prefetching at once (those past it are
   prefetched as they are queued). */
#define FETCH_QUEUE 4096

/* The cache lines of the next group, prefetched a share at a time while the
   current group runs: issued at once, a group's hundreds of lines would
   hold up the core until most of them had arrived. */
typedef struct {
    const char **line;
    int64_t count, issued;
} fetch_queue;

static void queue_fetches(fetch_queue *f, const void *p, int64_t bytes) {
    for (int64_t b = 0; b < bytes; b += 64) {
        if (f->count < FETCH_QUEUE) f->line[f->count++] = (const char *)p + b;
        else __builtin_prefetch((const char *)p + b);
    }
}

/* Issues the next n queued prefetches. */
static inline void issue_fetches(fetch_queue *f, int64_t n) {
    for (; n > 0 && f->issued < f->count; --n)
        __builtin_prefetch(f->line[f->issued++]);
}

/* Issues what is left, then empties the queue. */
static void restart_fetches(fetch_queue *f) {
    issue_fetches(f, f->count);
    f->count = f->issued = 0;
}

/* The runs of the columns cols[0, n) (a pool's sources in a values row, or
   a reading's selection of the pool's columns): (position in cols, column,
   length) of every stretch of consecutive columns, into runs [n, 3]; their
   number. */
static int64_t column_runs(const int64_t *cols, int64_t n, int64_t *runs) {
    int64_t count = 0;
    for (int64_t c = 0; c < n; ++c) {
        int64_t *run = runs + 3 * (count - 1);
        if (count && cols[c] == run[1] + run[2]) { ++run[2]; continue; }
        run += 3; run[0] = c; run[1] = cols[c]; run[2] = 1; ++count;
    }
    return count;
}

/* The span [lo, hi) of the columns cols[0, n) (a pool's sources in a values
   row, or a reading's selection of the pool's columns); whether they are
   that span, in order. */
static int column_span(const int64_t *cols, int64_t n, int64_t *lo,
                       int64_t *hi) {
    *lo = n ? cols[0] : 0; *hi = *lo;
    int in_order = 1;
    for (int64_t c = 0; c < n; ++c) {
        if (cols[c] < *lo) *lo = cols[c];
        if (cols[c] + 1 > *hi) *hi = cols[c] + 1;
        in_order &= cols[c] == cols[0] + c;
    }
    return in_order;
}

#define DEFINE_DIRECT(T, SUF)                                                 \
typedef T dvec_##SUF __attribute__((vector_size(DV_BYTES), aligned(sizeof(T))));\
enum { DW_##SUF = DV_BYTES / sizeof(T), NK_##SUF = KEY_VECS * DW_##SUF };     \
                                                                              \
INLINE_D dvec_##SUF dld_##SUF(const T *p) { return *(const dvec_##SUF *)p; } \
INLINE_D void dst_##SUF(T *p, dvec_##SUF x) { *(dvec_##SUF *)p = x; }        \
                                                                              \
/* Queues for prefetching the key rows of group g (of k and v, and of their \
   gradients gk, gv when not NULL) and the rows of its first QUERY_AHEAD    \
   queries in each of the nr readings (of its queries q[r], of gq[r] when   \
   gq and it are not NULL, and their output or gradient rows; the loop over \
   the queries fetches the others). */                                       \
static void fetch_group_##SUF(                                                \
        fetch_queue *f, const T *k, const T *v, const T *gk, const T *gv,     \
        const T *const *q, T *const *gq, const int64_t *key_rows,             \
        const int64_t *key_ptr, int64_t g, const int64_t *const *query_rows,  \
        const int64_t *const *query_ptr, const int64_t *nsel,                 \
        T *const *data, int64_t nr, int64_t H, int64_t R, int64_t ldv,        \
        int64_t v_lo, int64_t v_hi) {                                         \
    const int64_t span = sizeof(T) * (v_hi - v_lo);                          \
    for (int64_t t = key_ptr[g]; t < key_ptr[g + 1]; ++t) {                   \
        const int64_t x = key_rows[t];                                        \
        queue_fetches(f, k + x * H * R, sizeof(T) * H * R);                   \
        queue_fetches(f, v + x * ldv + v_lo, span);                           \
        if (gk) queue_fetches(f, gk + x * H * R, sizeof(T) * H * R);          \
        if (gv) queue_fetches(f, gv + x * ldv + v_lo, span);                  \
    }                                                                         \
    for (int64_t r = 0; r < nr; ++r)                                          \
        for (int64_t t = query_ptr[r][g]; t < query_ptr[r][g + 1] &&          \
             t < query_ptr[r][g] + QUERY_AHEAD; ++t) {                        \
            const int64_t i = query_rows[r][t];                               \
            queue_fetches(f, q[r] + i * H * R, sizeof(T) * H * R);            \
            if (gq && gq[r])                                                  \
                queue_fetches(f, gq[r] + i * H * R, sizeof(T) * H * R);       \
            if (data[r])                                                      \
                queue_fetches(f, data[r] + i * H * (nsel[r] + 1),             \
                            sizeof(T) * H * (nsel[r] + 1));                   \
        }                                                                     \
}                                                                             \
                                                                              \
/* The largest group the direct readings take. */                            \
int64_t direct_max_keys_##SUF(void) { return NK_##SUF; }                     \
                                                                              \
/* The panels of one group and head, and the scratch of its queries. */      \
typedef struct {                                                              \
    T *kt, *k, *v, *vt; /* [R, NK], [NK, RP], [NK, CP], [C, NK] */            \
    T *lanes, *gk, *gv; /* [max(RP, CP) + slack], [R, NK], [C, NK] */         \
    T *w, *a;           /* [CHUNK, NK] each: weights, their gradients */      \
    int64_t rp, cp;                                                           \
    int64_t v_lo, v_hi; /* the span of a values row the columns cover */      \
    int64_t *runs, nruns; /* [nruns, 3]: column, source, length */           \
    fetch_queue fetches;  /* the next group's cache lines */                 \
} panels_##SUF;                                                               \
                                                                              \
static int panels_alloc_##SUF(panels_##SUF *p, int64_t R, int64_t C,        \
                               const int64_t *src, int64_t H, int64_t hb) {   \
    const int64_t nk = NK_##SUF;                                              \
    column_span(src, C, &p->v_lo, &p->v_hi);                                  \
    p->v_hi += (H - 1) * hb; /* the columns of all H heads */                 \
    p->rp = (R + DW_##SUF - 1) / DW_##SUF * DW_##SUF;                         \
    p->cp = (C + DW_##SUF - 1) / DW_##SUF * DW_##SUF;                         \
    const int64_t lanes = (p->rp > p->cp ? p->rp : p->cp) +                   \
        COL_VECS * DW_##SUF;                                                  \
    /* (slack at the end: a block of columns may read past a panel) */       \
    T *buf = calloc(nk * (2 * R + p->rp + p->cp + 2 * C + 2 * CHUNK) +       \
                    2 * lanes, sizeof(T));                                    \
    if (!buf) return -1;                                                      \
    p->kt = buf; p->k = p->kt + nk * R; p->v = p->k + nk * p->rp;             \
    p->vt = p->v + nk * p->cp; p->gk = p->vt + nk * C;                        \
    p->gv = p->gk + nk * R; p->w = p->gv + nk * C; p->a = p->w + nk * CHUNK;  \
    p->lanes = p->a + nk * CHUNK;                                             \
    /* the columns as runs of consecutive sources, copied whole */           \
    p->runs = malloc(sizeof(int64_t) * 3 * (C > 0 ? C : 1));                  \
    p->fetches.line = malloc(sizeof(const char *) * FETCH_QUEUE);             \
    p->fetches.count = p->fetches.issued = 0;                                 \
    if (!p->runs || !p->fetches.line) {                                       \
        free(buf); free(p->runs); free(p->fetches.line); return -1;           \
    }                                                                         \
    p->nruns = column_runs(src, C, p->runs);                                  \
    return 0;                                                                 \
}                                                                             \
                                                                              \
static void panels_free_##SUF(panels_##SUF *p) {                             \
    free(p->kt);                                                              \
    free(p->runs);                                                            \
    free(p->fetches.line);                                                    \
}                                                                             \
                                                                              \
/* The panels of group g's keys kr[0, n) for head h that `what` names     \
   (PANEL_* bits). */                                                        \
static void panels_fill_##SUF(panels_##SUF *p, const T *k, const T *v,       \
                              const int64_t *kr, int64_t n, int64_t h,        \
                              int64_t H, int64_t R, int64_t C,                \
                              const int64_t *src, int64_t ldv, int64_t hb,    \
                              int what) {                                     \
    for (int64_t j = 0; j < n; ++j) {                                         \
        const T *kj = k + (kr[j] * H + h) * R;                                \
        const T *vj = v + kr[j] * ldv + h * hb;                               \
        if (what & PANEL_KT)                                                  \
            for (int64_t r = 0; r < R; ++r) p->kt[r * NK_##SUF + j] = kj[r];  \
        if (what & PANEL_K) memcpy(p->k + j * p->rp, kj, sizeof(T) * R);      \
        if (what & PANEL_V)                                                   \
            for (int64_t u = 0; u < p->nruns; ++u) {                          \
                const int64_t *run = p->runs + 3 * u;                         \
                memcpy(p->v + j * p->cp + run[0], vj + run[1],                \
                       sizeof(T) * run[2]);                                   \
            }                                                                 \
        if (what & PANEL_VT)                                                  \
            for (int64_t c = 0; c < C; ++c)                                   \
                p->vt[c * NK_##SUF + j] = vj[src[c]];                         \
    }                                                                         \
}                                                                             \
                                                                              \
/* a[0, len) . b[0, len) (any alignment). */                                 \
INLINE_D T dot_##SUF(const T *a, const T *b, int64_t len) {                  \
    dvec_##SUF s0 = {0}, s1 = {0};                                            \
    int64_t i = 0;                                                            \
    for (; i + 2 * DW_##SUF <= len; i += 2 * DW_##SUF) {                      \
        s0 += dld_##SUF(a + i) * dld_##SUF(b + i);                            \
        s1 += dld_##SUF(a + i + DW_##SUF) * dld_##SUF(b + i + DW_##SUF);      \
    }                                                                         \
    if (i + DW_##SUF <= len) {                                                \
        s0 += dld_##SUF(a + i) * dld_##SUF(b + i);                            \
        i += DW_##SUF;                                                        \
    }                                                                         \
    s0 += s1;                                                                 \
    T out = 0;                                                                \
    for (int l = 0; l < DW_##SUF; ++l) out += s0[l];                          \
    for (; i < len; ++i) out += a[i] * b[i];                                  \
    return out;                                                               \
}                                                                             \
                                                                              \
/* y[0, len) += alpha x[0, len) (any alignment). */                          \
INLINE_D void axpy_##SUF(T *y, T alpha, const T *x, int64_t len) {           \
    int64_t i = 0;                                                            \
    for (; i + DW_##SUF <= len; i += DW_##SUF)                                \
        dst_##SUF(y + i, dld_##SUF(y + i) + alpha * dld_##SUF(x + i));        \
    for (; i < len; ++i) y[i] += alpha * x[i];                                \
}                                                                             \
                                                                              \
/* w[0, NW) = sum_r qi[r] kt[r, :] (the weights of the group's keys), in   \
   ACC_VECS / NW interleaved partial sums over r: one sum's chain of R      \
   dependent multiply-adds would wait on each add's latency. */              \
INLINE_D void weights_##SUF(const T *qi, const T *kt, int64_t R,             \
                            dvec_##SUF *w, const int NW) {                    \
    const int U = NW >= ACC_VECS ? 1 : ACC_VECS / NW;                         \
    dvec_##SUF s[ACC_VECS][KEY_VECS];                                         \
    for (int u = 0; u < U; ++u)                                               \
        for (int v = 0; v < NW; ++v) s[u][v] = (dvec_##SUF){0};              \
    int64_t r = 0;                                                            \
    for (; r + U <= R; r += U)                                                \
        for (int u = 0; u < U; ++u) {                                         \
            const T a = qi[r + u];                                            \
            for (int v = 0; v < NW; ++v)                                      \
                s[u][v] += a * dld_##SUF(kt + (r + u) * NK_##SUF +            \
                                         v * DW_##SUF);                       \
        }                                                                     \
    for (; r < R; ++r)                                                        \
        for (int v = 0; v < NW; ++v)                                          \
            s[0][v] += qi[r] * dld_##SUF(kt + r * NK_##SUF + v * DW_##SUF);   \
    for (int v = 0; v < NW; ++v) {                                            \
        w[v] = s[0][v];                                                       \
        for (int u = 1; u < U; ++u) w[v] += s[u][v];                          \
    }                                                                         \
}                                                                             \
                                                                              \
/* lanes[c0 + c] = sum_{j < n} wj[j] m[j, c0 + c] for the NV vectors from  \
   column c0 (m: rows ldm apart in a panel). */                              \
INLINE_D void weighted_block_##SUF(const T *wj, const T *m, int64_t ldm,     \
                                   int64_t n, int64_t c0, T *lanes,           \
                                   const int NV) {                            \
    dvec_##SUF acc[COL_VECS] = {{0}};                                         \
    for (int64_t j = 0; j < n; ++j) {                                         \
        const T b = wj[j];                                                    \
        for (int v = 0; v < NV; ++v)                                          \
            acc[v] += b * dld_##SUF(m + j * ldm + c0 + v * DW_##SUF);         \
    }                                                                         \
    for (int v = 0; v < NV; ++v)                                              \
        dst_##SUF(lanes + c0 + v * DW_##SUF, acc[v]);                         \
}                                                                             \
                                                                              \
/* lanes[c] = sum_{j < n} wj[j] m[j, c] for c < C (and the lanes past it in \
   C's last vector), in blocks of at most COL_VECS vectors. */               \
INLINE_D void weighted_rows_##SUF(const T *wj, const T *m, int64_t ldm,      \
                                  int64_t n, int64_t C, T *lanes) {           \
    for (int64_t c0 = 0; c0 < C; c0 += COL_VECS * DW_##SUF) {                 \
        WITH_NW((C - c0 + DW_##SUF - 1) / DW_##SUF, weighted_block_##SUF, wj, \
                m, ldm, n, c0, lanes)                                         \
    }                                                                         \
}                                                                             \
                                                                              \
/* The readings of one reading's queries rows[0, m) of a group of n <=     \
   ROW_LAYOUT_KEYS keys (panels p->k, p->v filled), head h, in row layout:   \
   the weights q . k_j as dot products, then each run of the selection as   \
   the weighted sum of the keys' value rows. */                              \
static void small_group_read_##SUF(const panels_##SUF *p, const T *q,        \
                                   const int64_t *rows, int64_t m,            \
                                   const int64_t *runs, int64_t nruns,        \
                                   int64_t nsel, T *out, int64_t n,           \
                                   int64_t h, int64_t H, int64_t R) {         \
    for (int64_t t = 0; t < m; ++t) {                                         \
        const int64_t i = rows[t] * H + h;                                    \
        if (h == 0 && t + QUERY_AHEAD < m) {                                  \
            const int64_t f = rows[t + QUERY_AHEAD] * H;                      \
            FETCH_SPAN(q + f * R, H * R, 0);                                  \
            FETCH_SPAN(out + f * (nsel + 1), H * (nsel + 1), 1);              \
        }                                                                     \
        const T *qi = q + i * R;                                              \
        T *o = out + i * (nsel + 1), w[ROW_LAYOUT_KEYS], den = 0;             \
        for (int64_t j = 0; j < n; ++j)                                       \
            den += w[j] = dot_##SUF(qi, p->k + j * p->rp, R);                 \
        memset(o, 0, sizeof(T) * nsel);                                       \
        for (int64_t j = 0; j < n; ++j)                                       \
            for (int64_t u = 0; u < nruns; ++u) {                             \
                const int64_t *run = runs + 3 * u;                            \
                axpy_##SUF(o + run[0], w[j], p->v + j * p->cp + run[1],       \
                           run[2]);                                           \
            }                                                                 \
        o[nsel] = den;                                                        \
    }                                                                         \
}                                                                             \
                                                                              \
/* The readings of one reading's queries of group g, head h (the weighted  \
   sums of the span [lo, hi) of columns its selection covers only; with    \
   in_order, the selection is that span). */                                \
INLINE_D void read_group_##SUF(const panels_##SUF *p, const T *q,            \
                               const int64_t *rows, int64_t m,                \
                               const int64_t *sel, int64_t nsel, int64_t lo,  \
                               int64_t hi, int in_order, T *out, int64_t n,   \
                               int64_t h, int64_t H, int64_t R,               \
                               const int NW) {                                \
    for (int64_t t = 0; t < m; ++t) {                                         \
        if (h == 0 && t + QUERY_AHEAD < m) {                                  \
            const int64_t f = rows[t + QUERY_AHEAD] * H;                      \
            FETCH_SPAN(q + f * R, H * R, 0);                                  \
            FETCH_SPAN(out + f * (nsel + 1), H * (nsel + 1), 1);              \
        }                                                                     \
        dvec_##SUF w[KEY_VECS];                                               \
        weights_##SUF(q + (rows[t] * H + h) * R, p->kt, R, w, NW);           \
        T wj[NK_##SUF], den = 0;                                              \
        for (int v = 0; v < NW; ++v) dst_##SUF(wj + v * DW_##SUF, w[v]);      \
        for (int64_t j = 0; j < n; ++j) den += wj[j];                         \
        weighted_rows_##SUF(wj, p->v + lo, p->cp, n, hi - lo, p->lanes + lo); \
        T *o = out + (rows[t] * H + h) * (nsel + 1);                          \
        if (in_order)                                                         \
            memcpy(o, p->lanes + lo, sizeof(T) * nsel);                       \
        else                                                                  \
            for (int64_t c = 0; c < nsel; ++c) o[c] = p->lanes[sel[c]];       \
        o[nsel] = den;                                                        \
    }                                                                         \
}                                                                             \
                                                                              \
/* Readings out[r] [rows, H, nsel[r] + 1] of the queries of groups[0, ng)   \
   for nr readings: group g has keys key_rows[key_ptr[g] .. key_ptr[g + 1])  \
   (at most NK) and, in reading r, the rows                                  \
   query_rows[r][query_ptr[r][g] .. query_ptr[r][g + 1]) of its queries     \
   q[r] [rows, H, R] (each reading its own). */                              \
int direct_read_##SUF(                                                        \
        const T *k, const T *v, const T *const *q, const int64_t *key_rows,   \
        const int64_t *key_ptr, const int64_t *groups, const int64_t *src,    \
        const int64_t *const *query_rows, const int64_t *const *query_ptr,    \
        const int64_t *const *sel, const int64_t *nsel, T *const *out,        \
        int64_t ng, int64_t nr, int64_t H, int64_t R, int64_t C, int64_t ldv, \
        int64_t hb) {                                                         \
    panels_##SUF p;                                                           \
    if (panels_alloc_##SUF(&p, R, C, src, H, hb)) return -1;                  \
    int64_t total = 0;                                                        \
    for (int64_t r = 0; r < nr; ++r) total += nsel[r];                        \
    int64_t *span = malloc(sizeof(int64_t) * 4 * (nr > 0 ? nr : 1));          \
    int64_t *runs = malloc(sizeof(int64_t) * 3 * (total > 0 ? total : 1));    \
    if (!span || !runs) {                                                     \
        free(span); free(runs); panels_free_##SUF(&p); return -1;             \
    }                                                                         \
    for (int64_t r = 0, at = 0; r < nr; at += 3 * nsel[r++]) {                \
        span[4 * r + 2] = column_span(sel[r], nsel[r], span + 4 * r,          \
                                      span + 4 * r + 1);                      \
        span[4 * r + 3] = column_runs(sel[r], nsel[r], runs + at);            \
    }                                                                         \
    for (int64_t i = 0; i < ng; ++i) {                                        \
        const int64_t g = groups[i], n = key_ptr[g + 1] - key_ptr[g];         \
        const int nw = (int)((n + DW_##SUF - 1) / DW_##SUF);                  \
        restart_fetches(&p.fetches);                                          \
        if (i + 1 < ng)                                                       \
            fetch_group_##SUF(&p.fetches, k, v, NULL, NULL, q, NULL, key_rows,\
                              key_ptr, groups[i + 1], query_rows, query_ptr,  \
                              nsel, out, nr, H, R, ldv, p.v_lo, p.v_hi);      \
        const int64_t share = p.fetches.count / (H * nr + 1) + 1;            \
        if (n <= ROW_LAYOUT_KEYS) {                                           \
            for (int64_t h = 0; h < H; ++h) {                                 \
                panels_fill_##SUF(&p, k, v, key_rows + key_ptr[g], n, h, H, R,\
                                  C, src, ldv, hb, PANEL_K | PANEL_V);        \
                for (int64_t r = 0, at = 0; r < nr; at += 3 * nsel[r++]) {    \
                    issue_fetches(&p.fetches, share);                         \
                    small_group_read_##SUF(                                   \
                        &p, q[r], query_rows[r] + query_ptr[r][g],            \
                        query_ptr[r][g + 1] - query_ptr[r][g], runs + at,     \
                        span[4 * r + 3], nsel[r], out[r], n, h, H, R);        \
                }                                                             \
            }                                                                 \
            continue;                                                         \
        }                                                                     \
        for (int64_t h = 0; h < H; ++h) {                                     \
            panels_fill_##SUF(&p, k, v, key_rows + key_ptr[g], n, h, H, R, C, \
                              src, ldv, hb, PANEL_KT | PANEL_V);              \
            for (int64_t r = 0; r < nr; ++r) {                                \
                issue_fetches(&p.fetches, share);                             \
                const int64_t *rows = query_rows[r] + query_ptr[r][g];        \
                const int64_t m = query_ptr[r][g + 1] - query_ptr[r][g];      \
                WITH_NW(nw, read_group_##SUF, &p, q[r], rows, m, sel[r],      \
                        nsel[r], span[4 * r], span[4 * r + 1],                \
                        (int)span[4 * r + 2], out[r], n, h, H, R)             \
            }                                                                 \
        }                                                                     \
    }                                                                         \
    free(span);                                                               \
    free(runs);                                                               \
    panels_free_##SUF(&p);                                                    \
    return 0;                                                                 \
}                                                                             \
                                                                              \
/* acc[x, :] += sum_t coef[t][x] rows[t, :] for x < X over the chunk's m     \
   queries (coef[t]: row t's coefficients, rows: [m, NK]): the transposed   \
   gradient panel of keys (coef: queries, rows: weight gradients) or of     \
   values (coef: reading gradients, rows: weights). */                       \
INLINE_D void accumulate_##SUF(T *acc, int64_t X, const int64_t *index,      \
                               const T *const *coef, const T *rows,           \
                               int64_t m, const int NW) {                     \
    for (int64_t x = 0; x < X; ++x) {                                         \
        T *target = acc + (index ? index[x] : x) * NK_##SUF;                  \
        dvec_##SUF s[KEY_VECS];                                               \
        for (int v = 0; v < NW; ++v) s[v] = dld_##SUF(target + v * DW_##SUF); \
        for (int64_t t = 0; t < m; ++t) {                                     \
            const T c = coef[t][x];                                           \
            for (int v = 0; v < NW; ++v)                                      \
                s[v] += c * dld_##SUF(rows + t * NK_##SUF + v * DW_##SUF);    \
        }                                                                     \
        for (int v = 0; v < NW; ++v) dst_##SUF(target + v * DW_##SUF, s[v]);  \
    }                                                                         \
}                                                                             \
                                                                              \
/* One reading's queries of group g, head h, in the backward pass: adds to  \
   grad_q and to the group's panels p->gk, p->gv. */                         \
INLINE_D void read_group_backward_##SUF(                                      \
        panels_##SUF *p, const T *q, const T *grad, const int64_t *rows,      \
        int64_t m, const int64_t *sel, int64_t nsel, int64_t n, int64_t h,    \
        int64_t H, int64_t R, T *grad_q, int need_k, int need_v,             \
        const int NW) {                                                       \
    for (int64_t t0 = 0; t0 < m; t0 += CHUNK) {                               \
        const int64_t mc = m - t0 < CHUNK ? m - t0 : CHUNK;                   \
        const T *qs[CHUNK], *gs[CHUNK];                                       \
        for (int64_t t = 0; t < mc; ++t) {                                    \
            if (h == 0 && t0 + t + QUERY_AHEAD < m) {                         \
                const int64_t f = rows[t0 + t + QUERY_AHEAD] * H;             \
                FETCH_SPAN(q + f * R, H * R, 0);                              \
                FETCH_SPAN(grad + f * (nsel + 1), H * (nsel + 1), 0);         \
                if (grad_q) FETCH_SPAN(grad_q + f * R, H * R, 1);             \
            }                                                                 \
            const int64_t i = rows[t0 + t] * H + h;                           \
            const T *go = gs[t] = grad + i * (nsel + 1);                      \
            qs[t] = q + i * R;                                                \
            /* a_j = go . [v_j, 1] = dL/dw_j */                               \
            dvec_##SUF a[KEY_VECS];                                           \
            for (int v = 0; v < NW; ++v) a[v] = (dvec_##SUF){0} + go[nsel];   \
            for (int64_t c = 0; c < nsel; ++c)                                \
                for (int v = 0; v < NW; ++v)                                  \
                    a[v] += go[c] * dld_##SUF(p->vt + sel[c] * NK_##SUF +     \
                                              v * DW_##SUF);                  \
            for (int v = 0; v < NW; ++v)                                      \
                dst_##SUF(p->a + t * NK_##SUF + v * DW_##SUF, a[v]);          \
            if (need_v) {                                                     \
                dvec_##SUF w[KEY_VECS];                                       \
                weights_##SUF(qs[t], p->kt, R, w, NW);                        \
                for (int v = 0; v < NW; ++v)                                  \
                    dst_##SUF(p->w + t * NK_##SUF + v * DW_##SUF, w[v]);      \
            }                                                                 \
            if (grad_q) {                                                     \
                weighted_rows_##SUF(p->a + t * NK_##SUF, p->k, p->rp, n, R,   \
                                    p->lanes);                                \
                T *gq = grad_q + i * R;                                       \
                for (int64_t r = 0; r < R; ++r) gq[r] += p->lanes[r];         \
            }                                                                 \
        }                                                                     \
        if (need_k) accumulate_##SUF(p->gk, R, NULL, qs, p->a, mc, NW);       \
        if (need_v) accumulate_##SUF(p->gv, nsel, sel, gs, p->w, mc, NW);     \
    }                                                                         \
}                                                                             \
                                                                              \
/* Backward of one reading's queries rows[0, m) of a group of n <=          \
   ROW_LAYOUT_KEYS keys (panels p->k, p->v filled), head h, in row layout:   \
   per query, the weights q . k_j and their gradients a_j = go . [v_j, 1]   \
   as dot products, then grad_q += sum_j a_j k_j, and the rows gk[j] +=     \
   a_j q and gv[j] += w_j go (at the selected columns) of the group's key   \
   and value gradients (gk [n, R], gv [n, C]). */                            \
static void small_group_backward_##SUF(                                      \
        const panels_##SUF *p, const T *q, const T *grad,                     \
        const int64_t *rows, int64_t m, const int64_t *runs, int64_t nruns,   \
        int64_t nsel, int64_t n, int64_t h, int64_t H, int64_t R, int64_t C,  \
        T *grad_q, T *gk, T *gv) {                                            \
    for (int64_t t = 0; t < m; ++t) {                                         \
        const int64_t i = rows[t] * H + h;                                    \
        if (h == 0 && t + QUERY_AHEAD < m) {                                  \
            const int64_t f = rows[t + QUERY_AHEAD] * H;                      \
            FETCH_SPAN(q + f * R, H * R, 0);                                  \
            FETCH_SPAN(grad + f * (nsel + 1), H * (nsel + 1), 0);             \
            if (grad_q) FETCH_SPAN(grad_q + f * R, H * R, 1);                 \
        }                                                                     \
        const T *qi = q + i * R, *go = grad + i * (nsel + 1);                 \
        T w[ROW_LAYOUT_KEYS], a[ROW_LAYOUT_KEYS];                             \
        for (int64_t j = 0; j < n; ++j) {                                     \
            const T *vj = p->v + j * p->cp;                                   \
            T s = go[nsel];                                                   \
            for (int64_t u = 0; u < nruns; ++u) {                             \
                const int64_t *run = runs + 3 * u;                            \
                s += dot_##SUF(go + run[0], vj + run[1], run[2]);             \
            }                                                                 \
            a[j] = s;                                                         \
            if (gv) w[j] = dot_##SUF(qi, p->k + j * p->rp, R);                \
        }                                                                     \
        for (int64_t j = 0; j < n; ++j) {                                     \
            if (grad_q) axpy_##SUF(grad_q + i * R, a[j], p->k + j * p->rp, R);\
            if (gk) axpy_##SUF(gk + j * R, a[j], qi, R);                      \
            if (gv)                                                           \
                for (int64_t u = 0; u < nruns; ++u) {                         \
                    const int64_t *run = runs + 3 * u;                        \
                    axpy_##SUF(gv + j * C + run[1], w[j], go + run[0],        \
                               run[2]);                                       \
                }                                                             \
        }                                                                     \
    }                                                                         \
}                                                                             \
                                                                              \
/* Backward of direct_read for the readings' gradients grad[r] (NULL: zero) \
   : adds to grad_q[r] (laid out as q[r]), grad_k (as k) and grad_v (as v,   \
   at the value columns; each skipped when NULL). */                         \
int direct_read_backward_##SUF(                                               \
        const T *k, const T *v, const T *const *q, const int64_t *key_rows,   \
        const int64_t *key_ptr, const int64_t *groups, const int64_t *src,    \
        const int64_t *const *query_rows, const int64_t *const *query_ptr,    \
        const int64_t *const *sel, const int64_t *nsel, const T *const *grad, \
        T *const *grad_q, T *grad_k, T *grad_v, int64_t ng, int64_t nr,       \
        int64_t H, int64_t R, int64_t C, int64_t ldv, int64_t hb) {           \
    panels_##SUF p;                                                           \
    if (panels_alloc_##SUF(&p, R, C, src, H, hb)) return -1;                  \
    int64_t total = 0, *nruns = malloc(sizeof(int64_t) * (nr > 0 ? nr : 1));  \
    for (int64_t r = 0; r < nr; ++r) total += nsel[r];                        \
    int64_t *runs = malloc(sizeof(int64_t) * 3 * (total > 0 ? total : 1));    \
    if (!nruns || !runs) {                                                    \
        free(nruns); free(runs); panels_free_##SUF(&p); return -1;            \
    }                                                                         \
    for (int64_t r = 0, at = 0; r < nr; at += 3 * nsel[r++])                  \
        nruns[r] = column_runs(sel[r], nsel[r], runs + at);                   \
    for (int64_t i = 0; i < ng; ++i) {                                        \
        const int64_t g = groups[i], n = key_ptr[g + 1] - key_ptr[g];         \
        const int64_t *kr = key_rows + key_ptr[g];                            \
        const int nw = (int)((n + DW_##SUF - 1) / DW_##SUF);                  \
        restart_fetches(&p.fetches);                                          \
        if (i + 1 < ng) /* (the gradient rows: read, like outputs) */         \
            fetch_group_##SUF(&p.fetches, k, v, grad_k, grad_v, q, grad_q,    \
                              key_rows, key_ptr, groups[i + 1], query_rows,   \
                              query_ptr, nsel, (T *const *)grad, nr, H, R,    \
                              ldv, p.v_lo, p.v_hi);                           \
        const int64_t share = p.fetches.count / (H * nr + 1) + 1;            \
        if (n == 0) continue; /* no key: no gradient */                       \
        if (n <= ROW_LAYOUT_KEYS) {                                           \
            for (int64_t h = 0; h < H; ++h) {                                 \
                panels_fill_##SUF(&p, k, v, kr, n, h, H, R, C, src, ldv, hb,  \
                                  PANEL_K | PANEL_V);                         \
                memset(p.gk, 0, sizeof(T) * n * (R + C));                     \
                T *gk = grad_k ? p.gk : NULL, *gv = grad_v ? p.gk + n * R     \
                                                           : NULL;            \
                for (int64_t r = 0, at = 0; r < nr; at += 3 * nsel[r++]) {    \
                    issue_fetches(&p.fetches, share);                         \
                    if (!grad[r]) continue;                                   \
                    small_group_backward_##SUF(                               \
                        &p, q[r], grad[r], query_rows[r] + query_ptr[r][g],   \
                        query_ptr[r][g + 1] - query_ptr[r][g], runs + at,     \
                        nruns[r], nsel[r], n, h, H, R, C, grad_q[r], gk, gv); \
                }                                                             \
                for (int64_t j = 0; j < n; ++j) {                             \
                    if (gk)                                                   \
                        axpy_##SUF(grad_k + (kr[j] * H + h) * R, 1, gk + j * R,\
                                   R);                                        \
                    if (gv)                                                   \
                        for (int64_t u = 0; u < p.nruns; ++u) {               \
                            const int64_t *run = p.runs + 3 * u;              \
                            axpy_##SUF(grad_v + kr[j] * ldv + h * hb + run[1],\
                                       1, gv + j * C + run[0], run[2]);       \
                        }                                                     \
                }                                                             \
            }                                                                 \
            continue;                                                         \
        }                                                                     \
        for (int64_t h = 0; h < H; ++h) {                                     \
            panels_fill_##SUF(&p, k, v, kr, n, h, H, R, C, src, ldv, hb,      \
                              PANEL_KT | PANEL_K | PANEL_VT);                 \
            memset(p.gk, 0, sizeof(T) * NK_##SUF * (R + C));                  \
            for (int64_t r = 0; r < nr; ++r) {                                \
                issue_fetches(&p.fetches, share);                             \
                if (!grad[r]) continue;                                       \
                const int64_t *rows = query_rows[r] + query_ptr[r][g];        \
                const int64_t m = query_ptr[r][g + 1] - query_ptr[r][g];      \
                WITH_NW(nw, read_group_backward_##SUF, &p, q[r], grad[r],     \
                        rows, m, sel[r], nsel[r], n, h, H, R, grad_q[r],      \
                        grad_k != NULL, grad_v != NULL)                       \
            }                                                                 \
            for (int64_t j = 0; j < n; ++j) {                                 \
                if (grad_k) {                                                 \
                    T *x = grad_k + (kr[j] * H + h) * R;                      \
                    for (int64_t r = 0; r < R; ++r)                           \
                        x[r] += p.gk[r * NK_##SUF + j];                       \
                }                                                             \
                if (grad_v) {                                                 \
                    T *x = grad_v + kr[j] * ldv + h * hb;                     \
                    for (int64_t c = 0; c < C; ++c)                           \
                        x[src[c]] += p.gv[c * NK_##SUF + j];                  \
                }                                                             \
            }                                                                 \
        }                                                                     \
    }                                                                         \
    free(nruns);                                                              \
    free(runs);                                                               \
    panels_free_##SUF(&p);                                                    \
    return 0;                                                                 \
}

DEFINE_DIRECT(float, f32)
DEFINE_DIRECT(double, f64)
