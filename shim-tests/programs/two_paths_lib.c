/* One call that reaches one launch by two native paths (tests/python.rs, py_launch.py
 * "two_paths"): forward() launches `f` through via_first_path when `which` is 0, else through
 * via_second_path, so one Python line launching one kernel has two native stacks, at the same
 * depth of the thread's stack (the two frames are alike but for their return addresses): only
 * the return addresses tell them apart. */
typedef unsigned int CUresult;
typedef CUresult (*launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, void *, void **, void **);

__attribute__((noinline)) CUresult via_first_path(launch_fn launch, void *f) {
    CUresult rc = launch(f, 1, 1, 1, 32, 1, 1, 0, 0, 0, 0);
    __asm__ volatile("");
    return rc;
}

__attribute__((noinline)) CUresult via_second_path(launch_fn launch, void *f) {
    CUresult rc = launch(f, 1, 1, 1, 64, 1, 1, 0, 0, 0, 0);
    __asm__ volatile("");
    return rc;
}

CUresult forward(launch_fn launch, void *f, int which) {
    CUresult rc = which ? via_second_path(launch, f) : via_first_path(launch, f);
    __asm__ volatile("");
    return rc;
}
