/* The class combination on exactly sized buffers, for AddressSanitizer:
   200 random parts (1-4 heads; head sizes with and without a compiled
   special case; 1-5 classes of 1-4 terms reading 1-3 readings at random
   offsets or 0-3 single keys, some missing; empty classes). */
#include <stdio.h>
#include <stdlib.h>

#include "../../../torch_geometric_hot/ops/native/class_combination.c"

static int64_t draw(int64_t n) { return rand() % n; }

#define PART(T, SUF)                                                          \
static void part_##SUF(void) {                                                \
    static const int64_t sizes[] = {1, 3, 4, 5, 8, 16};                       \
    const int64_t H = 1 + draw(4), D = sizes[draw(6)], R = 1 + draw(20);      \
    const int64_t rows = 1 + draw(60), P = 1 + draw(80), nc = 1 + draw(5);    \
    const int64_t nr = 1 + draw(3), nk = draw(4), S = nc + draw(2);           \
    const int64_t ldv = S * H * D;                                            \
    int64_t *start = malloc(8 * (nc + 1)), width[3], nt = 0;                  \
    int64_t kind[20], sign[20], src[20], off[20];                             \
    for (int64_t r = 0; r < nr; ++r) width[r] = D * (1 + draw(3)) + 1;        \
    for (int64_t c = 0; c < nc; ++c) {                                        \
        start[c] = nt;                                                        \
        for (int64_t n = 1 + draw(4); n--; ++nt) {                            \
            kind[nt] = nk ? draw(2) : 0;                                      \
            sign[nt] = draw(2) ? 1 : -1;                                      \
            src[nt] = kind[nt] ? draw(nk) : draw(nr);                         \
            off[nt] = kind[nt] ? 0 : D * draw((width[src[nt]] - 1) / D);      \
        }                                                                     \
    }                                                                         \
    start[nc] = nt;                                                           \
    T *reading[3], *grad_reading[3];                                          \
    for (int64_t r = 0; r < nr; ++r) {                                        \
        reading[r] = malloc(sizeof(T) * rows * H * width[r]);                 \
        grad_reading[r] = calloc(rows * H * width[r], sizeof(T));             \
        for (int64_t i = 0; i < rows * H * width[r]; ++i)                     \
            reading[r][i] = (T)(1 + draw(100)) / 100;                         \
    }                                                                         \
    int64_t *position[3];                                                     \
    for (int64_t s = 0; s < nk; ++s) {                                        \
        position[s] = malloc(8 * rows);                                       \
        for (int64_t i = 0; i < rows; ++i) position[s][i] = draw(P + 1) - 1;  \
    }                                                                         \
    T *q = malloc(sizeof(T) * rows * H * R), *k = malloc(sizeof(T) * P * H * R);\
    T *v = malloc(sizeof(T) * P * ldv), *gv = calloc(P * ldv, sizeof(T));     \
    for (int64_t i = 0; i < rows * H * R; ++i) q[i] = (T)draw(100) / 100;     \
    for (int64_t i = 0; i < P * H * R; ++i) k[i] = (T)draw(100) / 100;        \
    for (int64_t i = 0; i < P * ldv; ++i) v[i] = (T)draw(100) / 100;          \
    T *value[5], *grad_value[5];                                              \
    for (int64_t c = 0; c < nc; ++c) {                                        \
        value[c] = v + c * H * D; grad_value[c] = gv + c * H * D;             \
    }                                                                         \
    uint8_t *nonempty = malloc(rows * nc);                                    \
    for (int64_t i = 0; i < rows * nc; ++i) nonempty[i] = draw(4) != 0;       \
    T *out = malloc(sizeof(T) * rows * nc * H * D);                           \
    T *den = malloc(sizeof(T) * rows * nc * H);                               \
    T *gq = malloc(sizeof(T) * rows * H * R), *gk = calloc(P * H * R, sizeof(T));\
    combine_##SUF(rows, H, D, R, nc, ldv, nk, start, kind, sign, src, off,    \
                  reading, width, q, k, position, value, nonempty, 1e-6, out, \
                  den);                                                       \
    combine_backward_##SUF(rows, H, D, R, nc, ldv, nk, start, kind, sign,     \
                           src, off, reading, width, q, k, position, value,   \
                           nonempty, 1e-6, out, den, out, grad_reading, gq,   \
                           gk, grad_value);                                   \
    for (int64_t r = 0; r < nr; ++r) { free(reading[r]); free(grad_reading[r]); }\
    for (int64_t s = 0; s < nk; ++s) free(position[s]);                       \
    free(start); free(q); free(k); free(v); free(gv); free(nonempty);         \
    free(out); free(den); free(gq); free(gk);                                 \
}

PART(float, f32)
PART(double, f64)

int main(void) {
    srand(3);
    for (int trial = 0; trial < 200; ++trial) {
        part_f32();
        part_f64();
    }
    puts("ok");
    return 0;
}
