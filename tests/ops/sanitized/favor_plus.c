/* The FAVOR+ kernels on exactly sized buffers, for AddressSanitizer: odd
   row counts, channels and features (partial vectors, several register
   blocks, rows past the end of a call copied). */
#include <stdio.h>
#include <stdlib.h>

#include "../../../torch_geometric_hot/ops/native/feature_maps.c"

#define CASE(T, SUF)                                                          \
    {                                                                         \
        T *x = malloc(sizeof(T) * rows * d), *w = malloc(sizeof(T) * r * d);  \
        T *out = malloc(sizeof(T) * rows * r), *m = malloc(sizeof(T) * rows); \
        T *gx = malloc(sizeof(T) * rows * d);                                 \
        for (int64_t i = 0; i < rows * d; ++i) x[i] = (T)(i % 13) / 10 - 1;  \
        for (int64_t i = 0; i < r * d; ++i) w[i] = (T)(i % 7) / 10 - (T)0.3;  \
        if (favor_logits_##SUF(x, w, out, m, rows, d, r, 1, 0.5, -1) ||       \
            favor_backward_##SUF(x, w, out, out, gx, rows, d, r, 0.5))        \
            return 1;                                                         \
        favor_shift_##SUF(out, m, rows, r);                                   \
        free(x); free(w); free(out); free(m); free(gx);                       \
    }

int main(void) {
    const int64_t cases[][3] = {{1, 3, 40}, {2, 3, 40}, {5, 5, 11},
                                {3, 8, 17}, {7, 16, 45}, {1, 1, 1},
                                {4, 2, 3},  {3, 9, 33},  {9, 40, 70}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(*cases); ++c) {
        const int64_t rows = cases[c][0], d = cases[c][1], r = cases[c][2];
        CASE(float, f32)
        CASE(double, f64)
    }
    puts("ok");
    return 0;
}
