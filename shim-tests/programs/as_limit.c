/* as_limit.c: a program under an address-space limit (RLIMIT_AS) that leaves little room, whose
 * kernel faults (robust.rs, `a_fault_under_an_address_space_limit_keeps_the_program`). After its
 * setup it limits its address space to what it uses now plus HEADROOM_MB (default 48) MiB: room
 * for its own work, not for cudablame's symbolizer to map and parse a large module's debug
 * information at report time. Rust aborts on a failed allocation (no unwinding to catch), so a
 * report that tried killed the program with SIGABRT (a break-it review).
 * Usage: as_limit   (linked with -lcuda; prints sync_rc=N; exits 0) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include "cuda_min.h"
#include "check.h"

static const char *MODULE =
    "// fake: ok\n"
    "// fake: bad fault=700 delay_us=20000\n";

/* The process's address space now (VmSize, bytes), 0 if unknown. */
static unsigned long long vm_size(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmSize:", 7)) kb = strtoull(line + 7, NULL, 10);
    if (f) fclose(f);
    return kb << 10;
}

int main(void) {
    CUfunction ok, bad;
    CUstream s = ok_and_bad(MODULE, &ok, &bad);
    for (int i = 0; i < 64; i++) launch_checked(ok, s);
    check("sync", cuStreamSynchronize(s));
    const char *mb = getenv("HEADROOM_MB");
    unsigned long long limit = vm_size() + ((unsigned long long)(mb ? atoi(mb) : 48) << 20);
    struct rlimit r = {limit, limit};
    check("setrlimit", setrlimit(RLIMIT_AS, &r) ? 1 : 0);
    launch_checked(bad, s);
    printf("sync_rc=%u\n", cuStreamSynchronize(s));
    return 0;
}
