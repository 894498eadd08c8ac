/* The pair gather and scatter on exactly sized buffers, for
   AddressSanitizer: random pair views (diagonal entries first, then
   off-diagonal ones, about half of them without their transpose) with
   1-33 channels, and a view of one node. */
#include <stdio.h>
#include <stdlib.h>

#include "../../../torch_geometric_hot/ops/native/pair_entries.c"

#define CASE(T, SUF)                                                          \
    {                                                                         \
        T *Y = malloc(sizeof(T) * P * 2 * C), *N = malloc(sizeof(T) * n * 3 * C);\
        T *out = malloc(sizeof(T) * P * C), *G = malloc(sizeof(T) * P * 2 * C);\
        T *S = calloc((size_t)(n * 3 * C), sizeof(T));                        \
        for (int64_t i = 0; i < P * 2 * C; ++i) Y[i] = (T)(i % 11) / 10;      \
        for (int64_t i = 0; i < n * 3 * C; ++i) N[i] = (T)(i % 5) / 10;       \
        pair_gather_##SUF(Y, N, row, col, tr, out, 0, P, C);                     \
        pair_scatter_##SUF(out, row, col, tr, G, S, 0, P, C);                    \
        free(Y); free(N); free(out); free(G); free(S);                        \
    }

int main(void) {
    srand(3);
    for (int trial = 0; trial < 200; ++trial) {
        const int64_t n = 1 + rand() % 12, C = 1 + rand() % 33;
        const int64_t m = n == 1 || trial == 0 ? 0 : rand() % (n * n);
        const int64_t P = n + m;
        int64_t *row = malloc(sizeof(int64_t) * P);
        int64_t *col = malloc(sizeof(int64_t) * P);
        int64_t *tr = malloc(sizeof(int64_t) * P);
        for (int64_t i = 0; i < n; ++i) row[i] = col[i] = tr[i] = i;
        for (int64_t e = n; e < P; ++e) {  /* i != j (n = 1: no entries) */
            row[e] = rand() % n;
            col[e] = n > 1 ? (row[e] + 1 + rand() % (n - 1)) % n : row[e];
            tr[e] = -1;
        }
        for (int64_t e = n; e + 1 < P; e += 2) {  /* pairs of transposes */
            if (n == 1 || rand() % 2) continue;
            row[e + 1] = col[e];
            col[e + 1] = row[e];
            tr[e] = e + 1;
            tr[e + 1] = e;
        }
        CASE(float, f32)
        CASE(double, f64)
        free(row); free(col); free(tr);
    }
    puts("ok");
    return 0;
}
