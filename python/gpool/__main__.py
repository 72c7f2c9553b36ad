"""``python -m gpool run [--stats] -- PROGRAM ARGS...``: run a program under gpool's drop-in
(gpool/run.py); ``python -m gpool version``: the library's version and files.
The ``gpool-run`` console script is main() with ``run`` implied."""

import sys


def _usage():
    sys.stderr.write("usage: python -m gpool run [--stats] [--conf CONF] -- PROGRAM ARGS...\n"
                     "       python -m gpool version\n")
    return 2


def module_main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        return _usage()
    if argv[0] == "run":
        from .run import run

        return run(argv[1:], prog="python -m gpool run")
    if argv[0] == "version":
        import gpool
        from .run import preload_path

        print("gpool %s (package %s)" % (gpool.version(), gpool.__version__))
        print("library: %s" % gpool.library_path())
        try:
            print("drop-in: %s" % preload_path())
        except OSError as e:
            print("drop-in: %s" % e)
        return 0
    return _usage()


def main(argv=None):
    """The gpool-run console script."""
    from .run import run

    return run(sys.argv[1:] if argv is None else argv, prog="gpool-run")


if __name__ == "__main__":
    sys.exit(module_main())
