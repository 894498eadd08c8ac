/*
 * Softmax attention within key groups, distinct-index exclusions included:
 * for a query row i of group g and head h,
 *     o_i = sum_{j in K(i)} softmax_j(q_i . k_j) v_j,
 *     K(i) = {keys of g} minus {j : key_ids[e][j] == query_ids[e][i] for
 *            some exclusion e},
 * with the log-sum-exp l_i of the logits kept for the backward pass (-inf
 * and o_i = 0 when K(i) is empty). The backward pass recomputes the
 * weights p_ij = exp(q_i . k_j - l_i) and, with delta_i = g_i . o_i,
 *     dq_i = sum_j p_ij (g_i . v_j - delta_i) k_j,
 *     dk_j = sum_i p_ij (g_i . v_j - delta_i) q_i,
 *     dv_j = sum_i p_ij g_i.
 *
 * Groups are given as lists: queries query_order[query_start[g],
 * query_start[g + 1]), keys (data rows) key_rows[key_start[g],
 * key_start[g + 1]); a data row is the key of at most one group. Per group
 * the keys' exclusion ids, and per group and head its keys and values, are
 * gathered once into cache-resident panels whose rows are padded to whole
 * vectors (keys transposed [D, nb] and values [n, DVP]; for the backward
 * pass keys [n, DP] and values transposed [DV, nb]). Every query of the
 * group is then one pass over them: the logits, exclusions and weights as
 * vectors of keys (the logits accumulate over the features in registers),
 * the weighted sums as vectors of features. The backward pass adds the
 * group's key and value gradients up in transposed panels and writes them
 * to their rows once per group and head. The rows a group writes are its
 * own, so a caller may split the groups across threads.
 *
 * Dropout on the weights (threshold > 0): the weight of query row i, key
 * j (hashed as key_hash[j], its input row, in the order of key_rows) and
 * head h is kept when its 32-bit hash (keep_hashes: the four
 * mixed) is at least threshold (= p 2^32) and then scaled by
 * 2^32 / (2^32 - threshold), else dropped; l_i stays that of the weights
 * before dropout. The backward pass draws the same keeps: with m_ij the
 * keep's factor, dv_j = sum_i p_ij m_ij g_i and the scores are
 * p_ij (m_ij g_i . v_j - delta_i). The draws depend on the rows, their
 * hashed ids and the seed only, so any split of the groups draws the same.
 *
 * q, k, v are [rows, H, D or DV] with row strides ldq, ldk, ldv; out,
 * grad [Q, H, DV], lse [Q, H], dq [Q, H, D] are contiguous (out, lse and
 * dq are written at every query row of a group), and dk, dv ([N, H, D],
 * [N, H, DV], contiguous) are zero on entry.
 * Exclusion ids are int32: query_ids [E, Q] by query row, key_ids [E, K]
 * in the order of key_rows. Plain C11 with GCC vector extensions; compiled
 * with the other kernels by torch_geometric_hot.ops.native. Functions
 * return -1 when their scratch cannot be had, else 0.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define GV_BYTES 32
#define INLINE_G static inline __attribute__((always_inline))
/* Groups of at most this many keys are read in row layout (no panels). */
#define SMALL_KEYS 8
/* Queries whose logits are computed at once on a group's panels. */
#define QB 4
/* Groups ahead whose rows a small group prefetches (they lie all over
   their tensors). */
#define SMALL_AHEAD 4

/* The 32-bit hash of dropout's keeps: two rounds of a multiply-xorshift
   mixer, the query row and the seed in the first, the key row and the
   head in the second. */
static inline uint32_t mix32(uint32_t x) {
    x ^= x >> 16;
    x *= 0x7FEB352Du;
    x ^= x >> 15;
    x *= 0x846CA68Bu;
    return x ^ (x >> 16);
}

/* Dropout of a call: no dropout when threshold is 0. */
typedef struct {
    uint32_t seed, threshold;
    double scale;
} dropout_t;

static dropout_t dropout_of(int64_t seed, int64_t threshold) {
    dropout_t d = {(uint32_t)seed, (uint32_t)threshold, 1.0};
    if (threshold) d.scale = 4294967296.0 / (4294967296.0 - (double)threshold);
    return d;
}

/* The hashes of the weights of query row i and head h for the key rows
   rows[0, n) into out (a loop the compiler vectorises). */
static void keep_hashes(const dropout_t *d, int64_t i, const int64_t *rows,
                        int64_t n, int64_t h, uint32_t *out) {
    const uint32_t x = mix32((uint32_t)i * 0x9E3779B1u + d->seed);
    const uint32_t head = (uint32_t)h * 0xC2B2AE3Du;
    for (int64_t j = 0; j < n; ++j)
        out[j] = mix32(x ^ ((uint32_t)rows[j] * 0x85EBCA77u + head));
}

/* 1 / k! for the Taylor polynomial of exp on |r| <= ln 2 / 2: degree 7
   (float, relative error below 1e-8) or 13 (double, below 1e-17). */
static const double inverse_factorials[14] = {
    1.0, 1.0, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040,
    1.0 / 40320, 1.0 / 362880, 1.0 / 3628800, 1.0 / 39916800,
    1.0 / 479001600, 1.0 / 6227020800};

/* T: the real type, I and U: the signed and unsigned integer types of its
   width (exclusion ids in the panels; exponent bits), EXP_DEGREE, LO:
   below it exp is 0 (the smallest normal result), BIAS and SHIFT: the
   exponent's, MAGIC: 1.5 2^mantissa (adding it rounds to an integer held
   in the low bits). */
#define DEFINE_GROUPED(T, SUF, I, U, EXP_DEGREE, LO, BIAS, SHIFT, MAGIC,    \
                       LOG)                                                   \
typedef T gvec_##SUF                                                         \
    __attribute__((vector_size(GV_BYTES), aligned(sizeof(T))));               \
typedef I givec_##SUF                                                         \
    __attribute__((vector_size(GV_BYTES), aligned(sizeof(I))));               \
typedef U guvec_##SUF __attribute__((vector_size(GV_BYTES)));                 \
enum { GW_##SUF = GV_BYTES / sizeof(T) };                                     \
                                                                              \
INLINE_G gvec_##SUF gld_##SUF(const T *p) { return *(const gvec_##SUF *)p; } \
INLINE_G void gst_##SUF(T *p, gvec_##SUF x) { *(gvec_##SUF *)p = x; }        \
INLINE_G gvec_##SUF gsplat_##SUF(T x) { return (gvec_##SUF){0} + x; }        \
INLINE_G gvec_##SUF gselect_##SUF(givec_##SUF m, gvec_##SUF a,               \
                                  gvec_##SUF b) {                             \
    return (gvec_##SUF)(((givec_##SUF)a & m) | ((givec_##SUF)b & ~m));       \
}                                                                             \
INLINE_G int64_t round_up_##SUF(int64_t n) {                                  \
    return (n + GW_##SUF - 1) / GW_##SUF * GW_##SUF;                          \
}                                                                             \
                                                                              \
/* exp(x) lane by lane for x <= 0 (0 below LO, -inf included): 2^n p(r),   \
   x = n ln 2 + r. */                                                         \
INLINE_G gvec_##SUF gexp_##SUF(gvec_##SUF x) {                               \
    const givec_##SUF low = x < (T)LO;                                        \
    const gvec_##SUF c = gselect_##SUF(low, gsplat_##SUF((T)LO), x);         \
    const gvec_##SUF t = c * (T)1.4426950408889634074 + (T)MAGIC;            \
    const gvec_##SUF n = t - (T)MAGIC;                                        \
    const gvec_##SUF r = (c - n * (T)6.93147180369123816490e-01) -           \
                         n * (T)1.90821492927058770002e-10;                   \
    gvec_##SUF p = gsplat_##SUF((T)inverse_factorials[EXP_DEGREE]);          \
    for (int i = EXP_DEGREE - 1; i >= 0; --i)                                 \
        p = p * r + (T)inverse_factorials[i];                                 \
    const guvec_##SUF scale = ((guvec_##SUF)t + (U)BIAS) << SHIFT;           \
    return (gvec_##SUF)((givec_##SUF)(p * (gvec_##SUF)scale) & ~low);        \
}                                                                             \
                                                                              \
/* The largest lane and the sum of the lanes, by halving (a tree). */     \
INLINE_G T gmax_##SUF(gvec_##SUF x) {                                         \
    for (int w = GW_##SUF / 2; w >= 1; w /= 2)                                \
        for (int l = 0; l < w; ++l) x[l] = x[l + w] > x[l] ? x[l + w] : x[l]; \
    return x[0];                                                              \
}                                                                             \
                                                                              \
INLINE_G T gsum_##SUF(gvec_##SUF x) {                                         \
    for (int w = GW_##SUF / 2; w >= 1; w /= 2)                                \
        for (int l = 0; l < w; ++l) x[l] += x[l + w];                         \
    return x[0];                                                              \
}                                                                             \
                                                                              \
/* The exclusions and padding of the logits acc of keys j0 .. j0 + GW of  \
   a panel (ids [E, nb]; qid[e * Q]: the query's ids), stored to s + j0;    \
   the running maximum top. */                                               \
INLINE_G void finish_logits_##SUF(gvec_##SUF acc, int64_t j0, int64_t n,     \
                                  int64_t nb, const I *ids,                   \
                                  const int32_t *qid, int64_t E, int64_t Q,  \
                                  T *s, gvec_##SUF *top) {                    \
    for (int64_t e = 0; e < E; ++e) {                                         \
        const givec_##SUF m =                                                 \
            *(const givec_##SUF *)(ids + e * nb + j0) == (I)qid[e * Q];       \
        acc = gselect_##SUF(m, gsplat_##SUF(-(T)INFINITY), acc);              \
    }                                                                         \
    if (j0 + GW_##SUF > n)                                                    \
        for (int l = (int)(n - j0); l < GW_##SUF; ++l) acc[l] = -(T)INFINITY; \
    gst_##SUF(s + j0, acc);                                                   \
    *top = gselect_##SUF(acc > *top, acc, *top);                              \
}                                                                             \
                                                                              \
/* The logits of QB queries (their rows qs[u], ids qids[u]) against the       \
   n keys of the panel kt [D, nb] into s + u nb, -inf where an exclusion      \
   removes the key and in the padding lanes; their maxima into m[u]: each     \
   vector of keys loaded once for the QB queries (independent sums). */       \
INLINE_G void block_logits_##SUF(const T *const *qs,                         \
                                 const int32_t *const *qids, const T *kt,    \
                                 const I *ids, int64_t n, int64_t nb,        \
                                 int64_t D, int64_t E, int64_t Q, T *s,      \
                                 T *m) {                                      \
    gvec_##SUF t0 = gsplat_##SUF(-(T)INFINITY), t1 = t0, t2 = t0, t3 = t0;   \
    const T *c0 = qs[0], *c1 = qs[1], *c2 = qs[2], *c3 = qs[3];               \
    for (int64_t jb = 0; jb < nb; jb += GW_##SUF) {                          \
        gvec_##SUF a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};                    \
        for (int64_t d = 0; d < D; ++d) {                                     \
            const gvec_##SUF key = gld_##SUF(kt + d * nb + jb);               \
            a0 += c0[d] * key;                                                \
            a1 += c1[d] * key;                                                \
            a2 += c2[d] * key;                                                \
            a3 += c3[d] * key;                                                \
        }                                                                     \
        finish_logits_##SUF(a0, jb, n, nb, ids, qids[0], E, Q, s, &t0);       \
        finish_logits_##SUF(a1, jb, n, nb, ids, qids[1], E, Q, s + nb, &t1);  \
        finish_logits_##SUF(a2, jb, n, nb, ids, qids[2], E, Q, s + 2 * nb,    \
                            &t2);                                             \
        finish_logits_##SUF(a3, jb, n, nb, ids, qids[3], E, Q, s + 3 * nb,    \
                            &t3);                                             \
    }                                                                         \
    m[0] = gmax_##SUF(t0);                                                    \
    m[1] = gmax_##SUF(t1);                                                    \
    m[2] = gmax_##SUF(t2);                                                    \
    m[3] = gmax_##SUF(t3);                                                    \
}                                                                             \
                                                                              \
/* s[j] <- exp(s[j] - shift) over the nb lanes; their sum. */               \
INLINE_G T weights_##SUF(T *s, int64_t nb, T shift) {                         \
    gvec_##SUF total = {0};                                                   \
    for (int64_t jb = 0; jb < nb; jb += GW_##SUF) {                          \
        const gvec_##SUF p = gexp_##SUF(gld_##SUF(s + jb) - shift);          \
        gst_##SUF(s + jb, p);                                                 \
        total += p;                                                           \
    }                                                                         \
    return gsum_##SUF(total);                                                 \
}                                                                             \
                                                                              \
/* out[0, C) = scale sum_j w[j] rows[j * ld, + C) over the n rows of a     \
   panel padded to whole vectors (ld): two vectors of columns at once, two  \
   rows at a time (independent sums). */                                    \
INLINE_G void weighted_rows_##SUF(const T *w, const T *rows, int64_t n,      \
                                  int64_t C, int64_t ld, T scale, T *out) {  \
    const int64_t W = GW_##SUF;                                               \
    for (int64_t cb = 0; cb < C; cb += 2 * W) {                               \
        const int two = cb + W < ld;                                          \
        gvec_##SUF e0 = {0}, e1 = {0}, o0 = {0}, o1 = {0};                    \
        int64_t j = 0;                                                        \
        for (; j + 1 < n; j += 2) {                                           \
            const T *r = rows + j * ld + cb;                                  \
            e0 += w[j] * gld_##SUF(r);                                        \
            o0 += w[j + 1] * gld_##SUF(r + ld);                               \
            if (two) {                                                        \
                e1 += w[j] * gld_##SUF(r + W);                                \
                o1 += w[j + 1] * gld_##SUF(r + ld + W);                       \
            }                                                                 \
        }                                                                     \
        if (j < n) {                                                          \
            e0 += w[j] * gld_##SUF(rows + j * ld + cb);                       \
            if (two) e1 += w[j] * gld_##SUF(rows + j * ld + cb + W);          \
        }                                                                     \
        const gvec_##SUF lo = (e0 + o0) * scale, hi = (e1 + o1) * scale;      \
        for (int64_t c = cb; c < C && c < cb + 2 * W; ++c)                    \
            out[c] = c < cb + W ? lo[c - cb] : hi[c - cb - W];                \
    }                                                                         \
}                                                                             \
                                                                              \
/* a . b over n elements. */                                                  \
INLINE_G T dot_##SUF(const T *a, const T *b, int64_t n) {                     \
    gvec_##SUF acc = {0};                                                     \
    int64_t c = 0;                                                            \
    for (; c + GW_##SUF <= n; c += GW_##SUF)                                  \
        acc += gld_##SUF(a + c) * gld_##SUF(b + c);                           \
    T r = gsum_##SUF(acc);                                                    \
    for (; c < n; ++c) r += a[c] * b[c];                                      \
    return r;                                                                 \
}                                                                             \
                                                                              \
/* y[0, n) += a x[0, n). */                                                   \
INLINE_G void axpy_##SUF(T *y, T a, const T *x, int64_t n) {                 \
    int64_t c = 0;                                                            \
    for (; c + GW_##SUF <= n; c += GW_##SUF)                                  \
        gst_##SUF(y + c, gld_##SUF(y + c) + a * gld_##SUF(x + c));            \
    for (; c < n; ++c) y[c] += a * x[c];                                      \
}                                                                             \
                                                                              \
/* out[j] = p[j] times dropout's factor of query row i, head h and key row \
   rows[j], j < n (out may be p; hashes: scratch of n). */                   \
INLINE_G void drop_##SUF(const dropout_t *d, int64_t i,                      \
                         const int64_t *rows, int64_t n, int64_t h,          \
                         uint32_t *hashes, const T *p, T *out) {             \
    const T scale = (T)d->scale;                                              \
    keep_hashes(d, i, rows, n, h, hashes);                                    \
    for (int64_t j = 0; j < n; ++j)                                           \
        out[j] = hashes[j] >= d->threshold ? p[j] * scale : 0;                \
}                                                                             \
                                                                              \
/* Row layout (a group of at most SMALL_KEYS keys, whose panels would cost  \
   more than its few queries save): the logits of query row i (of head h)  \
   against the group's keys read in place into s [nb], as                     \
   block_logits_##SUF; their maximum. */                                      \
INLINE_G T row_logits_##SUF(const T *qi, const T *k, const int64_t *rows,    \
                            const int32_t *key_ids, const int32_t *qid,     \
                            int64_t n, int64_t nb, int64_t h, int64_t D,     \
                            int64_t ldk, int64_t E, int64_t K, int64_t Q,    \
                            T *s) {                                           \
    T m = -(T)INFINITY;                                                       \
    for (int64_t j = 0; j < nb; ++j) {                                        \
        T x = -(T)INFINITY;                                                   \
        if (j < n) {                                                          \
            x = dot_##SUF(qi, k + rows[j] * ldk + h * D, D);                  \
            for (int64_t e = 0; e < E; ++e)                                   \
                if (key_ids[e * K + j] == qid[e * Q]) x = -(T)INFINITY;       \
        }                                                                     \
        s[j] = x;                                                             \
        m = x > m ? x : m;                                                    \
    }                                                                         \
    return m;                                                                 \
}                                                                             \
                                                                              \
/* Prefetches `bytes` from each row base + rows[j] ld, j < n (rw: 1 when   \
   they will be written). */                                                  \
INLINE_G void fetch_listed_##SUF(const T *base, const int64_t *rows,         \
                                 int64_t n, int64_t ld, int64_t bytes,       \
                                 int rw) {                                    \
    for (int64_t j = 0; j < n; ++j) {                                         \
        const char *row = (const char *)(base + rows[j] * ld);                \
        for (int64_t b = 0; b < bytes; b += 64)                               \
            if (rw) __builtin_prefetch(row + b, 1);                           \
            else __builtin_prefetch(row + b, 0);                              \
    }                                                                         \
}                                                                             \
                                                                              \
/* Prefetches share h of H of the key and value rows of the group after g \
   (if it is one of g_lo .. g_hi), while g runs its head h. */              \
INLINE_G void fetch_next_##SUF(const T *k, const T *v,                        \
                               const int64_t *key_rows,                       \
                               const int64_t *key_start, int64_t g,           \
                               int64_t g_hi, int64_t h, int64_t H, int64_t D, \
                               int64_t DV, int64_t ldk, int64_t ldv) {        \
    if (g + 1 >= g_hi) return;                                                \
    const int64_t *rows = key_rows + key_start[g + 1];                        \
    const int64_t n = key_start[g + 2] - key_start[g + 1];                    \
    fetch_listed_##SUF(k, rows + n * h / H, n * (h + 1) / H - n * h / H, ldk, \
                       (int64_t)sizeof(T) * H * D, 0);                        \
    fetch_listed_##SUF(v, rows + n * h / H, n * (h + 1) / H - n * h / H, ldv, \
                       (int64_t)sizeof(T) * H * DV, 0);                       \
}                                                                             \
                                                                              \
/* Rows of a tensor that a small group touches: base + row * ld, `bytes`  \
   long (write: 1 when they will be written). */                            \
typedef struct { const T *base; int64_t ld, bytes; int write; } rowset_##SUF; \
                                                                              \
/* Prefetches the rows of group a, if it is one of g_lo .. g_hi and small:  \
   those of its queries in the nq tensors `queries`, those of its keys in   \
   the nk tensors `keys`. */                                                 \
static void fetch_small_##SUF(                                                \
        int64_t a, int64_t g_hi, const int64_t *query_order,                  \
        const int64_t *query_start, const int64_t *key_rows,                  \
        const int64_t *key_start, const rowset_##SUF *queries, int nq,        \
        const rowset_##SUF *keys, int nk) {                                   \
    if (a >= g_hi || key_start[a + 1] - key_start[a] > SMALL_KEYS) return;    \
    const int64_t *qa = query_order + query_start[a];                         \
    const int64_t *ka = key_rows + key_start[a];                              \
    for (const rowset_##SUF *t = queries; t < queries + nq; ++t)              \
        fetch_listed_##SUF(t->base, qa, query_start[a + 1] - query_start[a],  \
                           t->ld, t->bytes, t->write);                        \
    for (const rowset_##SUF *t = keys; t < keys + nk; ++t)                    \
        fetch_listed_##SUF(t->base, ka, key_start[a + 1] - key_start[a],      \
                           t->ld, t->bytes, t->write);                        \
}                                                                             \
                                                                              \
/* A block of QB queries from position t0 of a group's list (ending at q1;  \
   the last block repeats its last query): their rows, query rows of head  \
   h and ids. */                                                              \
INLINE_G void block_queries_##SUF(const int64_t *query_order, int64_t t0,    \
                                  int64_t q1, const T *q, int64_t ldq,       \
                                  int64_t h, int64_t D,                       \
                                  const int32_t *query_ids, int64_t *rows,   \
                                  const T **qs, const int32_t **qids) {      \
    for (int u = 0; u < QB; ++u) {                                            \
        rows[u] = query_order[t0 + u < q1 ? t0 + u : q1 - 1];                 \
        qs[u] = q + rows[u] * ldq + h * D;                                    \
        qids[u] = query_ids + rows[u];                                        \
    }                                                                         \
}                                                                             \
                                                                              \
/* The exclusion ids of a group's n keys into ids [E, nb]. */               \
static void fill_ids_##SUF(const int32_t *key_ids, int64_t n, int64_t nb,    \
                           int64_t E, int64_t K, I *ids) {                   \
    for (int64_t e = 0; e < E; ++e)                                           \
        for (int64_t j = 0; j < nb; ++j)                                      \
            ids[e * nb + j] = j < n ? (I)key_ids[e * K + j] : (I)-1;          \
}                                                                             \
                                                                              \
/* The keys of a group (data rows rows[0, n)), head h, into the panels     \
   asked for (NULL: not): kt [D, nb], kr [n, DP], vr [n, DVP], vt [DV, nb];  \
   padding zero. */                                                           \
static void fill_##SUF(const T *k, const T *v, const int64_t *rows,          \
                       int64_t n, int64_t nb, int64_t h, int64_t D,          \
                       int64_t DV, int64_t ldk, int64_t ldv, T *kt, T *kr,   \
                       T *vr, T *vt) {                                        \
    const int64_t DP = round_up_##SUF(D), DVP = round_up_##SUF(DV);          \
    for (int64_t j = n; j < nb; ++j) {                                        \
        if (kt) for (int64_t d = 0; d < D; ++d) kt[d * nb + j] = 0;           \
        if (vt) for (int64_t c = 0; c < DV; ++c) vt[c * nb + j] = 0;          \
    }                                                                         \
    for (int64_t j = 0; j < n; ++j) {                                         \
        const T *kj = k + rows[j] * ldk + h * D;                              \
        const T *vj = v + rows[j] * ldv + h * DV;                             \
        if (kt) for (int64_t d = 0; d < D; ++d) kt[d * nb + j] = kj[d];       \
        if (vt) for (int64_t c = 0; c < DV; ++c) vt[c * nb + j] = vj[c];      \
        if (kr) {                                                             \
            memcpy(kr + j * DP, kj, sizeof(T) * (size_t)D);                   \
            for (int64_t d = D; d < DP; ++d) kr[j * DP + d] = 0;              \
        }                                                                     \
        if (vr) {                                                             \
            memcpy(vr + j * DVP, vj, sizeof(T) * (size_t)DV);                 \
            for (int64_t c = DV; c < DVP; ++c) vr[j * DVP + c] = 0;           \
        }                                                                     \
    }                                                                         \
}                                                                             \
                                                                              \
/* A group of n <= SMALL_KEYS keys in row layout: its nq queries          \
   queries[0, nq), its keys (data rows) rows[0, n), hashed as         \
   hash_rows[0, n), with ids key_ids[e * K + j]. */                          \
static void small_group_##SUF(                                                \
        const T *q, const T *k, const T *v, const int64_t *queries,          \
        int64_t nq, const int64_t *rows, const int64_t *hash_rows,            \
        const int32_t *key_ids, const int32_t *query_ids, T *out, T *lse,     \
        int64_t n, int64_t H, int64_t D, int64_t DV, int64_t ldq, int64_t ldk,\
        int64_t ldv, int64_t E, int64_t Q, int64_t K, const dropout_t *dr) {  \
    const int64_t nb = round_up_##SUF(n);                                     \
    T s[SMALL_KEYS + GW_##SUF];                                               \
    uint32_t hashes[SMALL_KEYS];                                              \
    for (int64_t t = 0; t < nq; ++t) {                                        \
        const int64_t i = queries[t];                                         \
        for (int64_t h = 0; h < H; ++h) {                                     \
            T *o = out + (i * H + h) * DV;                                    \
            const T m = row_logits_##SUF(q + i * ldq + h * D, k, rows,        \
                                         key_ids, query_ids + i, n, nb, h,    \
                                         D, ldk, E, K, Q, s);                 \
            memset(o, 0, sizeof(T) * (size_t)DV);                             \
            if (m == -(T)INFINITY) {                                          \
                lse[i * H + h] = m;                                           \
                continue;                                                     \
            }                                                                 \
            const T total = weights_##SUF(s, nb, m), inv = 1 / total;         \
            if (dr->threshold)                                                \
                drop_##SUF(dr, i, hash_rows, n, h, hashes, s, s);             \
            for (int64_t j = 0; j < n; ++j)                                   \
                axpy_##SUF(o, s[j] * inv, v + rows[j] * ldv + h * DV, DV);    \
            lse[i * H + h] = m + LOG(total);                                  \
        }                                                                     \
    }                                                                         \
}                                                                             \
                                                                              \
/* The backward pass of small_group_##SUF, adding to the key and value     \
   gradient rows (the group's own). */                                       \
static void small_group_backward_##SUF(                                       \
        const T *q, const T *k, const T *v, const T *out, const T *lse,      \
        const T *grad, const int64_t *queries, int64_t nq,                   \
        const int64_t *rows, const int64_t *hash_rows, const int32_t *key_ids,\
        const int32_t *query_ids, T *dq, T *dk, T *dv, int64_t n, int64_t H, \
        int64_t D, int64_t DV, int64_t ldq, int64_t ldk, int64_t ldv,        \
        int64_t E, int64_t Q, int64_t K, const dropout_t *dr) {               \
    const int64_t nb = round_up_##SUF(n);                                     \
    T s[SMALL_KEYS + GW_##SUF], kept[SMALL_KEYS];                             \
    uint32_t hashes[SMALL_KEYS];                                              \
    for (int64_t t = 0; t < nq; ++t) {                                        \
        const int64_t i = queries[t];                                         \
        for (int64_t h = 0; h < H; ++h) {                                     \
            const T l = lse[i * H + h];                                       \
            const T *qi = q + i * ldq + h * D;                                \
            const T *gi = grad + (i * H + h) * DV;                            \
            T *dqi = dq + (i * H + h) * D;                                    \
            memset(dqi, 0, sizeof(T) * (size_t)D);                            \
            if (l == -(T)INFINITY) continue;                                  \
            row_logits_##SUF(qi, k, rows, key_ids, query_ids + i, n, nb, h,   \
                             D, ldk, E, K, Q, s);                             \
            weights_##SUF(s, nb, l);                                          \
            const T delta = dot_##SUF(gi, out + (i * H + h) * DV, DV);        \
            const T *pm = s;  /* the weights after dropout */                 \
            if (dr->threshold) {                                              \
                drop_##SUF(dr, i, hash_rows, n, h, hashes, s, kept);          \
                pm = kept;                                                    \
            }                                                                 \
            for (int64_t j = 0; j < n; ++j) {                                 \
                const T p = s[j];                                             \
                if (p == 0) continue;                                         \
                const T *kj = k + rows[j] * ldk + h * D;                      \
                const T *vj = v + rows[j] * ldv + h * DV;                     \
                const T w = pm[j] * dot_##SUF(gi, vj, DV) - p * delta;        \
                axpy_##SUF(dqi, w, kj, D);                                    \
                axpy_##SUF(dk + (rows[j] * H + h) * D, w, qi, D);             \
                axpy_##SUF(dv + (rows[j] * H + h) * DV, pm[j], gi, DV);       \
            }                                                                 \
        }                                                                     \
    }                                                                         \
}                                                                             \
                                                                              \
int grouped_softmax_##SUF(                                                    \
        const T *q, const T *k, const T *v, const int64_t *query_order,      \
        const int64_t *query_start, const int64_t *key_rows,                  \
        const int64_t *key_start, const int32_t *query_ids,                   \
        const int32_t *key_ids, const int64_t *key_hash, T *out, T *lse,     \
        int64_t g_lo, int64_t g_hi, int64_t H, int64_t D, int64_t DV,         \
        int64_t ldq, int64_t ldk, int64_t ldv, int64_t E, int64_t Q,          \
        int64_t K, int64_t max_keys, int64_t seed, int64_t threshold) {       \
    const dropout_t dr = dropout_of(seed, threshold);                         \
    const int64_t nbmax = round_up_##SUF(max_keys);                           \
    const int64_t DVP = round_up_##SUF(DV);                                   \
    const int64_t qbytes = (int64_t)sizeof(T) * H * D;                        \
    const int64_t obytes = (int64_t)sizeof(T) * H * DV;                       \
    T *scratch = malloc(sizeof(T) * (size_t)(nbmax * (D + DVP + QB) + 1));    \
    I *ids = malloc(sizeof(I) * (size_t)(E * nbmax + 1));                     \
    uint32_t *hashes = malloc(sizeof(uint32_t) * (size_t)(nbmax + 1));        \
    if (!scratch || !ids || !hashes) {                                        \
        free(scratch); free(ids); free(hashes);                               \
        return -1;                                                            \
    }                                                                         \
    T *kt = scratch, *vr = kt + nbmax * D, *s = vr + nbmax * DVP;             \
    for (int64_t g = g_lo; g < g_hi; ++g) {                                   \
        const int64_t q0 = query_start[g], q1 = query_start[g + 1];           \
        const int64_t k0 = key_start[g], n = key_start[g + 1] - k0;           \
        const int64_t nb = round_up_##SUF(n);                                 \
        if (q0 == q1) continue;                                               \
        if (n <= SMALL_KEYS) {                                                \
            const rowset_##SUF queries[] = {{q, ldq, qbytes, 0},              \
                                            {out, H * DV, obytes, 1}};        \
            const rowset_##SUF keys[] = {{k, ldk, qbytes, 0},                 \
                                         {v, ldv, obytes, 0}};                \
            fetch_small_##SUF(g + SMALL_AHEAD, g_hi, query_order,             \
                              query_start, key_rows, key_start, queries, 2,   \
                              keys, 2);                                       \
            small_group_##SUF(q, k, v, query_order + q0, q1 - q0,            \
                              key_rows + k0, key_hash + k0, key_ids + k0,     \
                              query_ids, out, lse, n, H, D, DV, ldq, ldk,     \
                              ldv, E, Q, K, &dr);                             \
            continue;                                                         \
        }                                                                     \
        fill_ids_##SUF(key_ids + k0, n, nb, E, K, ids);                       \
        for (int64_t h = 0; h < H; ++h) {                                     \
            fill_##SUF(k, v, key_rows + k0, n, nb, h, D, DV, ldk, ldv, kt,   \
                       NULL, vr, NULL);                                       \
            fetch_next_##SUF(k, v, key_rows, key_start, g, g_hi, h, H, D, DV, \
                             ldk, ldv);                                       \
            for (int64_t t0 = q0; t0 < q1; t0 += QB) {                        \
                const T *qs[QB];                                              \
                const int32_t *qids[QB];                                      \
                int64_t rows[QB];                                             \
                T m[QB];                                                      \
                block_queries_##SUF(query_order, t0, q1, q, ldq, h, D,        \
                                    query_ids, rows, qs, qids);               \
                block_logits_##SUF(qs, qids, kt, ids, n, nb, D, E, Q, s, m); \
                for (int u = 0; u < QB && t0 + u < q1; ++u) {                 \
                    const int64_t i = rows[u];                                \
                    T *o = out + (i * H + h) * DV;                            \
                    if (m[u] == -(T)INFINITY) {                               \
                        memset(o, 0, sizeof(T) * (size_t)DV);                 \
                        lse[i * H + h] = m[u];                                \
                        continue;                                             \
                    }                                                         \
                    T *su = s + u * nb;                                       \
                    const T total = weights_##SUF(su, nb, m[u]);              \
                    if (dr.threshold)                                         \
                        drop_##SUF(&dr, i, key_hash + k0, n, h, hashes, su,   \
                                   su);                                       \
                    weighted_rows_##SUF(su, vr, n, DV, DVP, 1 / total, o);    \
                    lse[i * H + h] = m[u] + LOG(total);                       \
                }                                                             \
            }                                                                 \
        }                                                                     \
    }                                                                         \
    free(scratch); free(ids); free(hashes);                                   \
    return 0;                                                                 \
}                                                                             \
                                                                              \
int grouped_softmax_backward_##SUF(                                           \
        const T *q, const T *k, const T *v, const T *out, const T *lse,      \
        const T *grad, const int64_t *query_order,                            \
        const int64_t *query_start, const int64_t *key_rows,                  \
        const int64_t *key_start, const int32_t *query_ids,                   \
        const int32_t *key_ids, const int64_t *key_hash, T *dq, T *dk,       \
        T *dv, int64_t g_lo, int64_t g_hi, int64_t H, int64_t D, int64_t DV,  \
        int64_t ldq, int64_t ldk, int64_t ldv, int64_t E, int64_t Q,          \
        int64_t K, int64_t max_keys, int64_t seed, int64_t threshold) {       \
    const dropout_t dr = dropout_of(seed, threshold);                         \
    const int64_t nbmax = round_up_##SUF(max_keys);                           \
    const int64_t DP = round_up_##SUF(D);                                     \
    const int64_t qbytes = (int64_t)sizeof(T) * H * D;                        \
    const int64_t obytes = (int64_t)sizeof(T) * H * DV;                       \
    T *scratch = malloc(sizeof(T) * (size_t)(                                 \
        nbmax * (2 * D + DP + 2 * DV + 3 * QB) + 1));                         \
    I *ids = malloc(sizeof(I) * (size_t)(E * nbmax + 1));                     \
    uint32_t *hashes = malloc(sizeof(uint32_t) * (size_t)(nbmax + 1));        \
    if (!scratch || !ids || !hashes) {                                        \
        free(scratch); free(ids); free(hashes);                               \
        return -1;                                                            \
    }                                                                         \
    for (int64_t g = g_lo; g < g_hi; ++g) {                                   \
        const int64_t q0 = query_start[g], q1 = query_start[g + 1];           \
        const int64_t k0 = key_start[g], n = key_start[g + 1] - k0;           \
        const int64_t nb = round_up_##SUF(n);                                 \
        T *kt = scratch, *kr = kt + nb * D, *vt = kr + nb * DP;               \
        T *dkt = vt + nb * DV, *dvt = dkt + nb * D, *s = dvt + nb * DV;       \
        T *ds = s + QB * nb;                                                  \
        /* the weights after dropout (the weights themselves without) */      \
        T *pm = dr.threshold ? ds + QB * nb : s;                              \
        if (q0 == q1) continue;                                               \
        if (n <= SMALL_KEYS) {                                                \
            const rowset_##SUF queries[] = {                                  \
                {q, ldq, qbytes, 0}, {grad, H * DV, obytes, 0},               \
                {out, H * DV, obytes, 0}, {dq, H * D, qbytes, 1}};            \
            const rowset_##SUF keys[] = {                                     \
                {k, ldk, qbytes, 0}, {v, ldv, obytes, 0},                     \
                {dk, H * D, qbytes, 1}, {dv, H * DV, obytes, 1}};             \
            fetch_small_##SUF(g + SMALL_AHEAD, g_hi, query_order,             \
                              query_start, key_rows, key_start, queries, 4,   \
                              keys, 4);                                       \
            small_group_backward_##SUF(                                       \
                q, k, v, out, lse, grad, query_order + q0, q1 - q0,          \
                key_rows + k0, key_hash + k0, key_ids + k0, query_ids, dq,   \
                dk, dv, n, H, D, DV, ldq, ldk, ldv, E, Q, K, &dr);            \
            continue;                                                         \
        }                                                                     \
        fill_ids_##SUF(key_ids + k0, n, nb, E, K, ids);                       \
        for (int64_t h = 0; h < H; ++h) {                                     \
            fill_##SUF(k, v, key_rows + k0, n, nb, h, D, DV, ldk, ldv, kt,   \
                       kr, NULL, vt);                                         \
            fetch_next_##SUF(k, v, key_rows, key_start, g, g_hi, h, H, D, DV, \
                             ldk, ldv);                                       \
            memset(dkt, 0, sizeof(T) * (size_t)(nb * (D + DV)));              \
            for (int64_t t0 = q0; t0 < q1; t0 += QB) {                        \
                const T *qs[QB], *gs[QB];                                     \
                const int32_t *qids[QB];                                      \
                int64_t rows[QB];                                             \
                T m[QB], delta[QB];                                           \
                int live[QB];  /* a query of the block with keys */          \
                block_queries_##SUF(query_order, t0, q1, q, ldq, h, D,        \
                                    query_ids, rows, qs, qids);               \
                for (int u = 0; u < QB; ++u) {                                \
                    gs[u] = grad + (rows[u] * H + h) * DV;                    \
                    live[u] = t0 + u < q1 &&                                  \
                              lse[rows[u] * H + h] != -(T)INFINITY;           \
                }                                                             \
                block_logits_##SUF(qs, qids, kt, ids, n, nb, D, E, Q, s, m); \
                for (int u = 0; u < QB; ++u) {                                \
                    T *su = s + u * nb;                                       \
                    delta[u] = 0;                                             \
                    if (!live[u]) {                                           \
                        memset(su, 0, sizeof(T) * (size_t)nb);                \
                        if (pm != s)                                          \
                            memset(pm + u * nb, 0, sizeof(T) * (size_t)nb);   \
                        continue;                                             \
                    }                                                         \
                    weights_##SUF(su, nb, lse[rows[u] * H + h]);              \
                    if (pm != s) {                                            \
                        drop_##SUF(&dr, rows[u], key_hash + k0, n, h, hashes, \
                                   su, pm + u * nb);                          \
                        for (int64_t j = n; j < nb; ++j) pm[u * nb + j] = 0;  \
                    }                                                         \
                    delta[u] = dot_##SUF(gs[u], out + (rows[u] * H + h) * DV, \
                                         DV);                                 \
                }                                                             \
                const T *g0 = gs[0], *g1 = gs[1], *g2 = gs[2], *g3 = gs[3];   \
                const T *c0 = qs[0], *c1 = qs[1], *c2 = qs[2], *c3 = qs[3];   \
                for (int64_t jb = 0; jb < nb; jb += GW_##SUF) {              \
                    const gvec_##SUF p0 = gld_##SUF(s + jb);                  \
                    const gvec_##SUF p1 = gld_##SUF(s + nb + jb);             \
                    const gvec_##SUF p2 = gld_##SUF(s + 2 * nb + jb);         \
                    const gvec_##SUF p3 = gld_##SUF(s + 3 * nb + jb);         \
                    const gvec_##SUF m0 = gld_##SUF(pm + jb);                 \
                    const gvec_##SUF m1 = gld_##SUF(pm + nb + jb);            \
                    const gvec_##SUF m2 = gld_##SUF(pm + 2 * nb + jb);        \
                    const gvec_##SUF m3 = gld_##SUF(pm + 3 * nb + jb);        \
                    gvec_##SUF v0 = {0}, v1 = {0}, v2 = {0}, v3 = {0};        \
                    for (int64_t c = 0; c < DV; ++c) {                        \
                        const gvec_##SUF val = gld_##SUF(vt + c * nb + jb);   \
                        v0 += g0[c] * val;                                    \
                        v1 += g1[c] * val;                                    \
                        v2 += g2[c] * val;                                    \
                        v3 += g3[c] * val;                                    \
                        T *acc = dvt + c * nb + jb;                           \
                        gst_##SUF(acc, gld_##SUF(acc) + g0[c] * m0 +          \
                                  g1[c] * m1 + g2[c] * m2 + g3[c] * m3);      \
                    }                                                         \
                    const gvec_##SUF w0 = m0 * v0 - p0 * delta[0];            \
                    const gvec_##SUF w1 = m1 * v1 - p1 * delta[1];            \
                    const gvec_##SUF w2 = m2 * v2 - p2 * delta[2];            \
                    const gvec_##SUF w3 = m3 * v3 - p3 * delta[3];            \
                    gst_##SUF(ds + jb, w0);                                   \
                    gst_##SUF(ds + nb + jb, w1);                              \
                    gst_##SUF(ds + 2 * nb + jb, w2);                          \
                    gst_##SUF(ds + 3 * nb + jb, w3);                          \
                    for (int64_t d = 0; d < D; ++d) {                         \
                        T *acc = dkt + d * nb + jb;                           \
                        gst_##SUF(acc, gld_##SUF(acc) + c0[d] * w0 +          \
                                  c1[d] * w1 + c2[d] * w2 + c3[d] * w3);      \
                    }                                                         \
                }                                                             \
                for (int u = 0; u < QB && t0 + u < q1; ++u)                   \
                    weighted_rows_##SUF(ds + u * nb, kr, n, D, DP, 1,         \
                                        dq + (rows[u] * H + h) * D);          \
            }                                                                 \
            for (int64_t j = 0; j < n; ++j) {                                 \
                T *gk = dk + (key_rows[k0 + j] * H + h) * D;                  \
                T *gv = dv + (key_rows[k0 + j] * H + h) * DV;                 \
                for (int64_t d = 0; d < D; ++d) gk[d] = dkt[d * nb + j];      \
                for (int64_t c = 0; c < DV; ++c) gv[c] = dvt[c * nb + j];     \
            }                                                                 \
        }                                                                     \
    }                                                                         \
    free(scratch); free(ids); free(hashes);                                   \
    return 0;                                                                 \
}

DEFINE_GROUPED(float, f32, int32_t, uint32_t, 7, -87.0f, 127, 23,
               12582912.0f, logf)
DEFINE_GROUPED(double, f64, int64_t, uint64_t, 13, -708.0, 1023, 52,
               6755399441055744.0, log)
