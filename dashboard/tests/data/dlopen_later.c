/* A program that loads a library after it started: `dlopen_later LIB DELAY
 * SECONDS` allocates and frees small blocks from the start; DELAY seconds
 * in it loads LIB (lazily bound) and calls its leak_later() every 50 ms
 * until SECONDS have passed; it then prints "kept N" and exits 0. An attach
 * made before the load must sample the library's allocations too. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* Where each churned block is seen before it is freed, so the compiler
 * keeps its malloc and free. */
char *volatile churn_sink;

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: dlopen_later LIB DELAY SECONDS\n");
        return 2;
    }
    double delay = atof(argv[2]), seconds = atof(argv[3]), t0 = now();
    unsigned long (*leak)(void) = NULL;
    unsigned long kept = 0;
    while (now() - t0 < seconds) {
        for (int i = 0; i < 256; i++) {
            char *p = malloc(4096 + i * 64);
            memset(p, i, 64);
            churn_sink = p;
            free(churn_sink);
        }
        if (!leak && now() - t0 >= delay) {
            void *h = dlopen(argv[1], RTLD_LAZY);
            if (!h) {
                fprintf(stderr, "%s\n", dlerror());
                return 3;
            }
            leak = (unsigned long (*)(void))dlsym(h, "leak_later");
            if (!leak) {
                fprintf(stderr, "no leak_later\n");
                return 4;
            }
        }
        if (leak)
            kept = leak();
        usleep(50000);
    }
    printf("kept %lu blocks\n", kept);
    return 0;
}
