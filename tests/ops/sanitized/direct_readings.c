/* The direct readings on exactly sized buffers, for AddressSanitizer: 200
   random problems (1-50 features, 1-12 channels, 1-4 slots: several
   column blocks and partial vectors; up to the kernels' largest group;
   repeated key rows, empty and skipped groups, a reading without a
   gradient; each reading with queries of its own, of its own size, and
   the second's query gradient sometimes NULL). */
#include <stdio.h>
#include <stdlib.h>

#include "../../../torch_geometric_hot/ops/native/direct_readings.c"

static int64_t draw(int64_t n) { return rand() % n; }

static int64_t *csr(int64_t G, const int64_t *count) {
    int64_t *ptr = calloc(G + 1, sizeof(int64_t));
    for (int64_t g = 0; g < G; ++g) ptr[g + 1] = ptr[g] + count[g];
    return ptr;
}

#define PROBLEM(T, SUF)                                                       \
static int problem_##SUF(void) {                                              \
    const int64_t H = 1 + draw(4), R = 1 + draw(50), D = 1 + draw(12);        \
    const int64_t S = 1 + draw(4), G = 1 + draw(20);                          \
    const int64_t Q[2] = {1 + draw(200), 1 + draw(200)};                      \
    const int64_t L = S * H * D, C = S * D;                                   \
    int64_t *count = calloc(G, sizeof(int64_t)), P = 1;                       \
    for (int64_t g = 0; g < G; ++g) P += count[g] = draw(NK_##SUF + 1);       \
    int64_t *key_ptr = csr(G, count), *key_rows = malloc(8 * P);              \
    for (int64_t i = 0; i < P; ++i) key_rows[i] = draw(P); /* repeats */     \
    int64_t *src = malloc(8 * C), *groups = malloc(8 * G), ng = 0;            \
    for (int64_t c = 0; c < C; ++c) src[c] = c / D * H * D + c % D;           \
    for (int64_t g = 0; g < G; ++g)                                           \
        if (draw(4)) groups[ng++] = g; /* some groups skipped */              \
    int64_t *rows[2], *ptr[2], *sel[2], nsel[2] = {C, D};                     \
    for (int r = 0; r < 2; ++r) {                                             \
        int64_t *group = malloc(8 * Q[r]), *next = calloc(G, 8);              \
        for (int64_t g = 0; g < G; ++g) count[g] = 0;                         \
        for (int64_t i = 0; i < Q[r]; ++i) count[group[i] = draw(G)]++;       \
        ptr[r] = csr(G, count);                                               \
        rows[r] = malloc(8 * Q[r]);                                           \
        for (int64_t i = 0; i < Q[r]; ++i)                                    \
            rows[r][ptr[r][group[i]] + next[group[i]]++] = i;                 \
        sel[r] = malloc(8 * nsel[r]);                                         \
        for (int64_t c = 0; c < nsel[r]; ++c)                                 \
            sel[r][c] = r ? (S - 1) * D + c : c; /* all, or the last slot */  \
        free(group); free(next);                                              \
    }                                                                         \
    T *k = malloc(sizeof(T) * P * H * R), *v = malloc(sizeof(T) * P * L);     \
    T *q[2], *gq[2];                                                          \
    for (int r = 0; r < 2; ++r) {                                             \
        q[r] = malloc(sizeof(T) * Q[r] * H * R);                              \
        for (int64_t i = 0; i < Q[r] * H * R; ++i) q[r][i] = (T)draw(100) / 100;\
        gq[r] = r && draw(2) ? NULL : calloc(Q[r] * H * R, sizeof(T));        \
    }                                                                         \
    for (int64_t i = 0; i < P * H * R; ++i) k[i] = (T)draw(100) / 100;        \
    for (int64_t i = 0; i < P * L; ++i) v[i] = (T)draw(100) / 100;            \
    T *out[2] = {malloc(sizeof(T) * Q[0] * H * (C + 1)),                      \
                 malloc(sizeof(T) * Q[1] * H * (D + 1))};                     \
    T *gk = calloc(P * H * R, sizeof(T)), *gv = calloc(P * L, sizeof(T));     \
    const T *grad[2] = {out[0], NULL};                                        \
    int status = direct_read_##SUF(                                           \
        k, v, (const T *const *)q, key_rows, key_ptr, groups, src,            \
        (const int64_t *const *)rows, (const int64_t *const *)ptr,            \
        (const int64_t *const *)sel, nsel, out, ng, 2, H, R, C, L, D) ||      \
        direct_read_backward_##SUF(                                           \
        k, v, (const T *const *)q, key_rows, key_ptr, groups, src,            \
        (const int64_t *const *)rows, (const int64_t *const *)ptr,            \
        (const int64_t *const *)sel, nsel, grad, gq, gk, gv, ng, 2, H, R, C,  \
        L, D);                                                                \
    for (int r = 0; r < 2; ++r) {                                             \
        free(rows[r]); free(ptr[r]); free(sel[r]); free(out[r]);              \
        free(q[r]); free(gq[r]);                                              \
    }                                                                         \
    free(count); free(key_ptr); free(key_rows); free(src); free(groups);      \
    free(k); free(v); free(gk); free(gv);                                     \
    return status;                                                            \
}

PROBLEM(float, f32)
PROBLEM(double, f64)

int main(void) {
    srand(1);
    for (int trial = 0; trial < 200; ++trial)
        if (problem_f32() || problem_f64()) return 1;
    puts("ok");
    return 0;
}
