/* `errno_keep SECONDS`: allocates 64 KiB blocks in a loop and checks that
 * errno, set before each malloc, is as it was after it (a successful
 * malloc leaves it alone in glibc); prints how often it was not and exits
 * 1 if it ever was. A sampler attached to it must not leak its own
 * system calls' errors into the program. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void *volatile errno_sink;

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 10;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    unsigned long calls = 0, changed = 0;
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec + (t.tv_nsec - t0.tv_nsec) / 1e9 >= seconds)
            break;
        for (int i = 0; i < 64; i++) {
            errno = 4242;
            void *p = malloc(64 << 10);
            if (errno != 4242)
                changed++;
            memset(p, 1, 64);
            errno_sink = p;
            free(errno_sink);
            calls++;
        }
        usleep(1000);
    }
    printf("errno changed by %lu of %lu mallocs\n", changed, calls);
    return changed ? 1 : 0;
}
