/* The program `tests/attach.rs` attaches to and detaches from, over and
 * over: four threads allocate blocks of mixed sizes, each filled with a
 * pattern, and hand them to each other through a queue; a block is checked
 * and reallocated (its prefix checked again) or freed by whichever thread
 * takes it. The main thread forks a child every 50 ms, which checks blocks
 * of its own and exits with a code its parent checks. Any wrong byte, a
 * wrong exit code or a failed allocation makes it exit 1.
 *
 * usage: attach_stress SECONDS      prints "ok <blocks> <forks>" */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define QUEUE 1024

struct block { unsigned char *p; size_t n; unsigned char tag; };

static struct block queue[QUEUE];
static int q_len;
static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int stop;
static volatile int errors;
static volatile long blocks;

static int check(const unsigned char *p, size_t n, unsigned char tag) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)(tag + i)) return 0;
    return 1;
}

static void fill(unsigned char *p, size_t n, unsigned char tag) {
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(tag + i);
}

static uint64_t next(uint64_t *s) {
    *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17;
    return *s;
}

static void *worker(void *arg) {
    uint64_t s = (uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1;
    while (!stop) {
        size_t n = 16 + next(&s) % (next(&s) % 8 == 0 ? 65536 : 512);
        unsigned char tag = (unsigned char)next(&s);
        unsigned char *p = (next(&s) % 4 == 0) ? calloc(1, n) : malloc(n);
        if (!p) { errors++; break; }
        fill(p, n, tag);
        struct block b = { p, n, tag }, got = { 0 };
        pthread_mutex_lock(&q_lock);
        if (q_len < QUEUE) queue[q_len++] = b; else got = b;
        if (!got.p && q_len > QUEUE / 2) got = queue[--q_len];
        pthread_mutex_unlock(&q_lock);
        if (got.p) {
            if (!check(got.p, got.n, got.tag)) errors++;
            if (next(&s) % 3 == 0) {
                size_t m = got.n * 2;
                unsigned char *q = realloc(got.p, m);
                if (!q) { errors++; break; }
                if (!check(q, got.n, got.tag)) errors++;
                free(q);
            } else {
                free(got.p);
            }
            __sync_fetch_and_add(&blocks, 1);
        }
        if (next(&s) % 64 == 0) usleep(100);
    }
    return NULL;
}

static int child(void) {
    for (int i = 0; i < 200; i++) {
        size_t n = 64 + i * 13;
        unsigned char *p = malloc(n);
        if (!p) return 1;
        fill(p, n, (unsigned char)i);
        if (!check(p, n, (unsigned char)i)) return 1;
        free(p);
    }
    return 42;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 10;
    pthread_t t[4];
    for (long i = 0; i < 4; i++) pthread_create(&t[i], NULL, worker, (void *)(i + 1));
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    long forks = 0;
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec + (now.tv_nsec - start.tv_nsec) / 1e9 > seconds) break;
        pid_t c = fork();
        if (c == 0) _exit(child());
        int st = 0;
        if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 42) errors++;
        forks++;
        usleep(50000);
    }
    stop = 1;
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < q_len; i++) {
        if (!check(queue[i].p, queue[i].n, queue[i].tag)) errors++;
        free(queue[i].p);
    }
    if (errors) { printf("errors %d\n", errors); return 1; }
    printf("ok %ld %ld\n", blocks, forks);
    return 0;
}
