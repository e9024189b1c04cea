/* A stand-in for NVIDIA's NVML (libnvidia-ml.so.1), for tests on machines
 * without a GPU: the entry points flatline's GPU probe calls, answering from
 * a script a test writes. flatline loads it through FLATLINE_NVML_LIB.
 *
 * The script is the file named by FLATLINE_NVML_STUB, read again at every
 * call (a test may rewrite it mid-run), one item a line:
 *
 *   driver VERSION
 *   device INDEX NAME TOTAL USED RATE UTIL TEMP LOST_AFTER
 *   proc INDEX PID USED RATE
 *
 * Memory in bytes; RATE in bytes per second since nvmlInit_v2, so a leak of
 * a known slope can be scripted; LOST_AFTER in seconds after which the
 * device answers NVML_ERROR_GPU_IS_LOST (negative: never). NAME has no
 * spaces. Built by the tests with `cc -shared -fPIC`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int nvmlReturn_t;
typedef void *nvmlDevice_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_UNKNOWN = 999,
};

typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;

typedef struct {
    unsigned int gpu, memory;
} nvmlUtilization_t;

typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

#define MAX_DEVICES 8
#define MAX_PROCS 64

struct device {
    char name[64];
    double total, used, rate, lost_after;
    unsigned int util, temp;
};

struct proc {
    unsigned int device, pid;
    double used, rate;
};

static struct timespec started;
static char driver[80];
static struct device devices[MAX_DEVICES];
static unsigned int device_count;
static struct proc procs[MAX_PROCS];
static unsigned int proc_count;

static double since_init(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - started.tv_sec) + (now.tv_nsec - started.tv_nsec) / 1e9;
}

/* Reads the script; 0 on success. */
static int load(void) {
    const char *path = getenv("FLATLINE_NVML_STUB");
    FILE *f = path ? fopen(path, "r") : NULL;
    char line[256];
    if (!f) return -1;
    device_count = 0;
    proc_count = 0;
    strcpy(driver, "0.0");
    while (fgets(line, sizeof line, f)) {
        struct device d;
        struct proc p;
        unsigned int i;
        if (sscanf(line, "driver %79s", driver) == 1) continue;
        if (sscanf(line, "device %u %63s %lf %lf %lf %u %u %lf", &i, d.name, &d.total, &d.used,
                   &d.rate, &d.util, &d.temp, &d.lost_after) == 8 &&
            i < MAX_DEVICES) {
            devices[i] = d;
            if (i + 1 > device_count) device_count = i + 1;
            continue;
        }
        if (sscanf(line, "proc %u %u %lf %lf", &p.device, &p.pid, &p.used, &p.rate) == 4 &&
            proc_count < MAX_PROCS) {
            procs[proc_count++] = p;
        }
    }
    fclose(f);
    return 0;
}

/* The device behind a handle, or an error code. */
static nvmlReturn_t device_of(nvmlDevice_t h, struct device **out, unsigned int *index) {
    unsigned long i = (unsigned long)h;
    if (load() != 0) return NVML_ERROR_UNKNOWN;
    if (i == 0 || i > device_count) return NVML_ERROR_INVALID_ARGUMENT;
    *out = &devices[i - 1];
    if (index) *index = (unsigned int)(i - 1);
    if ((*out)->lost_after >= 0 && since_init() >= (*out)->lost_after) return NVML_ERROR_GPU_IS_LOST;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void) {
    clock_gettime(CLOCK_MONOTONIC, &started);
    return load() == 0 ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    return nvmlInit_v2();
}

nvmlReturn_t nvmlShutdown(void) { return NVML_SUCCESS; }

const char *nvmlErrorString(nvmlReturn_t r) { return r == 0 ? "Success" : "stub error"; }

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    if (load() != 0) return NVML_ERROR_UNKNOWN;
    snprintf(version, length, "%s", driver);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    if (load() != 0) return NVML_ERROR_UNKNOWN;
    *count = device_count;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    if (load() != 0) return NVML_ERROR_UNKNOWN;
    if (index >= device_count) return NVML_ERROR_INVALID_ARGUMENT;
    *device = (nvmlDevice_t)(unsigned long)(index + 1);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t h, char *name, unsigned int length) {
    struct device *d;
    nvmlReturn_t r = device_of(h, &d, NULL);
    if (r == NVML_SUCCESS) snprintf(name, length, "%s", d->name);
    return r;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t h, nvmlMemory_v2_t *m) {
    struct device *d;
    nvmlReturn_t r = device_of(h, &d, NULL);
    if (r != NVML_SUCCESS) return r;
    m->total = (unsigned long long)d->total;
    m->used = (unsigned long long)(d->used + d->rate * since_init());
    m->reserved = 0;
    m->free = m->total > m->used ? m->total - m->used : 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t h, nvmlUtilization_t *u) {
    struct device *d;
    nvmlReturn_t r = device_of(h, &d, NULL);
    if (r != NVML_SUCCESS) return r;
    u->gpu = d->util;
    u->memory = d->util;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t h, int sensor, unsigned int *temp) {
    struct device *d;
    nvmlReturn_t r = device_of(h, &d, NULL);
    (void)sensor;
    if (r == NVML_SUCCESS) *temp = d->temp;
    return r;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t h, unsigned int *count,
                                                     nvmlProcessInfo_t *infos) {
    struct device *d;
    unsigned int index, n = 0, k;
    nvmlReturn_t r = device_of(h, &d, &index);
    if (r != NVML_SUCCESS) return r;
    for (k = 0; k < proc_count; k++)
        if (procs[k].device == index) n++;
    if (infos == NULL || *count < n) {
        *count = n;
        return n == 0 ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
    }
    n = 0;
    for (k = 0; k < proc_count; k++) {
        if (procs[k].device != index) continue;
        infos[n].pid = procs[k].pid;
        infos[n].usedGpuMemory = (unsigned long long)(procs[k].used + procs[k].rate * since_init());
        infos[n].gpuInstanceId = 0xFFFFFFFF;
        infos[n].computeInstanceId = 0xFFFFFFFF;
        n++;
    }
    *count = n;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t h, unsigned int *count,
                                                      nvmlProcessInfo_t *infos) {
    struct device *d;
    nvmlReturn_t r = device_of(h, &d, NULL);
    (void)infos;
    if (r == NVML_SUCCESS) *count = 0;
    return r;
}
