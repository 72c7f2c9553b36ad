"""``python -m gpool run [--stats] -- PROGRAM ARGS...``: run a program under gpool's drop-in
(gpool/run.py); ``python -m gpool version``: the library's version and files.
The ``gpool-run`` console script is main() with ``run`` implied.

``-h``/``--help`` prints the usage on stdout (status 0); a wrong usage prints it on stderr
(status 2). A file that cannot be found or loaded (libgpool.so, the drop-in) is one line on
stderr and status 127, as ``run`` does."""

import sys

USAGE = ("usage: python -m gpool run [--stats] [--conf CONF] -- PROGRAM ARGS...\n"
         "       python -m gpool version\n")
HELP = ("-h", "--help")


def _usage(help_asked=False):
    """--help: the usage on stdout, 0; a wrong usage: on stderr, 2."""
    if help_asked:
        sys.stdout.write(USAGE)
        return 0
    sys.stderr.write(USAGE)
    return 2


def _version():
    import gpool
    from .run import preload_path

    try:
        line = "gpool %s (package %s)" % (gpool.version(), gpool.__version__)
        library = gpool.library_path()
    except OSError as e:  # the loader's message: every path it tried, and why each failed
        sys.stderr.write("%s\n" % e)
        return 127
    print(line)
    print("library: %s" % library)
    try:
        print("drop-in: %s" % preload_path())
    except OSError as e:
        print("drop-in: %s" % e)
    return 0


def module_main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in HELP:
        return _usage(help_asked=bool(argv))
    if argv[0] == "run":
        from .run import run

        return run(argv[1:], prog="python -m gpool run")
    if argv[0] == "version":
        if any(a in HELP for a in argv[1:]):
            return _usage(help_asked=True)
        if argv[1:]:
            return _usage()
        return _version()
    return _usage()


def main(argv=None):
    """The gpool-run console script."""
    from .run import run

    return run(sys.argv[1:] if argv is None else argv, prog="gpool-run")


if __name__ == "__main__":
    sys.exit(module_main())
