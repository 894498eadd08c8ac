/* The summary kernels on exactly sized buffers, for AddressSanitizer: 200
   random problems (1-40 features, 1-12 channels, 1-4 slots; repeated data
   rows, groups without visits; readings of all columns or of the last
   slot and the denominator). */
#include <stdio.h>
#include <stdlib.h>

#include "../../../torch_geometric_hot/ops/native/kernel_attention.c"

static int64_t draw(int64_t n) { return rand() % n; }

/* n visits: groups drawn and sorted, rows drawn (or, distinct, a shuffle
   of 0..n-1) */
static void visits(int64_t n, int64_t G, int64_t P, int distinct,
                   int64_t *rows, int64_t *groups) {
    int64_t *count = calloc(G, sizeof(int64_t));
    for (int64_t t = 0; t < n; ++t) count[draw(G)]++;
    for (int64_t g = 0, t = 0; g < G; ++g)
        while (count[g]--) groups[t++] = g;
    for (int64_t t = 0; t < n; ++t) rows[t] = distinct ? t : draw(P);
    for (int64_t t = n - 1; distinct && t > 0; --t) {
        const int64_t u = draw(t + 1), x = rows[t];
        rows[t] = rows[u]; rows[u] = x;
    }
    free(count);
}

#define PROBLEM(T, SUF)                                                       \
static int problem_##SUF(void) {                                              \
    const int64_t H = 1 + draw(4), R = 1 + draw(40), D = 1 + draw(12);        \
    const int64_t S = 1 + draw(4), G = 1 + draw(30), P = 1 + draw(300);       \
    const int64_t E = draw(400), Q = 1 + draw(300);                           \
    const int64_t ldb = S * H * D, C = S * D + 1;                             \
    int64_t *rows = malloc(8 * (E + 1)), *groups = malloc(8 * (E + 1));      \
    int64_t *qrows = malloc(8 * Q), *qgroups = malloc(8 * Q);                 \
    int64_t *src = malloc(8 * C), *read = malloc(8 * C);                      \
    visits(E, G, P, 0, rows, groups);                                         \
    visits(Q, G, Q, 1, qrows, qgroups);                                       \
    for (int64_t c = 0; c + 1 < C; ++c) src[c] = c / D * H * D + c % D;      \
    const int64_t Cout = draw(2) ? C : D + 1; /* all, or last slot + den */  \
    for (int64_t c = 0; c < Cout; ++c) read[c] = C - Cout + c;                \
    T *a = malloc(sizeof(T) * P * H * R), *b = malloc(sizeof(T) * P * ldb);   \
    T *q = malloc(sizeof(T) * Q * H * R);                                     \
    for (int64_t i = 0; i < P * H * R; ++i) a[i] = (T)draw(100) / 100;        \
    for (int64_t i = 0; i < P * ldb; ++i) b[i] = (T)draw(100) / 100;          \
    for (int64_t i = 0; i < Q * H * R; ++i) q[i] = (T)draw(100) / 100;        \
    T *sum = malloc(sizeof(T) * G * H * R * C);                               \
    T *out = malloc(sizeof(T) * Q * H * Cout);                                \
    T *gq = malloc(sizeof(T) * Q * H * R);                                    \
    T *gs = calloc(G * H * R * C, sizeof(T));                                 \
    T *ga = calloc(P * H * R, sizeof(T)), *gb = calloc(P * ldb, sizeof(T));   \
    const int status =                                                        \
        outer_sum_##SUF(a, b, rows, groups, src, sum, E, H, R, C, ldb, D, 1,  \
                        0, G) ||                                              \
        contract_##SUF(q, sum, qrows, qgroups, read, out, Q, H, R, C, Cout) || \
        contract_backward_##SUF(q, sum, out, qrows, qgroups, read, gq, gs, Q, \
                                H, R, C, Cout, 2, 0, G) ||                    \
        outer_sum_backward_##SUF(a, b, gs, rows, groups, src, ga, gb, E, H,   \
                                 R, C, ldb, D, 1);                            \
    free(rows); free(groups); free(qrows); free(qgroups); free(src);          \
    free(read); free(a); free(b); free(q); free(sum); free(out); free(gq);     \
    free(gs); free(ga); free(gb);                                             \
    return status;                                                            \
}

PROBLEM(float, f32)
PROBLEM(double, f64)

int main(void) {
    srand(2);
    for (int trial = 0; trial < 200; ++trial)
        if (problem_f32() || problem_f64()) return 1;
    puts("ok");
    return 0;
}
