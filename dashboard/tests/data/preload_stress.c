/* The preloaded library tested like the allocator it wraps (issue 65): run
 * plain and with libflatline_preload.so preloaded, sampling often, by
 * tests/preload_stress.rs. It exits 0 only if every check passes, and prints
 * one line per outcome that is the C library's to choose (a refused
 * alignment, realloc to 0), which the test holds equal between the two runs.
 *
 * Phases: the edge cases of each entry point; threads that allocate and free
 * each other's blocks (and map and unmap) while the main thread forks
 * children that allocate, exit or exec; then a signal handler that allocates
 * while the interrupted loop allocates too.
 *
 * Built -O2 -fno-builtin (so the compiler neither folds nor removes an
 * allocation) by the test.
 *
 * usage: preload_stress [THREADS OPS FORKS SIGNALS] */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

/* A failed realloc or reallocarray leaves the old block the caller's: the
 * checks read it again on purpose. */
#pragma GCC diagnostic ignored "-Wuse-after-free"

static int failures;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);               \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
            __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);                \
        }                                                                      \
    } while (0)

/* Keeps the compiler from proving a block unused. */
#define KEEP(p) __asm__ volatile("" : : "r"(p) : "memory")

/* Sizes the compiler cannot see. */
static volatile size_t huge = SIZE_MAX;
static volatile size_t half = SIZE_MAX / 2 + 1;

static uint64_t rng_next(uint64_t *s) {
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* A block's contents say its size and owner, so a block read back by
 * another thread shows any overlap or early reuse. */
static void fill(unsigned char *p, size_t n, unsigned tag) {
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(tag + i * 31);
}

static int intact(const unsigned char *p, size_t n, unsigned tag) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)(tag + i * 31))
            return 0;
    return 1;
}

static int aligned_to(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }

/* ------------------------------------------------------------------------
 * Edge cases, one thread. */

static void edges(void) {
    /* malloc(0) and free(NULL). */
    void *z = malloc(0);
    printf("malloc(0) -> %s\n", z ? "a block" : "NULL");
    free(z);
    free(NULL);

    /* malloc and realloc of an impossible size: NULL, ENOMEM, the old
     * block untouched. */
    errno = 0;
    void *n = malloc(huge);
    CHECK(n == NULL && errno == ENOMEM, "malloc(SIZE_MAX): %p errno %d", n, errno);
    unsigned char *keep = malloc(100);
    fill(keep, 100, 7);
    errno = 0;
    void *r = realloc(keep, huge);
    CHECK(r == NULL && errno == ENOMEM, "realloc(p, SIZE_MAX): %p errno %d", r, errno);
    CHECK(intact(keep, 100, 7), "realloc(p, SIZE_MAX) changed p");

    /* reallocarray whose count × size overflows: NULL, ENOMEM, p kept. */
    errno = 0;
    r = reallocarray(keep, half, 2);
    CHECK(r == NULL && errno == ENOMEM, "reallocarray overflow: %p errno %d", r, errno);
    CHECK(intact(keep, 100, 7), "reallocarray overflow changed p");
    r = reallocarray(keep, 50, 4);
    CHECK(r != NULL && intact(r, 100, 7), "reallocarray(p, 50, 4)");
    keep = r;

    /* calloc whose count × size overflows returns NULL with ENOMEM. */
    size_t counts[][2] = {{half, 2}, {2, half}, {huge, huge}, {(size_t)1 << 33, (size_t)1 << 31}};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        errno = 0;
        void *c = calloc(counts[i][0], counts[i][1]);
        CHECK(c == NULL && errno == ENOMEM, "calloc(%zu, %zu): %p errno %d", counts[i][0],
              counts[i][1], c, errno);
    }
    /* calloc zeroes, also memory just freed dirty (small, and mapped). */
    size_t sizes[] = {24, 1000, 70000, 1 << 20};
    for (size_t i = 0; i < 4; i++) {
        unsigned char *d = malloc(sizes[i]);
        memset(d, 0xAB, sizes[i]);
        free(d);
        unsigned char *c = calloc(sizes[i] / 8, 8);
        int zero = 1;
        for (size_t k = 0; k < sizes[i]; k++)
            zero &= c[k] == 0;
        CHECK(c && zero, "calloc(%zu) not zeroed", sizes[i]);
        free(c);
    }

    /* realloc from NULL is malloc; realloc keeps contents across every
     * kind of block (small, large, mapped) growing and shrinking. */
    unsigned char *p = realloc(NULL, 40);
    CHECK(p != NULL && malloc_usable_size(p) >= 40, "realloc(NULL, 40)");
    fill(p, 40, 3);
    size_t steps[] = {80, 5000, 300000, 5 << 20, 64, 200000, 17};
    size_t have = 40;
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        size_t was = have < steps[i] ? have : steps[i];
        unsigned char *q = realloc(p, steps[i]);
        CHECK(q != NULL, "realloc(p, %zu)", steps[i]);
        if (!q)
            break;
        CHECK(intact(q, was, 3), "realloc to %zu lost contents", steps[i]);
        p = q;
        fill(p, steps[i], 3);
        have = steps[i];
    }
    /* realloc to 0: glibc frees and returns NULL; whatever it is, it is
     * the same preloaded or not (printed). */
    errno = 0;
    void *q = realloc(p, 0);
    printf("realloc(p, 0) -> %s\n", q ? "a block" : "NULL");
    free(q);
    q = realloc(NULL, 0);
    printf("realloc(NULL, 0) -> %s\n", q ? "a block" : "NULL");
    free(q);
    free(keep);

    /* malloc_usable_size at least what was asked, for every small size and
     * some large ones; 0 for NULL. */
    CHECK(malloc_usable_size(NULL) == 0, "malloc_usable_size(NULL)");
    for (size_t s = 0; s < 5000; s += (s < 300 ? 1 : 37)) {
        void *b = malloc(s);
        CHECK(b && malloc_usable_size(b) >= s, "malloc_usable_size(malloc(%zu))", s);
        free(b);
    }
    for (size_t s = 1 << 16; s <= (size_t)1 << 24; s <<= 2) {
        void *b = malloc(s + 3);
        CHECK(b && malloc_usable_size(b) >= s + 3, "malloc_usable_size(malloc(%zu))", s + 3);
        free(b);
    }

    /* free keeps errno (POSIX.1-2024; glibc since 2.33), a successful
     * malloc leaves it alone here (printed: that one is glibc's choice). */
    int changed = 0;
    for (int i = 0; i < 20000; i++) {
        errno = 0;
        void *b = malloc(16 + (size_t)(i % 4000));
        KEEP(b);
        changed += errno != 0;
        errno = 4242;
        free(b);
        CHECK(errno == 4242, "free changed errno to %d", errno);
    }
    printf("successful mallocs that changed errno: %d\n", changed);

    /* posix_memalign: every power of two from sizeof(void *) is accepted;
     * 0, one that is not a power of two, or one below sizeof(void *) is
     * refused with EINVAL and *out left alone. */
    size_t asks[] = {1, 100, 4097, 100000};
    for (size_t a = sizeof(void *); a <= (size_t)1 << 22; a <<= 1) {
        for (size_t i = 0; i < 4; i++) {
            void *out = NULL;
            int rc = posix_memalign(&out, a, asks[i]);
            CHECK(rc == 0 && out && aligned_to(out, a) && malloc_usable_size(out) >= asks[i],
                  "posix_memalign(%zu, %zu): rc %d %p", a, asks[i], rc, out);
            if (out)
                memset(out, 1, asks[i]);
            free(out);
        }
    }
    size_t refused[] = {0, 1, 2, 4, 3, 12, 24, 48, 96, 4095, 4097, ((size_t)1 << 20) + 8};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        void *out = &out;
        int rc = posix_memalign(&out, refused[i], 64);
        CHECK(rc == EINVAL && out == &out, "posix_memalign(%zu): rc %d", refused[i], rc);
    }
    {
        void *out = &out;
        int rc = posix_memalign(&out, 64, huge - 4096);
        CHECK(rc == ENOMEM && out == &out, "posix_memalign(64, huge): rc %d", rc);
    }

    /* aligned_alloc, memalign: every power of two, sizes a multiple of it
     * or not; what they do with the others is the C library's (printed). */
    for (size_t a = 1; a <= (size_t)1 << 22; a <<= 1) {
        for (size_t i = 0; i < 4; i++) {
            size_t s = asks[i];
            void *b = aligned_alloc(a, s);
            CHECK(b && aligned_to(b, a) && malloc_usable_size(b) >= s, "aligned_alloc(%zu, %zu)",
                  a, s);
            free(b);
            b = aligned_alloc(a, a * 3);
            CHECK(b && aligned_to(b, a), "aligned_alloc(%zu, %zu)", a, a * 3);
            free(b);
            b = memalign(a, s);
            CHECK(b && aligned_to(b, a) && malloc_usable_size(b) >= s, "memalign(%zu, %zu)", a, s);
            free(b);
        }
    }
    size_t odd[] = {0, 3, 24, 48, 4097};
    for (size_t i = 0; i < 5; i++) {
        errno = 0;
        void *b = aligned_alloc(odd[i], 64);
        printf("aligned_alloc(%zu, 64) -> %s errno %s\n", odd[i], b ? "a block" : "NULL",
               errno == EINVAL ? "EINVAL" : errno ? "other" : "0");
        free(b);
        errno = 0;
        b = memalign(odd[i], 64);
        printf("memalign(%zu, 64) -> %s errno %s\n", odd[i], b ? "a block" : "NULL",
               errno == EINVAL ? "EINVAL" : errno ? "other" : "0");
        free(b);
    }
    errno = 0;
    void *b = aligned_alloc(64, huge - 4096);
    CHECK(b == NULL && errno == ENOMEM, "aligned_alloc(64, huge): %p errno %d", b, errno);

    /* valloc and pvalloc: page-aligned; pvalloc rounds the size up to a
     * page. */
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (size_t i = 0; i < 4; i++) {
        void *v = valloc(asks[i]);
        CHECK(v && aligned_to(v, page) && malloc_usable_size(v) >= asks[i], "valloc(%zu)", asks[i]);
        free(v);
        v = pvalloc(asks[i]);
        size_t rounded = (asks[i] + page - 1) / page * page;
        CHECK(v && aligned_to(v, page) && malloc_usable_size(v) >= rounded, "pvalloc(%zu)",
              asks[i]);
        if (v)
            memset(v, 2, rounded);
        free(v);
    }

    /* Anonymous mappings, unmapped whole, by prefix, by suffix and in the
     * middle; a refused one is MAP_FAILED with errno. */
    for (int i = 0; i < 4; i++) {
        size_t len = 16 * page;
        unsigned char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        CHECK(m != MAP_FAILED, "mmap");
        if (m == MAP_FAILED)
            continue;
        memset(m, 5, len);
        int rc = 0;
        if (i == 0)
            rc = munmap(m, len);
        else if (i == 1)
            rc = munmap(m, 4 * page) | munmap(m + 4 * page, len - 4 * page);
        else if (i == 2)
            rc = munmap(m + 12 * page, 4 * page) | munmap(m, 12 * page);
        else
            rc = munmap(m + 4 * page, 4 * page) | munmap(m, 4 * page) | munmap(m + 8 * page, 8 * page);
        CHECK(rc == 0, "munmap case %d", i);
    }
    errno = 0;
    void *m = mmap(NULL, 0, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m == MAP_FAILED && errno == EINVAL, "mmap of 0 bytes: %p errno %d", m, errno);
    errno = 0;
    int rc = munmap((void *)(uintptr_t)1, page);
    CHECK(rc == -1 && errno == EINVAL, "munmap of an unaligned address: %d errno %d", rc, errno);
    printf("edges done\n");
}

/* ------------------------------------------------------------------------
 * Threads that allocate and free each other's blocks, while the main thread
 * forks. */

#define EXCHANGE 4096
static struct {
    pthread_mutex_t lock;
    unsigned char *block[EXCHANGE];
    size_t size[EXCHANGE];
    unsigned tag[EXCHANGE];
} ex = {.lock = PTHREAD_MUTEX_INITIALIZER};

static long ops_per_thread;
static volatile int stop_forking;

static void *worker(void *arg) {
    uint64_t s = 0x9E3779B97F4A7C15ULL * (uintptr_t)arg + 1;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (long i = 0; i < ops_per_thread; i++) {
        uint64_t r = rng_next(&s);
        size_t size;
        switch (r % 16) {
        case 0:
            size = 100000 + r % 400000; /* mapped by glibc */
            break;
        case 1:
        case 2:
            size = 2000 + r % 30000;
            break;
        default:
            size = 1 + r % 700;
        }
        unsigned char *p;
        unsigned kind = (r >> 8) % 8;
        if (kind == 0) {
            p = calloc(1, size);
        } else if (kind == 1) {
            void *out = NULL;
            p = posix_memalign(&out, (size_t)64 << (r >> 12) % 6, size) == 0 ? out : NULL;
        } else if (kind == 2) {
            p = realloc(malloc(1 + r % 50), size);
        } else if (kind == 3 && r % 97 == 0) {
            /* A mapping of its own, unmapped at once. */
            size_t len = page * (1 + r % 16);
            unsigned char *m =
                mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            CHECK(m != MAP_FAILED, "mmap in a thread");
            if (m != MAP_FAILED) {
                m[0] = m[len - 1] = 1;
                CHECK(munmap(m, len) == 0, "munmap in a thread");
            }
            continue;
        } else {
            p = malloc(size);
        }
        CHECK(p != NULL, "allocating %zu", size);
        if (!p)
            continue;
        unsigned tag = (unsigned)(r >> 32);
        fill(p, size < 256 ? size : 256, tag);
        /* Swap it into the exchange: the block found there (another
         * thread's, likely) is checked and freed, or grown first. */
        size_t at = (r >> 20) % EXCHANGE;
        pthread_mutex_lock(&ex.lock);
        unsigned char *old = ex.block[at];
        size_t old_size = ex.size[at];
        unsigned old_tag = ex.tag[at];
        ex.block[at] = p;
        ex.size[at] = size;
        ex.tag[at] = tag;
        pthread_mutex_unlock(&ex.lock);
        if (old) {
            size_t n = old_size < 256 ? old_size : 256;
            CHECK(intact(old, n, old_tag), "a block of %zu bytes changed while held", old_size);
            CHECK(malloc_usable_size(old) >= old_size, "usable size below %zu", old_size);
            if ((r >> 40) % 5 == 0) {
                old = realloc(old, old_size * 2 + 1);
                CHECK(old && intact(old, n, old_tag), "realloc lost contents");
            }
            free(old);
        }
    }
    return NULL;
}

/* A forked child: allocates while it is the only thread, then exits, or
 * execs (the preload is carried into the new program). */
static void child(int i) {
    uint64_t s = (uint64_t)i * 7919 + 11;
    void *held[64] = {0};
    for (int k = 0; k < 20000; k++) {
        uint64_t r = rng_next(&s);
        int at = (int)(r % 64);
        free(held[at]);
        held[at] = (r >> 10) % 3 == 0 ? calloc(1, 1 + r % 3000) : malloc(1 + r % 3000);
        if (!held[at])
            _exit(3);
        memset(held[at], 1, 1);
    }
    for (int at = 0; at < 64; at++)
        free(held[at]);
    if (i % 3 == 0) {
        execl("/bin/sh", "sh", "-c", "exit 0", (char *)NULL);
        _exit(4);
    }
    exit(failures ? 2 : 0);
}

static void threads_and_forks(int n_threads, int n_forks) {
    pthread_t t[64];
    for (int i = 0; i < n_threads; i++)
        pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1));
    int bad = 0;
    for (int i = 0; i < n_forks; i++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0)
            child(i);
        CHECK(pid > 0, "fork");
        int status = 0;
        CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            bad++;
            fprintf(stderr, "FAIL child %d: status %#x\n", i, status);
        }
    }
    for (int i = 0; i < n_threads; i++)
        pthread_join(t[i], NULL);
    CHECK(bad == 0, "%d of %d forked children failed", bad, n_forks);
    for (int at = 0; at < EXCHANGE; at++) {
        if (ex.block[at]) {
            size_t n = ex.size[at] < 256 ? ex.size[at] : 256;
            CHECK(intact(ex.block[at], n, ex.tag[at]), "a held block changed");
            free(ex.block[at]);
            ex.block[at] = NULL;
        }
    }
    printf("threads %d, forks %d done\n", n_threads, n_forks);
}

/* ------------------------------------------------------------------------
 * A signal handler that allocates, interrupting a loop that allocates.
 *
 * glibc's malloc is not async-signal-safe: a handler's malloc that lands
 * inside the interrupted thread's malloc can deadlock on the arena's lock.
 * So the loop and the handler use sizes of two different tcache bins,
 * both warmed first: each malloc and free is then a lock-free tcache hit
 * in glibc, and the run without the preload is sound. Any deadlock or
 * damage is the wrapper's. */

static volatile sig_atomic_t handled;
static volatile int handler_bad;

static void on_alarm(int sig) {
    (void)sig;
    int saved = errno;
    unsigned char *p = malloc(200);
    if (!p) {
        handler_bad = 1;
    } else {
        fill(p, 200, 9);
        if (!intact(p, 200, 9))
            handler_bad = 1;
        free(p);
    }
    handled++;
    errno = saved;
}

static void signals(int wanted) {
    free(malloc(200));
    free(malloc(40));
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 200}, {0, 200}};
    int armed = setitimer(ITIMER_REAL, &it, NULL) == 0;
    CHECK(armed, "setitimer: errno %d", errno);
    /* On until the handler ran `wanted` times, however fast the machine
     * (a run whose signals stop is a hang, which the test bounds). */
    long i = 0;
    while (armed && handled < wanted) {
        unsigned char *p = malloc(40);
        if (!p) {
            handler_bad = 1;
            break;
        }
        p[0] = (unsigned char)i;
        KEEP(p);
        free(p);
        i++;
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    signal(SIGALRM, SIG_IGN);
    CHECK(!handler_bad, "a handler's block was damaged");
    CHECK(handled >= wanted, "the handler ran %d times of %d", (int)handled, wanted);
    printf("signals done\n");
}

int main(int argc, char **argv) {
    int n_threads = argc > 1 ? atoi(argv[1]) : 8;
    ops_per_thread = argc > 2 ? atol(argv[2]) : 50000;
    int n_forks = argc > 3 ? atoi(argv[3]) : 24;
    int wanted = argc > 4 ? atoi(argv[4]) : 2000;
    if (n_threads > 64)
        n_threads = 64;
    setvbuf(stdout, NULL, _IOLBF, 0);
    edges();
    threads_and_forks(n_threads, n_forks);
    signals(wanted);
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("all checks passed\n");
    return 0;
}
