/* C reference of flatline's ingest fill (runtime/arena/src/workload/ingest.rs): the
 * naive nanoGPT get_batch loop into two preallocated [B, T] int64 buffers.
 * Same generated corpus (SplitMix64 from SEED+1, tokens below 168) and the same
 * offsets (SplitMix64 from SEED) as `flatline bench ingest`.
 * With AHEAD=1 the offsets are drawn one batch ahead, the first line of every
 * row of the next batch is prefetched before this batch is copied, and the
 * whole of row b of the next batch while row b is copied (flatline's
 * fill_ahead).
 * Build: gcc -O3 -mavx2 -o ingest ingest.c
 * Run:   ./ingest [B T CORPUS_TOKENS ITERS WARMUP SEED AHEAD]
 * Prints one JSON line with fill_ns_p50/p95/p99. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include "common.h"

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static uint64_t pct(const uint64_t *sorted, uint64_t n, double q) {
    uint64_t rank = (uint64_t)(q * (double)n + 0.999999999);
    if (rank < 1) rank = 1;
    if (rank > n) rank = n;
    return sorted[rank - 1];
}

int main(int argc, char **argv) {
    uint64_t B = argc > 1 ? strtoull(argv[1], NULL, 10) : 64;
    uint64_t T = argc > 2 ? strtoull(argv[2], NULL, 10) : 256;
    uint64_t N = argc > 3 ? strtoull(argv[3], NULL, 10) : 16671459;
    uint64_t iters = argc > 4 ? strtoull(argv[4], NULL, 10) : 20000;
    uint64_t warmup = argc > 5 ? strtoull(argv[5], NULL, 10) : 1000;
    uint64_t seed = argc > 6 ? strtoull(argv[6], NULL, 10) : 1337;
    int ahead = argc > 7 ? atoi(argv[7]) : 0;
    if (B == 0 || T == 0 || iters == 0 || N < T + 2) return 2;

    uint16_t *corpus = malloc(N * sizeof(uint16_t));
    int64_t *x = aligned_alloc(64, ((B * T * 8 + 63) / 64) * 64);
    int64_t *y = aligned_alloc(64, ((B * T * 8 + 63) / 64) * 64);
    uint64_t *off = malloc(B * sizeof(uint64_t));
    uint64_t *next = malloc(B * sizeof(uint64_t));
    uint64_t *times = malloc(iters * sizeof(uint64_t));
    if (!corpus || !x || !y || !off || !next || !times) return 1;

    uint64_t cs = seed + 1;
    for (uint64_t i = 0; i < N; i++) corpus[i] = (uint16_t)below(&cs, 168);
    uint64_t limit = N - T - 1, os = seed;

    if (ahead)
        for (uint64_t b = 0; b < B; b++) next[b] = below(&os, limit);
    for (uint64_t it = 0; it < warmup + iters; it++) {
        if (ahead) {
            uint64_t *t = off; off = next; next = t;
        }
        for (uint64_t b = 0; b < B; b++) (ahead ? next : off)[b] = below(&os, limit);
        uint64_t t0 = now_ns();
        for (uint64_t b = 0; ahead && b < B; b++) __builtin_prefetch(corpus + next[b], 0, 3);
        for (uint64_t b = 0; b < B; b++) {
            if (ahead) {
                const char *n = (const char *)(corpus + next[b]);
                const char *end = (const char *)(corpus + next[b] + T + 1) - 1;
                for (const char *p = n; p <= end; p += 64) __builtin_prefetch(p, 0, 3);
                __builtin_prefetch(end, 0, 3);
            }
            const uint16_t *src = corpus + off[b];
            int64_t *xr = x + b * T, *yr = y + b * T;
            for (uint64_t t = 0; t < T; t++) {
                xr[t] = src[t];
                yr[t] = src[t + 1];
            }
        }
        __asm__ __volatile__("" : : "r"(x), "r"(y) : "memory"); /* keep the batch */
        uint64_t t1 = now_ns();
        if (it >= warmup) times[it - warmup] = t1 - t0;
    }
    qsort(times, iters, sizeof(uint64_t), cmp_u64);
    printf("{\"batch\":%" PRIu64 ",\"block\":%" PRIu64 ",\"corpus_tokens\":%" PRIu64 ",\"iters\":%" PRIu64
           ",\"fill_ns_p50\":%" PRIu64 ",\"fill_ns_p95\":%" PRIu64 ",\"fill_ns_p99\":%" PRIu64 "}\n",
           B, T, N, iters, pct(times, iters, 0.50), pct(times, iters, 0.95), pct(times, iters, 0.99));
    return 0;
}
