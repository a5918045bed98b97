/* A library a program loads and unloads at run time (scenarios.c "dlclose_refresh"): it launches
 * a kernel through the launch function it is given, so the launch stack goes through it. */
typedef unsigned int CUresult;
typedef CUresult (*launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, void *, void **, void **);

/* Built with -DPLUGIN_B as another library of the same size (the "unloaded_plugin" scenario loads
 * it where the first one was): the same code under another name. */
#ifdef PLUGIN_B
#define launch_from_plugin plugin_b_free_buffers
#endif

__attribute__((noinline)) CUresult launch_from_plugin(launch_fn launch, void *f, void **params) {
    CUresult rc = launch(f, 8, 1, 1, 256, 1, 1, 0, 0, params, 0);
    __asm__ volatile("");
    return rc;
}
