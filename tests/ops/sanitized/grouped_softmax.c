/* The grouped softmax attention, forward and backward, on exactly sized
   buffers, for AddressSanitizer: random groups (some without queries or
   keys, small ones read in row layout and larger ones on panels), 0-3
   exclusions, 1-19 features per head, strided query, key and value rows,
   dropout on the weights in every other trial. */
#include <stdio.h>
#include <stdlib.h>

#include "../../../torch_geometric_hot/ops/native/grouped_softmax.c"

static int64_t *sizes(int64_t G, int64_t total) {
    /* random sizes of G groups adding up to total, as a pointer [G + 1] */
    int64_t *start = calloc((size_t)(G + 1), sizeof(int64_t));
    for (int64_t t = 0; t < total; ++t) ++start[1 + rand() % G];
    for (int64_t g = 0; g < G; ++g) start[g + 1] += start[g];
    return start;
}

static int64_t *shuffled(int64_t n, int64_t of) {
    /* n distinct rows of `of` in random order */
    int64_t *all = malloc(sizeof(int64_t) * (size_t)(of + 1));
    for (int64_t i = 0; i < of; ++i) all[i] = i;
    for (int64_t i = of - 1; i > 0; --i) {
        int64_t j = rand() % (i + 1), t = all[i];
        all[i] = all[j];
        all[j] = t;
    }
    return all;
}

#define CASE(T, SUF)                                                          \
    {                                                                         \
        T *q = malloc(sizeof(T) * (size_t)(Q * ldq + 1));                     \
        T *k = malloc(sizeof(T) * (size_t)(N * ldk + 1));                     \
        T *v = malloc(sizeof(T) * (size_t)(N * ldv + 1));                     \
        T *out = malloc(sizeof(T) * (size_t)(Q * H * DV + 1));                \
        T *lse = malloc(sizeof(T) * (size_t)(Q * H + 1));                     \
        T *grad = malloc(sizeof(T) * (size_t)(Q * H * DV + 1));               \
        T *dq = malloc(sizeof(T) * (size_t)(Q * H * D + 1));                  \
        T *dk = calloc((size_t)(N * H * D + 1), sizeof(T));                   \
        T *dv = calloc((size_t)(N * H * DV + 1), sizeof(T));                  \
        for (int64_t i = 0; i < Q * ldq; ++i) q[i] = (T)(i % 13) / 7 - 1;     \
        for (int64_t i = 0; i < N * ldk; ++i) k[i] = (T)(i % 11) / 5 - 1;     \
        for (int64_t i = 0; i < N * ldv; ++i) v[i] = (T)(i % 7) / 3;          \
        for (int64_t i = 0; i < Q * H * DV; ++i) grad[i] = (T)(i % 5) - 2;    \
        if (grouped_softmax_##SUF(q, k, v, query_order, query_start,          \
                                  key_rows, key_start, query_ids, key_ids,    \
                                  key_hash, out, lse, 0, G, H, D, DV, ldq, ldk, ldv,    \
                                  E, Q, K, max_keys, seed, threshold) ||      \
            grouped_softmax_backward_##SUF(                                   \
                q, k, v, out, lse, grad, query_order, query_start, key_rows,  \
                key_start, query_ids, key_ids, key_hash, dq, dk, dv, 0, G, H, \
                D, DV,                                                        \
                ldq, ldk, ldv, E, Q, K, max_keys, seed, threshold))           \
            return 1;                                                         \
        for (int64_t i = 0; i < Q * H * D; ++i)                               \
            if (dq[i] != dq[i]) return 2;                                     \
        free(q); free(k); free(v); free(out); free(lse); free(grad);          \
        free(dq); free(dk); free(dv);                                         \
    }

int main(void) {
    srand(5);
    for (int trial = 0; trial < 300; ++trial) {
        const int64_t G = 1 + rand() % 6, H = 1 + rand() % 3;
        const int64_t D = 1 + rand() % 19, DV = 1 + rand() % 19;
        const int64_t E = rand() % 4, Q = rand() % 60;
        const int64_t K = trial % 3 == 0 ? rand() % 9 : rand() % 80;
        const int64_t N = K + rand() % 5;
        const int64_t ldq = H * D + rand() % 3, ldk = H * D + rand() % 3;
        const int64_t ldv = H * DV + rand() % 3;
        int64_t *query_start = sizes(G, Q), *key_start = sizes(G, K);
        int64_t *query_order = shuffled(Q, Q), *key_rows = shuffled(K, N);
        int64_t *key_hash = shuffled(K, K + 7);  /* the rows dropout hashes */
        int32_t *query_ids = malloc(sizeof(int32_t) * (size_t)(E * Q + 1));
        int32_t *key_ids = malloc(sizeof(int32_t) * (size_t)(E * K + 1));
        for (int64_t i = 0; i < E * Q; ++i) query_ids[i] = rand() % 5 - 1;
        for (int64_t i = 0; i < E * K; ++i) key_ids[i] = rand() % 4;
        /* dropout on the weights in every other trial */
        const int64_t seed = rand(), threshold = trial % 2 ? 1288490189 : 0;
        int64_t max_keys = 0;
        for (int64_t g = 0; g < G; ++g)
            if (key_start[g + 1] - key_start[g] > max_keys)
                max_keys = key_start[g + 1] - key_start[g];
        CASE(float, f32)
        CASE(double, f64)
        free(query_start); free(key_start); free(query_order);
        free(key_rows); free(key_hash); free(query_ids); free(key_ids);
    }
    puts("ok");
    return 0;
}
