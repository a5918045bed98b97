// ns per cuCtxGetCurrent / clock_gettime(CLOCK_REALTIME) / rdtsc, hot (back to back) and cold
// (2 MiB of other data written between calls, each call timed alone with rdtsc).
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>
static double ns_per_tick;
static char *junk;
static void pollute(void) { for (size_t i = 0; i < (2u << 20); i += 64) junk[i]++; }
int main(void) {
  CUdevice d; CUcontext c, got;
  cuInit(0); cuDeviceGet(&d, 0); cuDevicePrimaryCtxRetain(&c, d); cuCtxSetCurrent(c);
  junk = malloc(2u << 20); memset(junk, 1, 2u << 20);
  struct timespec a, b; clock_gettime(CLOCK_MONOTONIC, &a); unsigned long long t0 = __rdtsc();
  for (volatile int i = 0; i < 50000000; i++) {}
  clock_gettime(CLOCK_MONOTONIC, &b); unsigned long long t1 = __rdtsc();
  ns_per_tick = ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / (double)(t1 - t0);
  const int N = 1000000, M = 2000;
  struct timespec ts;
  for (int k = 0; k < 3; k++) {
    unsigned long long s = __rdtsc();
    for (int i = 0; i < N; i++) cuCtxGetCurrent(&got);
    double ctx_hot = (__rdtsc() - s) * ns_per_tick / N;
    s = __rdtsc();
    for (int i = 0; i < N; i++) clock_gettime(CLOCK_REALTIME, &ts);
    double clk_hot = (__rdtsc() - s) * ns_per_tick / N;
    unsigned long long sum_ctx = 0, sum_clk = 0, sum_tsc = 0;
    for (int i = 0; i < M; i++) {
      pollute(); s = __rdtsc(); cuCtxGetCurrent(&got); sum_ctx += __rdtsc() - s;
      pollute(); s = __rdtsc(); clock_gettime(CLOCK_REALTIME, &ts); sum_clk += __rdtsc() - s;
      pollute(); s = __rdtsc(); sum_tsc += __rdtsc() - s;
    }
    printf("round %d: cuCtxGetCurrent hot %.1f ns cold %.1f ns; clock_gettime hot %.1f cold %.1f; "
           "empty rdtsc pair cold %.1f\n", k, ctx_hot, sum_ctx * ns_per_tick / M, clk_hot,
           sum_clk * ns_per_tick / M, sum_tsc * ns_per_tick / M);
  }
  return got == c ? 0 : 1;
}
