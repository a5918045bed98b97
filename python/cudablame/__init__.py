"""cudablame: names the kernel launch that caused an asynchronous CUDA error.

The package installs the `cudablame` command (a native program that carries libcudablame.so);
this module only finds it, for `python -m cudablame`:

    python -m cudablame run -- python train.py
"""

import os
import shutil
import sys
import sysconfig

__all__ = ["binary", "main"]


def binary() -> str:
    """Path of the installed `cudablame` command."""
    exe = "cudablame"
    dirs = []
    try:
        dirs.append(sysconfig.get_path("scripts"))
    except KeyError:
        pass
    dirs.append(os.path.dirname(sys.executable))
    for scheme in ("posix_user", "posix_prefix"):
        try:
            dirs.append(sysconfig.get_path("scripts", scheme))
        except KeyError:
            pass
    for d in dirs:
        p = os.path.join(d, exe)
        if d and os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    found = shutil.which(exe)
    if found:
        return found
    raise FileNotFoundError(
        "the cudablame command is not installed beside this Python (looked in %s and PATH)"
        % ", ".join(d for d in dirs if d)
    )


def main() -> None:
    """Replaces this process with the `cudablame` command and the given arguments."""
    try:
        path = binary()
    except FileNotFoundError as e:
        sys.stderr.write("cudablame: %s\n" % e)
        sys.exit(127)
    # A library shipped in this package's directory is found before the embedded copy.
    here = os.path.dirname(os.path.abspath(__file__))
    lib = os.path.join(here, "libcudablame.so")
    if "CUDABLAME_LIB" not in os.environ and os.path.isfile(lib):
        os.environ["CUDABLAME_LIB"] = lib
    os.execv(path, [path] + sys.argv[1:])
