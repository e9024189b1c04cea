/* The issue 53 case for `watch --sites`: leak_here() keeps 64 KiB every
 * 50 ms while churn_small() and churn_big() allocate and free about
 * 400 MiB/s between them. Built -O2 -g by the test.
 *
 * usage: sites_leak SECONDS [quiet]   (quiet: the leak alone, no churn) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void *volatile sink;
static void **kept;
static size_t n_kept;

__attribute__((noinline)) void leak_here(void) {
    void *p = malloc(64 << 10);
    memset(p, 7, 64 << 10);
    kept[n_kept++] = p;
}

__attribute__((noinline)) void churn_small(void) {
    for (int i = 0; i < 2000; i++) {
        char *p = malloc(256 + (i % 64) * 16);
        p[0] = (char)i;
        sink = p;
        free(p);
    }
}

__attribute__((noinline)) void churn_big(void) {
    for (int i = 0; i < 16; i++) {
        char *p = malloc(1 << 20);
        p[0] = (char)i;
        p[(1 << 20) - 1] = 1;
        sink = p;
        free(p);
    }
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 10;
    int quiet = argc > 2 && strcmp(argv[2], "quiet") == 0;
    kept = calloc(100000, sizeof(void *));
    double start = now(), next_leak = start;
    double churned = 0;
    while (now() - start < seconds) {
        double t = now();
        if (t >= next_leak) {
            leak_here();
            next_leak += 0.05;
        }
        if (quiet) {
            struct timespec s = {0, 5000000};
            nanosleep(&s, NULL);
            continue;
        }
        /* 16 MiB + ~1.5 MiB per round; paced to about 400 MiB/s. */
        churn_big();
        churn_small();
        churned += 16.0 * (1 << 20) + 2000 * 760.0;
        double ahead = churned / (400.0 * (1 << 20)) - (now() - start);
        if (ahead > 0) {
            struct timespec s = {0, (long)(ahead * 1e9)};
            nanosleep(&s, NULL);
        }
    }
    printf("kept %zu blocks of 64 KiB (%.1f MiB) in %.1f s; churned %.0f MiB\n", n_kept,
           n_kept * 64.0 / 1024, now() - start, churned / (1 << 20));
    return 0;
}
